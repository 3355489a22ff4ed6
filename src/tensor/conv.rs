//! Sliding windows (`pool`) built from movement ops, and the convolutions and poolings on top of
//! them: a window view, then an elementwise multiply and a reduce. No handwritten kernels.

use super::elementwise::Scalar;
use super::reduce::dtype_min;
use super::{check_devices, Tensor};
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};

/// A size per spatial dimension: one value for all of them, or one each (`2`, `[1, 2]`, `vec![..]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spatial(pub Vec<usize>);

impl Spatial {
    /// The values for `n` dimensions (a single value repeats), naming `op` on a length mismatch.
    fn get(&self, op: &'static str, what: &str, n: usize) -> Result<Vec<usize>> {
        match self.0.len() {
            1 => Ok(vec![self.0[0]; n]),
            l if l == n => Ok(self.0.clone()),
            l => Err(Error::value(op, format!("{what} has {l} values {:?} for {n} spatial dimensions", self.0))),
        }
    }
}
impl From<usize> for Spatial {
    fn from(v: usize) -> Spatial {
        Spatial(vec![v])
    }
}
impl<const N: usize> From<[usize; N]> for Spatial {
    fn from(v: [usize; N]) -> Spatial {
        Spatial(v.to_vec())
    }
}
impl From<Vec<usize>> for Spatial {
    fn from(v: Vec<usize>) -> Spatial {
        Spatial(v)
    }
}
impl From<&[usize]> for Spatial {
    fn from(v: &[usize]) -> Spatial {
        Spatial(v.to_vec())
    }
}

/// Padding of the spatial dimensions: one value for all of them, one each, or torch's flat
/// `[left, right, top, bottom]` order (last dimension first); a negative value crops, as in
/// tinygrad (`padding=-1` drops a border).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Padding(pub Vec<isize>);

impl Padding {
    /// `(before, after)` per dimension for `n` dimensions, naming `op` on a length mismatch.
    fn pads(&self, op: &'static str, n: usize) -> Result<Vec<(isize, isize)>> {
        let p = &self.0;
        match p.len() {
            1 => Ok(vec![(p[0], p[0]); n]),
            l if l == n => Ok(p.iter().map(|&v| (v, v)).collect()),
            l if l == 2 * n => Ok((0..n).map(|i| (p[2 * (n - 1 - i)], p[2 * (n - 1 - i) + 1])).collect()),
            l => Err(Error::value(op, format!("padding has {l} values {p:?} for {n} spatial dimensions"))),
        }
    }
}

/// `Padding` from a value, an array, a Vec or a slice of one integer type.
macro_rules! padding_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Padding {
            fn from(v: $t) -> Padding {
                Padding(vec![v as isize])
            }
        }
        impl<const N: usize> From<[$t; N]> for Padding {
            fn from(v: [$t; N]) -> Padding {
                Padding(v.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<Vec<$t>> for Padding {
            fn from(v: Vec<$t>) -> Padding {
                Padding(v.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<&[$t]> for Padding {
            fn from(v: &[$t]) -> Padding {
                Padding(v.iter().map(|&x| x as isize).collect())
            }
        }
    )*};
}
padding_from!(usize, isize, i32);

/// Options of `conv2d` / `conv_transpose2d` (torch's defaults: groups 1, stride 1, no padding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvOpts {
    pub groups: usize,
    pub stride: Spatial,
    pub dilation: Spatial,
    pub padding: Padding,
    /// Extra size on the high side of each output dimension (`conv_transpose2d` only).
    pub output_padding: Spatial,
}
impl Default for ConvOpts {
    fn default() -> ConvOpts {
        ConvOpts { groups: 1, stride: 1.into(), dilation: 1.into(), padding: 0.into(), output_padding: 0.into() }
    }
}
impl ConvOpts {
    /// Split channels into this many independent groups.
    pub fn groups(self, groups: usize) -> ConvOpts {
        ConvOpts { groups, ..self }
    }
    /// Step between windows.
    pub fn stride(self, stride: impl Into<Spatial>) -> ConvOpts {
        ConvOpts { stride: stride.into(), ..self }
    }
    /// Spacing between kernel taps.
    pub fn dilation(self, dilation: impl Into<Spatial>) -> ConvOpts {
        ConvOpts { dilation: dilation.into(), ..self }
    }
    /// Zero padding: one value, one per dimension, or torch's flat `[left, right, top, bottom]`;
    /// negative values crop.
    pub fn padding(self, padding: impl Into<Padding>) -> ConvOpts {
        ConvOpts { padding: padding.into(), ..self }
    }
    /// Extra output size on the high side (`conv_transpose2d`).
    pub fn output_padding(self, output_padding: impl Into<Spatial>) -> ConvOpts {
        ConvOpts { output_padding: output_padding.into(), ..self }
    }
}

/// Options of `avg_pool2d` / `max_pool2d` (torch's defaults: 2×2 kernel, stride = kernel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolOpts {
    pub kernel: Spatial,
    /// `None`: the kernel size.
    pub stride: Option<Spatial>,
    pub dilation: Spatial,
    pub padding: Padding,
    /// Round the output size up, so a last partial window still counts.
    pub ceil_mode: bool,
    /// Whether `avg_pool2d` divides by the full window, padding included.
    pub count_include_pad: bool,
}
impl Default for PoolOpts {
    fn default() -> PoolOpts {
        PoolOpts {
            kernel: 2.into(),
            stride: None,
            dilation: 1.into(),
            padding: 0.into(),
            ceil_mode: false,
            count_include_pad: true,
        }
    }
}
impl PoolOpts {
    /// Default options with this kernel size.
    pub fn kernel(kernel: impl Into<Spatial>) -> PoolOpts {
        PoolOpts { kernel: kernel.into(), ..PoolOpts::default() }
    }
    /// Step between windows (default: the kernel size).
    pub fn stride(self, stride: impl Into<Spatial>) -> PoolOpts {
        PoolOpts { stride: Some(stride.into()), ..self }
    }
    /// Spacing between kernel taps.
    pub fn dilation(self, dilation: impl Into<Spatial>) -> PoolOpts {
        PoolOpts { dilation: dilation.into(), ..self }
    }
    /// Padding: one value, one per dimension, or torch's flat `[left, right, top, bottom]`;
    /// negative values crop.
    pub fn padding(self, padding: impl Into<Padding>) -> PoolOpts {
        PoolOpts { padding: padding.into(), ..self }
    }
    /// Round the output size up.
    pub fn ceil_mode(self, ceil_mode: bool) -> PoolOpts {
        PoolOpts { ceil_mode, ..self }
    }
    /// Whether `avg_pool2d` counts padding in the divisor.
    pub fn count_include_pad(self, count_include_pad: bool) -> PoolOpts {
        PoolOpts { count_include_pad, ..self }
    }
}

/// How a conv's input is padded along its first spatial axis (its rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowPads {
    /// Stored with the input, as every other axis's padding.
    Stored,
    /// A gate on the loads of the rows (with two or more spatial axes): the loop over a window's
    /// rows is the output rows' loop plus the tap's, which codegen narrows to the rows with data
    /// (`codegen/narrow.rs`), so a transposed conv (an input's gradient: its pads are the kernel's
    /// size less one) does not multiply its padding's zero rows.
    Gated,
}

/// Kernel, stride, dilation and `(before, after)` pads of a pooling call.
type PoolParams = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<(isize, isize)>);

/// What a `conv` CALL records to rebuild its backward: groups, then per spatial dimension the
/// stride, the dilation and the `(before, after)` pads.
struct ConvParams {
    groups: usize,
    stride: Vec<usize>,
    dilation: Vec<usize>,
    pads: Vec<(isize, isize)>,
}

impl ConvParams {
    fn encode(&self) -> Vec<isize> {
        let mut p = vec![self.groups as isize];
        p.extend(self.stride.iter().chain(&self.dilation).map(|&v| v as isize));
        p.extend(self.pads.iter().flat_map(|&(b, a)| [b, a]));
        p
    }
    fn decode(p: &[isize]) -> ConvParams {
        let nd = (p.len() - 1) / 4;
        let usizes = |r: std::ops::Range<usize>| p[r].iter().map(|&v| v as usize).collect::<Vec<_>>();
        ConvParams {
            groups: p[0] as usize,
            stride: usizes(1..1 + nd),
            dilation: usizes(1 + nd..1 + 2 * nd),
            pads: p[1 + 2 * nd..].chunks(2).map(|c| (c[0], c[1])).collect(),
        }
    }
}

/// `Err` (naming `op`) unless kernel, stride and dilation are positive and each dilated kernel
/// fits the padded input (its last `kernel.len()` axes).
fn check_windows(
    op: &'static str,
    input: &[usize],
    kernel: &[usize],
    stride: &[usize],
    dilation: &[usize],
    pads: &[(isize, isize)],
) -> Result<()> {
    ensure(kernel.iter().chain(stride).chain(dilation).all(|&v| v > 0), || {
        Error::value(op, format!("kernel {kernel:?}, stride {stride:?} and dilation {dilation:?} must be positive"))
    })?;
    let spatial = &input[input.len() - kernel.len()..];
    let fits = (0..kernel.len())
        .all(|j| spatial[j] as isize + pads[j].0 + pads[j].1 > (dilation[j] * (kernel[j] - 1)) as isize);
    ensure(fits, || {
        Error::shape(
            op,
            &[input],
            format!("kernel {kernel:?} (dilation {dilation:?}) is larger than the input padded by {pads:?}"),
        )
    })
}

/// `Err` (naming `op`) unless `bias` is one value per output channel.
fn check_bias(op: &'static str, bias: Option<&Tensor>, channels: usize) -> Result<()> {
    match bias {
        Some(b) if b.numel() != channels => {
            Err(Error::shape(op, &[&b.shape()], format!("a bias for {channels} output channels")))
        }
        _ => Ok(()),
    }
}

/// `(before, after)` pads on the spatial axes after `lead` untouched ones.
fn lead_pads(lead: usize, pads: &[(isize, isize)]) -> Vec<(isize, isize)> {
    let mut all = vec![(0, 0); lead];
    all.extend_from_slice(pads);
    all
}

impl Tensor {
    /// Sliding windows over the last `k.len()` axes: `(..., i...)` becomes `(..., o..., k...)` with
    /// `o = ceil((i - d*(k-1)) / s)`. Overlapping windows come from repeating the axis and reading
    /// it with a row length of `i*f + d`, so that each row starts `d` further on.
    pub(super) fn pool(&self, k: &[usize], s: &[usize], d: &[usize]) -> Tensor {
        let shape = self.shape();
        let nd = k.len();
        assert!(shape.len() >= nd, "pool: can't pool shape {shape:?} with kernel {k:?}");
        let lead = shape.len() - nd;
        let (noop, i_) = shape.split_at(lead);
        let fits = (0..nd).all(|j| k[j] > 0 && s[j] > 0 && d[j] * (k[j] - 1) < i_[j]);
        assert!(fits, "pool: kernel {k:?} (stride {s:?}, dilation {d:?}) does not fit input {shape:?}");
        let o: Vec<usize> = (0..nd).map(|j| (i_[j] - d[j] * (k[j] - 1)).div_ceil(s[j])).collect();
        // helpers that leave the leading axes alone
        let keep = |v: Vec<(usize, usize)>| noop.iter().map(|&n| (0, n)).chain(v).collect::<Vec<_>>();
        let dims = |v: Vec<usize>| noop.iter().copied().chain(v).collect::<Vec<_>>();
        let each = |f: &dyn Fn(usize) -> Vec<usize>| (0..nd).flat_map(f).collect::<Vec<_>>();
        let spans = |f: &dyn Fn(usize) -> Vec<usize>| keep(each(f).into_iter().map(|e| (0, e)).collect());
        let perm = |first: usize, second: usize| {
            let mut p: Vec<isize> = (0..lead as isize).collect();
            p.extend((0..nd).map(|j| (lead + 2 * j + first) as isize));
            p.extend((0..nd).map(|j| (lead + 2 * j + second) as isize));
            p
        };
        if (0..nd).any(|j| k[j] > s[j] || d[j] != 1) {
            // row length i*f + d (the smallest f >= 1 that leaves room for o*s columns): row r of the
            // repeated axis then starts at element r*d
            let row: Vec<usize> =
                (0..nd).map(|j| i_[j] * (o[j] * s[j]).saturating_sub(d[j]).div_ceil(i_[j]).max(1) + d[j]).collect();
            let reps: Vec<usize> = (0..nd).map(|j| (k[j] * row[j]).div_ceil(i_[j])).collect();
            let x = self.repeat(&[vec![1; lead], reps].concat());
            let x = x.shrink(&spans(&|j| vec![k[j] * row[j]])).reshape(&dims(each(&|j| vec![k[j], row[j]])));
            let x = x.shrink(&spans(&|j| vec![k[j], o[j] * s[j]])).reshape(&dims(each(&|j| vec![k[j], o[j], s[j]])));
            let x = x.shrink(&spans(&|j| vec![k[j], o[j], 1])).reshape(&dims(each(&|j| vec![k[j], o[j]])));
            return x.permute(&perm(1, 0));
        }
        // windows no longer than the stride: pad to o*s, split into (o, s) and keep the first k of each
        let grow: Vec<(usize, usize)> =
            noop.iter().map(|_| (0, 0)).chain((0..nd).map(|j| (0, (o[j] * s[j]).saturating_sub(i_[j])))).collect();
        let x = self.pad(&grow).shrink(&spans(&|j| vec![o[j] * s[j]]));
        let x = x.reshape(&dims(each(&|j| vec![o[j], s[j]]))).shrink(&spans(&|j| vec![o[j], k[j]]));
        x.permute(&perm(0, 1))
    }
    /// N-d convolution (`weight` is `(cout, cin/groups, k...)`, the input `(batch, cin, i...)`)
    /// with tinygrad's construction: pad, pool into windows, multiply with the weight, sum.
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOpts) -> Tensor {
        self.try_conv2d(weight, bias, opts).or_panic()
    }
    /// `conv2d`, reporting an input, weight, bias or options that do not fit each other, or
    /// operands on different devices, as an error.
    pub fn try_conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOpts) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        ensure(xs.len() == ws.len() && xs.len() >= 3, || {
            Error::shape("conv2d", &[&xs, &ws], "input and weight need the same rank (at least 3)")
        })?;
        let nd = ws.len() - 2;
        let (stride, dilation) =
            (opts.stride.get("conv2d", "stride", nd)?, opts.dilation.get("conv2d", "dilation", nd)?);
        let pads = opts.padding.pads("conv2d", nd)?;
        let g = opts.groups;
        ensure(g > 0 && g * ws[1] == xs[1] && ws[0].is_multiple_of(g), || {
            Error::shape("conv2d", &[&xs, &ws], format!("input and weight do not match with groups={g}"))
        })?;
        check_windows("conv2d", &xs, &ws[2..], &stride, &dilation, &pads)?;
        check_bias("conv2d", bias, ws[0])?;
        check_devices("conv2d", &[Some(self), Some(weight), bias].into_iter().flatten().collect::<Vec<_>>())?;
        Ok(self.conv_pads(weight, bias, &ConvParams { groups: g, stride, dilation, pads }, RowPads::Stored))
    }
    /// `conv2d` with explicit `(before, after)` pads, negative ones cropping. The result is a
    /// `conv` CALL: its backward is two more convs (`conv_backward`), not the gather-shaped
    /// gradient of the window view.
    fn conv_pads(&self, weight: &Tensor, bias: Option<&Tensor>, params: &ConvParams, rows: RowPads) -> Tensor {
        let ConvParams { groups, stride, dilation, pads } = params;
        let groups = *groups;
        let (xs, ws) = (self.shape(), weight.shape());
        let (bs, cin_, cout, cin) = (xs[0], xs[1], ws[0], ws[1]);
        let hw = &ws[2..];
        let nd = hw.len();
        assert!(
            groups > 0 && groups * cin == cin_ && cout % groups == 0,
            "conv2d: input {xs:?} does not match weight {ws:?} with groups={groups}"
        );
        let x = self.padded_input(pads, rows).pool(hw, stride, dilation);
        let oyx: Vec<usize> = x.shape()[2..2 + nd].to_vec();
        let rcout = cout / groups;
        let cat = |a: &[usize], b: &[usize], c: &[usize]| [a, b, c].concat();
        let x = x.reshape(&cat(&[bs, groups, cin, 1], &oyx, hw)).expand(&cat(&[bs, groups, cin, rcout], &oyx, hw));
        let spatial = |first: usize| (first..first + nd).map(|a| a as isize).collect::<Vec<_>>();
        let reduce: Vec<isize> = (0..=nd).map(|j| -1 - j as isize).collect();
        // (batch, groups, cout, out..., cin, k...); the scheduler may lay it out channels last
        // for the device (`schedule/layout.rs`), so this graph keeps to that form
        let x = x.permute(&[&[0, 1, 3][..], &spatial(4), &[2], &spatial(4 + nd)].concat());
        let w = weight.reshape(&cat(&[1, groups, rcout], &vec![1; nd], &[&[cin][..], hw].concat()));
        let out = x.mul(&w).sum(reduce.as_slice(), true).reshape(&cat(&[bs, cout], &oyx, &[]));
        out.call(crate::uop::Call::Conv, params.encode(), &[self, weight]).add_bias(bias)
    }
    /// A conv's input (`(batch, channels, spatial...)`) padded by `pads`. Padding is stored, so
    /// the windows read it without gated loads (the pad kernel reads the input where it lies: a
    /// stored input or gradient is not copied first), except the rows' with `RowPads::Gated`.
    fn padded_input(&self, pads: &[(isize, isize)], rows: RowPads) -> Tensor {
        let gated_rows = rows == RowPads::Gated && pads.len() >= 2;
        let (mut stored, mut gated) = (pads.to_vec(), vec![(0, 0); pads.len()]);
        if gated_rows {
            let (before, after) = pads[0];
            stored[0] = (before.min(0), after.min(0));
            gated[0] = (before.max(0), after.max(0));
        }
        let x = self.pad_value(&lead_pads(2, &stored), Scalar::Int(0));
        let x = match stored.iter().any(|&(b, a)| b > 0 || a > 0) {
            true => x.contiguous(),
            false => x,
        };
        match gated_rows {
            true => x.pad_value(&lead_pads(2, &gated), Scalar::Int(0)),
            false => x,
        }
    }
    /// `self + bias`, the bias broadcast over axis 1 (channels); `self` without one.
    fn add_bias(&self, bias: Option<&Tensor>) -> Tensor {
        let mut shape = vec![1; self.ndim()];
        match bias {
            Some(b) => {
                shape[1] = b.numel();
                self.add(b.reshape(&shape))
            }
            None => self.clone(),
        }
    }
    /// The input's and the weight's gradient of `conv_pads(x, w, ..)` given its output's gradient
    /// `self`: the input's is a transposed conv of `self` with `w`, the weight's a conv of `x`
    /// with `self` in which the batch plays the channels (kernel taps become output pixels, so
    /// the stride and the dilation trade places).
    pub(super) fn conv_backward(&self, x: &Tensor, w: &Tensor, params: &[isize]) -> (Tensor, Tensor) {
        let ConvParams { groups, stride, dilation, pads } = ConvParams::decode(params);
        let (xs, ws, gs) = (x.shape(), w.shape(), self.shape());
        let (bs, cout, cin, nd) = (xs[0], ws[0], ws[1], ws.len() - 2);
        let (k, o) = (&ws[2..], &gs[2..]);
        let padded: Vec<usize> = (0..nd).map(|j| (xs[2 + j] as isize + pads[j].0 + pads[j].1) as usize).collect();
        let transposed_pads: Vec<(isize, isize)> = (0..nd)
            .map(|j| {
                let span = dilation[j] * (k[j] - 1);
                // rows of the padded input past the last window get no gradient
                let unread = padded[j] - ((o[j] - 1) * stride[j] + span + 1);
                (span as isize - pads[j].0, (span + unread) as isize - pads[j].1)
            })
            .collect();
        let dx = self.conv_transpose_pads(w, None, groups, &stride, &dilation, &transposed_pads);
        let spatial = |first: isize| (first..first + nd as isize).collect::<Vec<_>>();
        let x = x.pad_value(&lead_pads(2, &pads), Scalar::Int(0));
        let x = x.reshape(&[&[bs, groups, cin][..], &padded].concat()).permute(&[&[2, 1, 0][..], &spatial(3)].concat());
        let g = self
            .reshape(&[&[bs, groups, cout / groups][..], o].concat())
            .permute(&[&[1, 2, 0][..], &spatial(3)].concat());
        let x = x.reshape(&[&[cin, groups * bs][..], &padded].concat());
        let g = g.reshape(&[&[cout, bs][..], o].concat());
        let traded = ConvParams { groups, stride: dilation, dilation: stride, pads: vec![(0, 0); nd] };
        let dw = x.conv_pads(&g, None, &traded, RowPads::Stored);
        let keep: Vec<(usize, usize)> = [(0, cin), (0, cout)].into_iter().chain(k.iter().map(|&k| (0, k))).collect();
        (dx, dw.shrink(&keep).transpose(0, 1))
    }
    /// Transposed convolution (`weight` is `(cin, cout/groups, k...)`): the gradient of `conv2d`,
    /// built as a conv over the input with zeros inserted between elements for the stride.
    pub fn conv_transpose2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOpts) -> Tensor {
        self.try_conv_transpose2d(weight, bias, opts).or_panic()
    }
    /// `conv_transpose2d`, reporting an input, weight, bias or options that do not fit each
    /// other, or operands on different devices, as an error.
    pub fn try_conv_transpose2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOpts) -> Result<Tensor> {
        const NAME: &str = "conv_transpose2d";
        let (xs, ws) = (self.shape(), weight.shape());
        let bad = |reason: String| Err(Error::shape(NAME, &[&xs, &ws], reason));
        if xs.len() != ws.len() || xs.len() < 3 {
            return bad("input and weight need the same rank (at least 3)".into());
        }
        let (g, nd) = (opts.groups, ws.len() - 2);
        if g == 0 || ws[0] % g != 0 {
            return bad(format!("the weight does not split into {g} groups"));
        }
        if xs[1] != ws[0] {
            return bad("the input's channels are not the weight's".into());
        }
        let hw = &ws[2..];
        let (stride, dilation) = (opts.stride.get(NAME, "stride", nd)?, opts.dilation.get(NAME, "dilation", nd)?);
        let out_pad = opts.output_padding.get(NAME, "output_padding", nd)?;
        let padding = opts.padding.pads(NAME, nd)?;
        ensure(hw.iter().chain(&stride).chain(&dilation).all(|&v| v > 0), || {
            Error::value(NAME, format!("kernel {hw:?}, stride {stride:?} and dilation {dilation:?} must be positive"))
        })?;
        ensure((0..nd).all(|j| out_pad[j] < stride[j].max(dilation[j])), || {
            Error::value(
                NAME,
                format!("output_padding {out_pad:?} must be smaller than stride {stride:?} or dilation {dilation:?}"),
            )
        })?;
        let out: Vec<isize> = (0..nd)
            .map(|j| {
                let span = (dilation[j] * (hw[j] - 1) + 1 + out_pad[j]) as isize;
                (xs[2 + j] as isize - 1) * stride[j] as isize + span - padding[j].0 - padding[j].1
            })
            .collect();
        if !out.iter().all(|&o| o > 0) {
            return bad(format!("padding {padding:?} gives output size {out:?}"));
        }
        check_bias(NAME, bias, ws[1] * g)?;
        check_devices(NAME, &[Some(self), Some(weight), bias].into_iter().flatten().collect::<Vec<_>>())?;
        let pads: Vec<(isize, isize)> = padding
            .iter()
            .enumerate()
            .map(|(j, &(b, a))| {
                let span = ((hw[j] - 1) * dilation[j]) as isize;
                (span - b, span - a + out_pad[j] as isize)
            })
            .collect();
        Ok(self.conv_transpose_pads(weight, bias, g, &stride, &dilation, &pads))
    }
    /// `conv_transpose2d` as a conv with the flipped weight over the input spread by the stride
    /// and padded by `pads`.
    fn conv_transpose_pads(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        stride: &[usize],
        dilation: &[usize],
        pads: &[(isize, isize)],
    ) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        let nd = ws.len() - 2;
        let mut unflat = vec![groups, ws[0] / groups];
        unflat.extend_from_slice(&ws[1..]);
        let flips: Vec<isize> = (3..3 + nd as isize).collect();
        let w = weight.reshape(&unflat).transpose(1, 2).flip(&flips).flatten(0, 1);
        let mut x = self.clone();
        if stride.iter().any(|&s| s > 1) {
            let sp = &xs[2..];
            let spread: Vec<usize> = xs[..2].iter().copied().chain(sp.iter().flat_map(|&k| [k, 1])).collect();
            let grow: Vec<(usize, usize)> =
                [(0, 0); 2].into_iter().chain((0..nd).flat_map(|j| [(0, 0), (0, stride[j] - 1)])).collect();
            let merged: Vec<usize> = xs[..2].iter().copied().chain((0..nd).map(|j| sp[j] * stride[j])).collect();
            let keep: Vec<(usize, usize)> = merged
                .iter()
                .enumerate()
                .map(|(j, &m)| if j < 2 { (0, m) } else { (0, m - (stride[j - 2] - 1)) })
                .collect();
            x = x.reshape(&spread).pad(&grow).reshape(&merged).shrink(&keep);
        }
        let params = ConvParams { groups, stride: vec![1; nd], dilation: dilation.to_vec(), pads: pads.to_vec() };
        x.conv_pads(&w, bias, &params, RowPads::Gated)
    }

    /// `(kernel, stride, dilation, pads)` of a pooling call, with ceil-mode pads applied.
    fn pool_params(&self, op: &'static str, opts: &PoolOpts, ceil: bool) -> Result<PoolParams> {
        let nd = if opts.kernel.0.len() == 1 { 2 } else { opts.kernel.0.len() };
        let k = opts.kernel.get(op, "kernel", nd)?;
        let s = opts.stride.as_ref().map_or_else(|| Ok(k.clone()), |s| s.get(op, "stride", nd))?;
        let d = opts.dilation.get(op, "dilation", nd)?;
        let mut pads = opts.padding.pads(op, nd)?;
        let shape = self.shape();
        ensure(shape.len() >= nd, || Error::shape(op, &[&shape], format!("fewer than {nd} dimensions")))?;
        check_windows(op, &shape, &k, &s, &d, &pads)?;
        if ceil {
            let i_ = &shape[shape.len() - nd..];
            for j in 0..nd {
                let (i, k, s, d) = (i_[j] as isize, k[j] as isize, s[j] as isize, d[j] as isize);
                let (b, a) = pads[j];
                let o = (i + b + a - (d * (k - 1) + 1) + s - 1).div_euclid(s) + 1;
                pads[j].1 += s * (o - 1) + (d * (k - 1) + 1) - (i + b + a) - (s * (o - 1) - (b + i - 1)).max(0);
            }
        }
        Ok((k, s, d, pads))
    }
    /// Average over sliding windows of the last `kernel.len()` axes (2 for a single kernel size).
    pub fn avg_pool2d(&self, opts: &PoolOpts) -> Tensor {
        self.try_avg_pool2d(opts).or_panic()
    }
    /// `avg_pool2d`; this and the other poolings' `try_` forms report options that do not fit
    /// the input as an error.
    pub fn try_avg_pool2d(&self, opts: &PoolOpts) -> Result<Tensor> {
        let (k, s, d, reg) = self.pool_params("avg_pool2d", opts, false)?;
        let (_, _, _, ceil) = self.pool_params("avg_pool2d", opts, opts.ceil_mode)?;
        let lead = self.ndim() - k.len();
        let windows =
            |x: &Tensor, pads: &[(isize, isize)]| x.pad_value(&lead_pads(lead, pads), Scalar::Int(0)).pool(&k, &s, &d);
        let pool = |x: &Tensor, pads: &[(isize, isize)]| {
            windows(x, pads).channels_last_windows(k.len(), |w, axes| w.sum(axes, false))
        };
        let x = self.cast(self.dtype().to_float());
        if !opts.count_include_pad {
            return Ok(pool(&x, &ceil).div(pool(&x.ones_like(), &ceil)));
        }
        if !opts.ceil_mode {
            return Ok(windows(&x, &reg).channels_last_windows(k.len(), |w, axes| w.mean(axes, false)));
        }
        let extra: Vec<(isize, isize)> = ceil.iter().zip(&reg).map(|(c, r)| (c.0 - r.0, c.1 - r.1)).collect();
        let ones = x.pad_value(&lead_pads(lead, &reg), Scalar::Int(0)).ones_like();
        Ok(pool(&x, &ceil).div(pool(&ones, &extra)))
    }
    /// Maximum over sliding windows of the last `kernel.len()` axes (2 for a single kernel size).
    pub fn max_pool2d(&self, opts: &PoolOpts) -> Tensor {
        self.try_max_pool2d(opts).or_panic()
    }
    pub fn try_max_pool2d(&self, opts: &PoolOpts) -> Result<Tensor> {
        let (k, s, d, pads) = self.pool_params("max_pool2d", opts, opts.ceil_mode)?;
        let lead = self.ndim() - k.len();
        let x = self.pad_value(&lead_pads(lead, &pads), dtype_min(self.dtype())).pool(&k, &s, &d);
        Ok(x.channels_last_windows(k.len(), |w, axes| w.max(axes, false)))
    }
    /// `max_pool2d` and, for each maximum, the index (int32) of the first element attaining it,
    /// flat over the pooled axes of the input (tinygrad's `return_indices=True`, torch's
    /// convention; `max_unpool2d` takes them back).
    pub fn max_pool2d_with_indices(&self, opts: &PoolOpts) -> (Tensor, Tensor) {
        self.try_max_pool2d_with_indices(opts).or_panic()
    }
    pub fn try_max_pool2d_with_indices(&self, opts: &PoolOpts) -> Result<(Tensor, Tensor)> {
        let (k, s, d, pads) = self.pool_params("max_pool2d", opts, opts.ceil_mode)?;
        let shape = self.shape();
        let lead = shape.len() - k.len();
        let windows = self.pad_value(&lead_pads(lead, &pads), dtype_min(self.dtype())).pool(&k, &s, &d);
        let axes: Vec<isize> = (0..k.len()).map(|j| -1 - j as isize).collect();
        let spatial = &shape[lead..];
        let n: usize = spatial.iter().product();
        // positions counted down from n, so the largest hit in a window is its first
        let _device = crate::runtime::DefaultDevice::scoped(self.device());
        let down = Tensor::arange_step(n as f64, 0.0, -1.0, DType::INT32).reshape(spatial);
        let down = down.pad_value(&pads, dtype_min(DType::INT32)).pool(&k, &s, &d);
        let hit = windows.eq(windows.max(axes.as_slice(), true));
        let first = hit.where_(&down, 0).max(axes.as_slice(), false);
        Ok((windows.max(axes.as_slice(), false), first.neg().add(n as i64)))
    }
    /// The partial inverse of `max_pool2d_with_indices`: each value of `self` (`[N, C, o...]`)
    /// written at its flat `indices` into zeros of the unpooled size, which `output_size` gives
    /// (its last axes) or the pooling options imply.
    pub fn max_unpool2d(&self, indices: &Tensor, opts: &PoolOpts, output_size: Option<&[usize]>) -> Tensor {
        self.try_max_unpool2d(indices, opts, output_size).or_panic()
    }
    pub fn try_max_unpool2d(&self, indices: &Tensor, opts: &PoolOpts, output_size: Option<&[usize]>) -> Result<Tensor> {
        const OP: &str = "max_unpool2d";
        let (shape, is) = (self.shape(), indices.shape());
        ensure(shape.len() >= 3 && is == shape, || {
            Error::shape(OP, &[&shape, &is], "input [N, C, spatial...] and indices of its shape")
        })?;
        check_devices(OP, &[self, indices])?;
        let (bs, c, spatial) = (shape[0], shape[1], &shape[2..]);
        let nd = spatial.len();
        let out: Vec<usize> = match output_size {
            Some(size) => {
                ensure(size.len() >= nd, || Error::value(OP, format!("output_size {size:?} for {nd} spatial axes")))?;
                size[size.len() - nd..].to_vec()
            }
            None => {
                let (k, d) = (opts.kernel.get(OP, "kernel", nd)?, opts.dilation.get(OP, "dilation", nd)?);
                let s = opts.stride.as_ref().map_or_else(|| Ok(k.clone()), |s| s.get(OP, "stride", nd))?;
                let pads = opts.padding.pads(OP, nd)?;
                (0..nd)
                    .map(|j| {
                        let size = (spatial[j] as isize - 1) * s[j] as isize - (pads[j].0 + pads[j].1)
                            + (d[j] * (k[j] - 1) + 1) as isize;
                        usize::try_from(size)
                            .map_err(|_| Error::shape(OP, &[&shape], format!("the options give output size {size}")))
                    })
                    .collect::<Result<_>>()?
            }
        };
        let n: usize = out.iter().product();
        let slots = Tensor::arange(n).to(self.device()).reshape(&[1, 1, n, 1]);
        let at = indices.reshape(&[bs as isize, c as isize, 1, -1]).eq(&slots);
        let values =
            at.where_(self.reshape(&[bs as isize, c as isize, 1, -1]), 0).sum(3isize, false).cast(self.dtype());
        values.try_reshape(&[&[bs, c][..], &out].concat())
    }
    /// `reduce(windows, axes)` over the window axes of `self` (`(..., c, o..., k...)`, from `pool`)
    /// with the channel axis `c` moved innermost first, then moved back: the result is realized
    /// channels last, the layout a convolution's output has, so the pooling kernel, its gradient
    /// and the next convolution all read whole vectors of channels.
    fn channels_last_windows(&self, nd: usize, reduce: impl Fn(&Tensor, &[isize]) -> Tensor) -> Tensor {
        let lead = self.ndim() - 2 * nd;
        if lead < 2 {
            let axes: Vec<isize> = (0..nd).map(|j| -1 - j as isize).collect();
            return reduce(self, &axes);
        }
        let c = lead as isize - 1;
        let order: Vec<isize> = (0..c).chain(lead as isize..self.ndim() as isize).chain([c]).collect();
        let axes: Vec<isize> = (0..nd).map(|j| c + nd as isize + j as isize).collect();
        let out = reduce(&self.permute(&order), &axes);
        let back: Vec<isize> = (0..c).chain([c + nd as isize]).chain(c..c + nd as isize).collect();
        out.permute(&back)
    }
}
