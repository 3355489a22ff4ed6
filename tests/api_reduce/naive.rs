//! Naive f64 loop versions of torch's conv, transposed conv, pooling and interpolation indices,
//! the references `api_reduce.rs` checks the composed tensor ops against.

use lazygrad::tensor::PoolOpts;

/// A conv test case: input shape, weight shape, groups, stride, dilation, padding, and `E` (with a
/// bias, or the output padding).
pub type ConvCase<E> = ([usize; 4], [usize; 4], usize, [usize; 2], [usize; 2], [usize; 2], E);

/// Row-major strides.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The input (conv) or output (transposed conv) position `o * s + k * d - p` a kernel tap `k` at
/// position `o` reaches with stride `s`, dilation `d` and padding `p`, if it lies inside `0..n`.
fn tap(o: usize, s: usize, k: usize, d: usize, p: usize, n: usize) -> Option<usize> {
    (o * s + k * d).checked_sub(p).filter(|&i| i < n)
}

/// A 2d parameter given as one value for both axes or one per axis.
fn pair(v: &[usize]) -> [usize; 2] {
    if v.len() == 1 {
        [v[0]; 2]
    } else {
        [v[0], v[1]]
    }
}

/// torch's conv2d by loops, in f64.
#[allow(clippy::too_many_arguments)]
pub fn naive_conv2d(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    bias: Option<&[f32]>,
    g: usize,
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 2],
) -> (Vec<usize>, Vec<f64>) {
    let [bs, _, h, wd] = xs;
    let [cout, cin, kh, kw] = ws;
    let oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) / s[0] + 1;
    let ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) / s[1] + 1;
    let (xst, wst) = (strides(&xs), strides(&ws));
    let mut out = vec![];
    for b in 0..bs {
        for co in 0..cout {
            let grp = co / (cout / g);
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias.map_or(0.0, |bb| bb[co] as f64);
                    for ci in 0..cin {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let (Some(iy), Some(ix)) =
                                    (tap(oy, s[0], ky, d[0], p[0], h), tap(ox, s[1], kx, d[1], p[1], wd))
                                else {
                                    continue;
                                };
                                let xi = b * xst[0] + (grp * cin + ci) * xst[1] + iy * xst[2] + ix;
                                acc += x[xi] as f64 * w[co * wst[0] + ci * wst[1] + ky * wst[2] + kx] as f64;
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    (vec![bs, cout, oh, ow], out)
}

/// torch's conv_transpose2d by loops (scatter each input over the output), in f64.
#[allow(clippy::too_many_arguments)]
pub fn naive_conv_transpose2d(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    g: usize,
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 2],
    op: [usize; 2],
) -> (Vec<usize>, Vec<f64>) {
    let [bs, cin, h, wd] = xs;
    let [_, coutg, kh, kw] = ws;
    let cout = coutg * g;
    let oh = (h - 1) * s[0] + d[0] * (kh - 1) + op[0] + 1 - 2 * p[0];
    let ow = (wd - 1) * s[1] + d[1] * (kw - 1) + op[1] + 1 - 2 * p[1];
    let (xst, wst, ost) = (strides(&xs), strides(&ws), strides(&[bs, cout, oh, ow]));
    let mut out = vec![0.0f64; bs * cout * oh * ow];
    let cing = cin / g;
    for b in 0..bs {
        for ci in 0..cin {
            let grp = ci / cing;
            for iy in 0..h {
                for ix in 0..wd {
                    for co in 0..coutg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let (Some(y), Some(xx)) =
                                    (tap(iy, s[0], ky, d[0], p[0], oh), tap(ix, s[1], kx, d[1], p[1], ow))
                                else {
                                    continue;
                                };
                                let v = x[b * xst[0] + ci * xst[1] + iy * xst[2] + ix] as f64
                                    * w[ci * wst[0] + co * wst[1] + ky * wst[2] + kx] as f64;
                                out[b * ost[0] + (grp * coutg + co) * ost[1] + y * ost[2] + xx] += v;
                            }
                        }
                    }
                }
            }
        }
    }
    (vec![bs, cout, oh, ow], out)
}

/// torch's max/avg pooling of one `(h, w)` plane by loops, in f64.
pub fn naive_pool(x: &[f32], h: usize, w: usize, o: &PoolOpts, max: bool) -> (usize, usize, Vec<f64>) {
    let k = pair(&o.kernel.0);
    let s = o.stride.as_ref().map_or(k, |s| pair(&s.0));
    let padding: Vec<usize> = o.padding.0.iter().map(|&v| usize::try_from(v).expect("a naive pool pads")).collect();
    let (d, p) = (pair(&o.dilation.0), pair(&padding));
    let size = |i: usize, j: usize| {
        let span = i + 2 * p[j] - d[j] * (k[j] - 1) - 1;
        let mut n = if o.ceil_mode { span.div_ceil(s[j]) + 1 } else { span / s[j] + 1 };
        if o.ceil_mode && (n - 1) * s[j] >= i + p[j] {
            n -= 1;
        }
        n
    };
    let (oh, ow) = (size(h, 0), size(w, 1));
    let mut out = vec![];
    for oy in 0..oh {
        for ox in 0..ow {
            let (y0, x0) = ((oy * s[0]) as isize - p[0] as isize, (ox * s[1]) as isize - p[1] as isize);
            let (mut acc, mut inside, mut best) = (0.0, 0usize, f64::NEG_INFINITY);
            for ky in 0..k[0] {
                for kx in 0..k[1] {
                    let (y, xx) = (y0 + (ky * d[0]) as isize, x0 + (kx * d[1]) as isize);
                    if y >= 0 && xx >= 0 && y < h as isize && xx < w as isize {
                        let v = x[y as usize * w + xx as usize] as f64;
                        acc += v;
                        inside += 1;
                        best = best.max(v);
                    }
                }
            }
            // torch's divisor with count_include_pad: the window clipped to the padded input
            let clip = |start: isize, j: usize, i: usize| {
                let end = (start + (k[j] * d[j]) as isize).min((i + p[j]) as isize);
                (end - start) as usize
            };
            let padded = clip(y0, 0, h) * clip(x0, 1, w);
            out.push(if max { best } else { acc / if o.count_include_pad { padded } else { inside } as f64 });
        }
    }
    (oh, ow, out)
}

/// torch's interpolate along one axis of length `n_in` to `n_out`: `(low, high, frac)` per output.
pub fn source_index(n_in: usize, n_out: usize, mode: &str, align: bool) -> Vec<(usize, usize, f64)> {
    (0..n_out)
        .map(|o| match mode {
            "nearest" => {
                let i = ((o as f64 * n_in as f64 / n_out as f64).floor() as usize).min(n_in - 1);
                (i, i, 0.0)
            }
            _ => {
                let src = if align {
                    if n_out > 1 {
                        o as f64 * (n_in - 1) as f64 / (n_out - 1) as f64
                    } else {
                        0.0
                    }
                } else {
                    ((o as f64 + 0.5) * n_in as f64 / n_out as f64 - 0.5).max(0.0)
                };
                let lo = (src.floor() as usize).min(n_in - 1);
                (lo, (lo + 1).min(n_in - 1), src - lo as f64)
            }
        })
        .collect()
}
