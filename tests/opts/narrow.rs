//! Reduce loops narrowed to where their gated terms can be nonzero: a conv's input gradient (a
//! transposed conv over the output gradient padded by the kernel's size less one) runs its loop
//! over the kernel's rows only over the rows that hold gradient, not the padding's zeros.

use lazygrad::codegen::get_program;
use lazygrad::renderer::c::CRenderer;

use super::*;

/// The float64 input gradient of `conv2d(x, w, opts)` (`x` `(n, cin, h, h)`, `w` `(cout, cin, k,
/// k)`) for the output gradient `g` (`(n, cout, o, o)`), each term scattered where it lands.
fn input_gradient_f64(x: &[usize; 4], w: &Tensor, g: &Tensor, (s, d, p): (usize, usize, isize)) -> Vec<f64> {
    let ([n, cin, h, _], [cout, _, k, _]) = (*x, w.shape()[..].try_into().unwrap());
    let o = g.shape()[2];
    let (wv, gv) = (w.to_vec::<f32>(), g.to_vec::<f32>());
    let mut dx = vec![0f64; n * cin * h * h];
    for (b, co, oy, ox) in
        (0..n).flat_map(|b| (0..cout).flat_map(move |co| (0..o * o).map(move |p| (b, co, p / o, p % o))))
    {
        let gval = gv[((b * cout + co) * o + oy) * o + ox] as f64;
        for (ci, ky, kx) in (0..cin).flat_map(|ci| (0..k * k).map(move |t| (ci, t / k, t % k))) {
            let (iy, ix) = ((oy * s + ky * d) as isize - p, (ox * s + kx * d) as isize - p);
            if (0..h as isize).contains(&iy) && (0..h as isize).contains(&ix) {
                dx[((b * cin + ci) * h + iy as usize) * h + ix as usize] +=
                    gval * wv[((co * cin + ci) * k + ky) * k + kx] as f64;
            }
        }
    }
    dx
}

/// The operations counted for each kernel of `t`'s schedule that loops over a reduce axis a
/// number of times that depends on where it is (a narrowed loop: its size is no constant).
fn narrowed_kernel_ops(t: &Tensor) -> Vec<u64> {
    let narrowed = |u: &lazygrad::uop::UOp| {
        matches!(u.arg(), Arg::Range(_, AxisKind::Reduce)) && u.src()[0].const_int_value().is_none()
    };
    kernel_asts(t)
        .iter()
        .map(|ast| get_program(ast, &CRenderer).expect("the kernel compiles"))
        .filter(|spec| spec.uops.iter().any(narrowed))
        .map(|spec| spec.ops)
        .collect()
}

#[test]
fn an_input_gradient_loops_over_the_rows_with_gradient_only() {
    let _serial = serial();
    Tensor::manual_seed(12);
    // (stride, dilation, padding): every one leaves rows of the transposed conv's input that are
    // padding; beautiful_mnist's are the first (5x5, no padding: 4 rows of zeros each side)
    for (i, &(s, d, p)) in [(1, 1, 0), (2, 1, 1), (1, 2, 2), (1, 1, 2)].iter().enumerate() {
        let x = Tensor::randn(&[2, 16, 11, 11]).realize();
        let w = Tensor::randn(&[16, 16, 5, 5]).realize();
        let opts = ConvOpts::default().stride(s).dilation(d).padding(p);
        let o = (11 + 2 * p - d * 4 - 1) / s + 1;
        let g = Tensor::randn(&[2, 16, o, o]).realize();
        let input_gradient = |dev: &str| {
            let x = x.to(dev).requires_grad(true);
            let y = x.conv2d(&w.to(dev), None, &opts);
            (&y * &g.to(dev)).sum(None, false).gradient(&[&x]).remove(0)
        };
        let dx = input_gradient("CPU");
        let ops = narrowed_kernel_ops(&dx);
        assert_eq!(ops.len(), 1, "config {i}: the loop over the kernel's rows is narrowed");
        if s == 1 {
            // counted as if it were not narrowed: a multiply-add per tap and input pixel
            assert_eq!(ops[0], 2 * 2 * 16 * 11 * 11 * 16 * 25, "config {i}: the padded conv's operations");
        }
        let want = input_gradient_f64(&[2, 16, 11, 11], &w, &g, (s, d, p as isize));
        for (dev, got) in [("CPU", dx.to_vec::<f32>()), ("INTERP", input_gradient("INTERP").to_vec::<f32>())] {
            for (j, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_sum(format!("config {i} on {dev}: dx[{j}]"), *got, *want);
            }
        }
    }
}

#[test]
fn a_forward_convolution_keeps_its_padding_stored() {
    let _serial = serial();
    Tensor::manual_seed(13);
    // a forward conv's padding is a few rows (none here): its windows read the stored padded
    // input with no gated loads to narrow, so its loops keep their sizes
    let x = Tensor::randn(&[2, 16, 12, 12]).realize();
    let w = Tensor::randn(&[16, 16, 3, 3]).realize();
    let z = x.conv2d(&w, None, &ConvOpts::default().padding(1));
    assert!(narrowed_kernel_ops(&z).is_empty());
}
