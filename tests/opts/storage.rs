//! Where a kernel's output is stored and in what order: channels-last intermediates, layouts
//! kept from the input, rotated values stored row-major, and the vector reads that follow.

use super::*;

/// Channels-last `(2, 4, 4, 32)` data read as `(batch, channel, y, x)` and max-pooled 2×2, and
/// the pooled values in NCHW order as computed here.
fn pooled_channels_last(seed: u64) -> (Tensor, Vec<f32>) {
    Tensor::manual_seed(seed);
    let (b, h, c) = (2, 4, 32);
    let nhwc = Tensor::randn(&[b, h, h, c]).realize();
    let v = nhwc.to_vec::<f32>();
    let want = (0..b * c * 4)
        .map(|i| {
            let (n, ch, oy, ox) = (i / (c * 4), i / 4 % c, i / 2 % 2, i % 2);
            let at = |y: usize, x: usize| v[((n * h + y) * h + x) * c + ch];
            [(0, 0), (0, 1), (1, 0), (1, 1)]
                .iter()
                .map(|&(dy, dx)| at(2 * oy + dy, 2 * ox + dx))
                .fold(f32::MIN, f32::max)
        })
        .collect();
    (nhwc.permute(&[0, 3, 1, 2]).max_pool2d(&PoolOpts::default()), want)
}

#[test]
fn reduces_over_channels_last_data_load_channel_vectors() {
    let _serial = serial();
    let (pooled, want) = pooled_channels_last(4);
    let ast = kernel_asts(&pooled).remove(0);
    let spec = lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap();
    // 16 channels per vector load and max; a requested output is stored NCHW, one channel at a time
    assert!(spec.src.contains("lg_max_float16("), "{}", spec.src);
    assert!(spec.src.contains("float16 val0; __builtin_memcpy(&val0, &data1["), "{}", spec.src);
    assert!(spec.src.contains("= acc0[15];"), "{}", spec.src);
    assert_eq!(pooled.to_vec::<f32>(), want);
}

#[test]
fn per_channel_sums_over_channels_last_data_read_whole_pixels() {
    let _serial = serial();
    Tensor::manual_seed(8);
    // a batchnorm statistic: 32 channels, each a sum over batch and space; a pixel's 32 floats
    // are two vectors, both read in one pass
    let (b, h, c) = (8, 16, 32);
    let nhwc = Tensor::randn(&[b, h, h, c]).realize();
    let sums = nhwc.permute(&[0, 3, 1, 2]).sum([0isize, 2, 3].as_slice(), false);
    let ast = kernel_asts(&sums).remove(0);
    let opts = hand_coded_optimizations(&ast, &cpu(2));
    let channels = opts.iter().find_map(|o| match o {
        Opt::Upcast { range, amount: 16 } => Some(*range),
        _ => None,
    });
    let channels = channels.unwrap_or_else(|| panic!("no vector of channels: {opts:?}"));
    assert!(opts.contains(&Opt::Upcast { range: channels, amount: 2 }), "{opts:?}");
    let v = nhwc.to_vec::<f32>();
    for (ch, got) in sums.to_vec::<f32>().into_iter().enumerate() {
        let want: f64 = v.iter().skip(ch).step_by(c).map(|&x| x as f64).sum();
        assert!((got as f64 - want).abs() < 1e-3, "channel {ch}: {got} vs {want}");
    }
}

#[test]
fn pooled_intermediates_are_stored_channels_last() {
    let _serial = serial();
    // read by two kernels, the pooled buffer between them keeps the channels innermost and is
    // written a vector of channels at a time
    let (pooled, want) = pooled_channels_last(6);
    let (shifted, total) = (&pooled + 1.0, pooled.sum(None, false));
    let pool_kernel = Tensor::schedule(&[shifted.clone(), total.clone()])
        .into_iter()
        .find_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            ScheduleItem::Copy { .. } => None,
        })
        .unwrap();
    let spec = lazygrad::codegen::get_program(&pool_kernel, &lazygrad::renderer::c::CRenderer).unwrap();
    assert!(spec.src.contains("lg_max_float16("), "{}", spec.src);
    assert!(spec.src.contains("__builtin_memcpy(&data0["), "{}", spec.src);
    assert!(!spec.src.contains("= acc0[15];"), "{}", spec.src);
    assert_eq!(shifted.to_vec::<f32>(), want.iter().map(|w| w + 1.0).collect::<Vec<_>>());
    let sum: f64 = want.iter().map(|&w| w as f64).sum();
    assert!((total.item::<f32>() as f64 - sum).abs() < 1e-4, "{} vs {sum}", total.item::<f32>());
}

#[test]
fn intermediates_keep_the_layout_their_input_was_stored_in() {
    let _serial = serial();
    Tensor::manual_seed(7);
    // a bias and ReLU over channels-last data (a convolution's output), read by a convolution:
    // the value stored in between stays channels last, written a vector of channels at a time
    let (b, h, c, cout) = (8, 16, 32, 4);
    let nhwc = Tensor::randn(&[b, h, h, c]).realize();
    let (bias, w) = (Tensor::randn(&[c]).realize(), Tensor::randn(&[cout, c, 3, 3]).realize());
    let y = (nhwc.permute(&[0, 3, 1, 2]) + bias.reshape(&[1, c, 1, 1])).relu();
    let z = y.conv2d(&w, None, &ConvOpts::default());
    let y_kernel = Tensor::schedule(std::slice::from_ref(&z))
        .into_iter()
        .find_map(|i| match i {
            ScheduleItem::Kernel { ast, bufs } if bufs[0].size() == b * c * h * h => Some(ast),
            _ => None,
        })
        .expect("the ReLU is stored for the convolution to read");
    let spec = lazygrad::codegen::get_program(&y_kernel, &lazygrad::renderer::c::CRenderer).unwrap();
    assert!(spec.src.contains("__builtin_memcpy(&data0["), "{}", spec.src);
    assert!(!spec.src.contains("[15];"), "{}", spec.src);
    let bv = bias.to_vec::<f32>();
    let points = [(0, 0, 0, 0), (7, 3, 13, 13), (2, 2, 1, 9), (5, 1, 12, 0)];
    assert_nhwc_conv((&nhwc, h, |v, ci| (v + bv[ci]).max(0.0)), (&w, c, cout, 3), &z, &points);
}

#[test]
fn a_value_rotated_by_a_row_of_a_large_table_is_stored_row_major() {
    let _serial = serial();
    Tensor::manual_seed(11);
    // rotary embeddings: adjacent pairs of q turned by one position's angles, a row of a table
    // larger than q, and then dotted with 16 keys (so stored, not recomputed per key). The
    // table's row counts as 32 elements read, not the table's 32K, so the rotated value is stored
    // in q's order and the dot products over it read whole vectors
    let (heads, keys, hd, rows) = (9, 16, 64, 1024);
    let (q, k) = (Tensor::randn(&[heads, hd]).realize(), Tensor::randn(&[heads, keys, hd]).realize());
    let (cos, sin) = (Tensor::randn(&[rows, hd / 2]).realize(), Tensor::randn(&[rows, hd / 2]).realize());
    let at = |t: &Tensor| t.shrink(&[(5, 6), (0, hd / 2)]).reshape(&[1, hd as isize / 2, 1]);
    let pairs = q.reshape(&[heads as isize, hd as isize / 2, 2]);
    let half = |i: usize| pairs.shrink(&[(0, heads), (0, hd / 2), (i, i + 1)]);
    let (a, b, c, s) = (half(0), half(1), at(&cos), at(&sin));
    let rotated = Tensor::cat(&[&(&a * &c - &(&b * &s)), &(&a * &s + &(&b * &c))], 2);
    let scores = (rotated.reshape(&[heads, 1, hd]) * &k).sum(2, false);
    let dot = kernel_asts(&scores).pop().expect("the dot products' kernel");
    let opts = hand_coded_optimizations(&dot, &cpu(1));
    assert!(
        opts.iter().any(|o| matches!(o, Opt::Unroll { amount: 16, .. })),
        "the reduction in vector lanes: {opts:?}"
    );
    let (qv, kv, cv, sv) = (q.to_vec::<f32>(), k.to_vec::<f32>(), cos.to_vec::<f32>(), sin.to_vec::<f32>());
    for (i, got) in scores.to_vec::<f32>().into_iter().enumerate() {
        let (h, key) = (i / keys, i % keys);
        let want: f64 = (0..hd / 2)
            .map(|j| {
                let (a, b) = (qv[h * hd + 2 * j] as f64, qv[h * hd + 2 * j + 1] as f64);
                let (c, s) = (cv[5 * hd / 2 + j] as f64, sv[5 * hd / 2 + j] as f64);
                let key_at = |d: usize| kv[(h * keys + key) * hd + d] as f64;
                (a * c - b * s) * key_at(2 * j) + (a * s + b * c) * key_at(2 * j + 1)
            })
            .sum();
        assert!((got as f64 - want).abs() < 1e-4, "head {h} key {key}: {got} vs {want}");
    }
}

#[test]
fn channels_last_data_stored_channels_first_walks_the_channels_innermost() {
    let _serial = serial();
    Tensor::manual_seed(8);
    // a convolution's channels-last result stored NCHW: the vectors run along the output's
    // columns, gathering a channel of 16 pixels; with the channels innermost, the next channels of
    // those pixels (the same cache lines) come next, before the rows move on
    let nhwc = Tensor::rand(&[2, 32, 32, 32]).realize();
    let nchw = nhwc.permute(&[0, 3, 1, 2]).contiguous();
    let asts = kernel_asts(&nchw);
    assert_eq!(asts.len(), 1);
    let opts = hand_coded_optimizations(&asts[0], &cpu(2));
    let want = [
        Opt::Upcast { range: 3, amount: 16 },
        Opt::Swap { range: 1, with: 2 },
        Opt::Swap { range: 2, with: 3 },
        Opt::Thread(2),
    ];
    assert_eq!(opts, want);
    let host: Vec<f32> = nhwc.to_vec();
    for dev in ["CPU", "INTERP"] {
        let got: Vec<f32> = nhwc.to(dev).permute(&[0, 3, 1, 2]).contiguous().to_vec();
        for (i, g) in got.iter().enumerate() {
            let (n, c, y, x) = (i / 32768, i / 1024 % 32, i / 32 % 32, i % 32);
            assert_eq!(*g, host[((n * 32 + y) * 32 + x) * 32 + c], "{dev} [{n},{c},{y},{x}]");
        }
    }
}

/// Check `z`, the 3x3 convolution with padding 1 of the NCHW `(2, 16, 12, 12)` input `x` (its
/// element `[n, c, y, x]` read by `at`) with `w` `(16, 16, 3, 3)`, against float64 sums at a few
/// output points.
fn assert_padded_conv(at: impl Fn(usize, usize, usize, usize) -> f32, w: &Tensor, z: &Tensor) {
    let (wv, got) = (w.to_vec::<f32>(), z.to_vec::<f32>());
    for (n, co, oy, ox) in [(0, 0, 0, 0), (1, 15, 11, 11), (0, 7, 0, 11), (1, 3, 5, 6)] {
        let mut want = 0f64;
        for (ci, ky, kx) in (0..16).flat_map(|ci| (0..3).flat_map(move |ky| (0..3).map(move |kx| (ci, ky, kx)))) {
            let (y, x) = ((oy + ky) as isize - 1, (ox + kx) as isize - 1);
            if (0..12).contains(&y) && (0..12).contains(&x) {
                want += at(n, ci, y as usize, x as usize) as f64 * wv[((co * 16 + ci) * 3 + ky) * 3 + kx] as f64;
            }
        }
        let g = got[((n * 16 + co) * 12 + oy) * 12 + ox] as f64;
        assert!((g - want).abs() <= 1e-4 * (1.0 + want.abs()), "z[{n},{co},{oy},{ox}] = {g}, want {want}");
    }
}

/// The names of the kernels that compute `t`.
fn kernel_names(t: &Tensor) -> Vec<String> {
    kernel_asts(t).iter().map(|a| KernelName::of(a).to_string()).collect()
}

#[test]
fn a_padded_convolution_pads_its_stored_input_where_it_lies() {
    let _serial = serial();
    Tensor::manual_seed(9);
    // the pad kernel reads the stored input itself, where a plain copy of it came first; the
    // kernels: the padded input, the weight laid out channels last, the conv, its NCHW result
    let (x, w) = (Tensor::randn(&[2, 16, 12, 12]).realize(), Tensor::randn(&[16, 16, 3, 3]).realize());
    let z = x.conv2d(&w, None, &ConvOpts::default().padding(1));
    let names = kernel_names(&z);
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"E_2_16_14_14".to_string()), "the padded input: {names:?}");
    let xv = x.to_vec::<f32>();
    assert_padded_conv(|n, c, y, x| xv[((n * 16 + c) * 12 + y) * 12 + x], &w, &z);
}

#[test]
fn a_padded_copy_of_channels_last_data_stays_channels_last() {
    let _serial = serial();
    Tensor::manual_seed(11);
    // an input gradient is a transposed conv of the output gradient, which is channels last (the
    // conv's output is): its padded copy is stored channels last too, whole channel vectors
    // copied pixel by pixel, where storing it NCHW gathered a channel of 16 pixels per vector;
    // only its columns are padded (the conv's loop over rows skips the rows of zeros)
    let x = Tensor::randn(&[2, 16, 12, 12]).realize();
    let w = Tensor::randn(&[16, 16, 3, 3]).realize();
    let input_gradient = |dev: &str| {
        let x = x.to(dev).requires_grad(true);
        let y = x.conv2d(&w.to(dev), None, &ConvOpts::default());
        (&y * &y).sum(None, false).gradient(&[&x]).remove(0)
    };
    let dx = input_gradient("CPU");
    let names: Vec<String> = kernel_asts(&dx).iter().map(|a| KernelName::of(a).to_string()).collect();
    assert!(names.contains(&"E_2_10_14_16".to_string()), "the padded gradient, channels last: {names:?}");
    let (got, want) = (dx.to_vec::<f32>(), input_gradient("INTERP").to_vec::<f32>());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "dx[{i}] = {g}, INTERP {w}");
    }
}
