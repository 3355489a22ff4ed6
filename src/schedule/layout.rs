//! Data layouts chosen for the device a graph is scheduled on. The Tensor layer builds one
//! graph for every device and marks its matrix products and convolutions as CALLs; here each
//! becomes the layout that pays on its target (column panels for a large right operand and
//! channels-last convolutions on CPU-like targets, whose tiles are rows of vector registers),
//! and every other CALL becomes its value.

use std::collections::HashSet;
use std::sync::LazyLock;

use crate::codegen::opt::matmul_panel;
use crate::dtype::DType;
use crate::rule;
use crate::uop::Target;
use crate::uop::{Arg, Call, Ops, PatternMatcher, UOp, UOpMap, UPat};

/// The panel width (columns of a matmul tile) of the device of each matmul and conv CALL,
/// found before the rewrite (which offers the original CALLs): the context of `pm_lay_out`.
pub struct Panels(UOpMap<Option<usize>>);

impl Panels {
    /// The panels of the CALLs in `sink`'s graph, for the target of each one's device
    /// (`target_of` a node; None where there is none).
    pub fn find(sink: &UOp, target_of: &mut dyn FnMut(&UOp) -> Option<Target>) -> Panels {
        let calls = sink.toposort().into_iter().filter(|u| matches!(u.arg(), Arg::Call(Call::Matmul | Call::Conv, _)));
        Panels(calls.map(|c| (c.clone(), target_of(&c).as_ref().and_then(matmul_panel))).collect())
    }
}

/// Every CALL becomes its value in the layout for its target (offered bottom-up, with `Panels`).
pub fn pm_lay_out() -> &'static PatternMatcher<Panels> {
    static PM: LazyLock<PatternMatcher<Panels>> = LazyLock::new(|| {
        PatternMatcher::new(vec![
            rule!("a call as its layout", |call; panels: &mut Panels| UPat::ops(&[Ops::Call]).named(call) => {
                let panel = panels.0.get(call).copied().flatten();
                Some(
                    match (call.arg(), panel) {
                        (Arg::Call(Call::Matmul, _), Some(p)) => matmul_panels(call, p),
                        (Arg::Call(Call::Conv, _), Some(p)) => channels_last(call, p / 2),
                        _ => None,
                    }
                    .unwrap_or_else(|| call.src()[0].clone()),
                )
            }),
        ])
    });
    &PM
}

/// Whether sums of `dtype` accumulate in `dtype` itself (no casts around the reduce).
fn sums_in_place(dtype: DType) -> bool {
    matches!(dtype, DType::FLOAT32 | DType::FLOAT64)
}

/// `x @ w` (CALL sources 1 and 2) for a large matrix `w` (k, n), first laid out as column panels
/// `(n/p, k, p)` (one copy kernel, k·n elements): the matmul kernel then reads each panel of
/// its output tile's columns as one contiguous block, which stays in cache while the rows
/// stream past. Read in place, consecutive rows of `w` are a power of two apart for the usual
/// sizes: they land in the same cache sets and evict each other, and each one is a new page for
/// the prefetcher (1024² and 2048² run 3x slower). A width `n` that panels do not divide is
/// padded with zero columns to whole panels, and the product over the `n` columns read from them
/// (its kernel pads the column loop to whole tiles, `heuristic::pad_innermost`, storing the last
/// one masked; a padded product cut back by a copy took 2% longer at 1000²). None when `w` is
/// too small to pay, the padding would waste more than a sixteenth of the work, or `x` has too
/// few rows to pay for the copy (a matrix-vector product reads `w` once anyway, a 32-token
/// prefill chunk as often as it copies).
/// A weight gradient `xᵀ @ dy` whose `x` is the narrower (fewer columns, m < n) is computed as
/// `(dyᵀ @ x)ᵀ`: the panels, read again for every tile of rows, are then the smaller operand
/// (GPT's 256 x 1024 gradients: 4 MB of panels, past the L2 cache, 135 GFLOP/s; 1 MB, 300).
fn matmul_panels(call: &UOp, p: usize) -> Option<UOp> {
    let (x, w) = (&call.src()[1], &call.src()[2]);
    if x.dtype() != call.dtype() {
        return None;
    }
    let swapped = match (transposed(x), x.sh(), w.sh()) {
        (true, &[m, _], &[_, n]) if m < n => panel_product(&transpose(w), &transpose(x), p).map(|t| transpose(&t)),
        _ => None,
    };
    let product = swapped.or_else(|| panel_product(x, w, p))?;
    Some(product.movement(Ops::Reshape, Arg::Shape(call.sh().to_vec())))
}

/// `x @ w` with `w` in column panels (`matmul_panels`), shaped `x`'s rows by `w`'s columns.
fn panel_product(x: &UOp, w: &UOp, p: usize) -> Option<UOp> {
    const MIN_ELEMENTS: usize = 1 << 16;
    const MIN_ROWS: usize = 64;
    const MAX_PADDING: usize = 16;
    let [k, n] = *w.sh() else { return None };
    let rows = x.sh().iter().product::<usize>() / k.max(1);
    let same_dtype = x.dtype() == w.dtype() && sums_in_place(w.dtype());
    let padded = n.next_multiple_of(p);
    if !(same_dtype && k >= p && (padded - n) * MAX_PADDING <= n && k * n >= MIN_ELEMENTS && rows >= MIN_ROWS) {
        return None;
    }
    let w = match padded == n {
        true => unstored(w),
        false => unstored(w).movement(Ops::Pad, Arg::Pairs(vec![(0, 0), (0, padded - n)])),
    };
    let (columns, n) = (n, padded);
    let panels = w
        .movement(Ops::Reshape, Arg::Shape(vec![k, n / p, p]))
        .movement(Ops::Permute, Arg::Axes(vec![1, 0, 2]))
        .movement(Ops::Contiguous, Arg::Int(-1));
    let x = rows_contiguous(x);
    let batch = &x.sh()[..x.sh().len() - 1];
    let full = [batch, &[n / p, k, p]].concat();
    let x = x.movement(Ops::Reshape, Arg::Shape([batch, &[1, k, 1]].concat()));
    let panels = panels.movement(Ops::Reshape, Arg::Shape([&vec![1; batch.len()][..], &[n / p, k, p]].concat()));
    let product = broadcast(&x, &full).alu(Ops::Mul, &[&broadcast(&panels, &full)]);
    let sum = product.movement(Ops::ReduceAxis, Arg::ReduceAxis(Ops::Add, vec![batch.len() + 1]));
    let sum = sum.movement(Ops::Reshape, Arg::Shape([batch, &[n]].concat()));
    Some(match n == columns {
        true => sum,
        false => {
            let bounds = batch.iter().map(|&d| (0, d)).chain([(0, columns)]).collect();
            sum.movement(Ops::Shrink, Arg::Pairs(bounds))
        }
    })
}

/// A left operand `x` (m, k) that is a transpose of a stored or computed (k, m) value (a
/// weight gradient's `xᵀ @ dy`, summed over the token rows of both) copied row-major first: the
/// product then reads each of its rows along the sum as one stream, as it does a forward `x`.
/// Read in place, consecutive sum steps are a whole row of the source apart (a power of two for
/// the usual widths): the few floats of a tile land in the same cache sets and evict each
/// other (GPT's 1024-vocab head gradient ran at 97 GFLOP/s against 300 for the forward
/// products). One copy of m·k elements, read once per column panel.
fn rows_contiguous(x: &UOp) -> UOp {
    match transposed(x) {
        true => x.movement(Ops::Contiguous, Arg::Int(-1)),
        false => x.clone(),
    }
}

/// Whether `x` is a permute that moves its source's innermost axis away from the end.
fn transposed(x: &UOp) -> bool {
    let last = x.sh().len().saturating_sub(1);
    matches!((x.op(), x.arg()), (Ops::Permute, Arg::Axes(axes)) if axes.last() != Some(&last))
}

/// The matrix `m` transposed.
fn transpose(m: &UOp) -> UOp {
    m.movement(Ops::Permute, Arg::Axes(vec![1, 0]))
}

/// A convolution (CALL source 0 as `Tensor::conv2d` builds it: the pooled input `X`, shaped
/// `(batch, groups, cin, cout, out..., k...)`, permuted to `(batch, groups, cout, out..., cin,
/// k...)`, times the weight, summed over the last axes) computed channels last when `lanes`
/// divide its output channels: the output channels are the innermost output axis, so the
/// output and the weight (laid out with them innermost) are read and written as whole vectors,
/// and the window's pixels share each weight load. None for any other graph.
fn channels_last(call: &UOp, lanes: usize) -> Option<UOp> {
    let (value, weight) = (&call.src()[0], &call.src()[2]);
    let reduced = match value.op() {
        Ops::Reshape => &value.src()[0],
        _ => value,
    };
    let (Ops::ReduceAxis, Ops::Mul) = (reduced.op(), reduced.src()[0].op()) else { return None };
    let windows = &reduced.src()[0].src()[0];
    let nd = windows.sh().len().checked_sub(4)? / 2;
    let spatial = |first: usize| (first..first + nd).collect::<Vec<_>>();
    let plain = [&[0, 1, 3][..], &spatial(4), &[2], &spatial(4 + nd)].concat();
    let src = &windows.src()[0];
    let permuted =
        || src.sh().len() == plain.len() && plain.iter().map(|&a| src.sh()[a]).eq(windows.sh().iter().copied());
    let x = match windows.op() {
        Ops::Permute if windows.arg() == &Arg::Axes(plain.clone()) => src,
        // one input channel: the permute moved only axes of size 1, a reshape
        Ops::Reshape if permuted() && src.sh()[2] == 1 => src,
        _ => return None,
    };
    if !sums_in_place(value.dtype()) {
        return None;
    }
    let (bs, groups, cin, rcout) = (x.sh()[0], x.sh()[1], x.sh()[2], x.sh()[3]);
    let (oyx, hw) = (&x.sh()[4..4 + nd], &x.sh()[4 + nd..]);
    if !rcout.is_multiple_of(lanes) || weight.dtype() != value.dtype() {
        return None;
    }
    // (batch, out..., groups, cout, cin, k...)
    let x = x.movement(Ops::Permute, Arg::Axes([&[0][..], &spatial(4), &[1, 3, 2], &spatial(4 + nd)].concat()));
    let w = weight
        .movement(Ops::Reshape, Arg::Shape([&[groups, rcout, cin][..], hw].concat()))
        .movement(Ops::Permute, Arg::Axes([&[0, 2][..], &spatial(3), &[1]].concat()))
        .movement(Ops::Contiguous, Arg::Int(-1))
        .movement(Ops::Permute, Arg::Axes([&[0, 2 + nd, 1][..], &spatial(2)].concat()))
        .movement(Ops::Reshape, Arg::Shape([&vec![1; 1 + nd][..], &[groups, rcout, cin], hw].concat()));
    let product = x.alu(Ops::Mul, &[&broadcast(&w, x.sh())]);
    let axes: Vec<usize> = (3 + nd..product.sh().len()).filter(|&a| product.sh()[a] != 1).collect();
    let sum = match axes.is_empty() {
        true => product,
        false => product.movement(Ops::ReduceAxis, Arg::ReduceAxis(Ops::Add, axes)),
    };
    let out = sum
        .movement(Ops::Reshape, Arg::Shape([&[bs][..], oyx, &[groups * rcout]].concat()))
        .movement(Ops::Contiguous, Arg::Int(-1));
    Some(out.movement(Ops::Permute, Arg::Axes([&[0, 1 + nd][..], &spatial(1)].concat())))
}

/// A right operand `w` that is a view (reshapes and permutes) of an elementwise value stored
/// (`CONTIGUOUS`), as the same view of the value itself: the panels are then its one store (a
/// quantized weight dequantized into panels directly: SmolLM2's prefill wrote each weight as
/// float32 and copied it again into panels, 83 of 745 ms). Elementwise: its reduces (an
/// `arange`'s running sum) read no buffer.
fn unstored(w: &UOp) -> UOp {
    match w.op() {
        Ops::Reshape | Ops::Permute => {
            let src = unstored(&w.src()[0]);
            w.replace_src(vec![src])
        }
        Ops::Contiguous if elementwise(&w.src()[0]) => w.src()[0].clone(),
        _ => w.clone(),
    }
}

/// Whether no reduce in `value` reads a buffer.
fn elementwise(value: &UOp) -> bool {
    let mut reads_data: HashSet<UOp> = HashSet::new();
    for u in value.toposort() {
        if u.op() == Ops::Buffer || u.src().iter().any(|s| reads_data.contains(s)) {
            if u.op() == Ops::ReduceAxis {
                return false;
            }
            reads_data.insert(u);
        }
    }
    true
}

/// `u` expanded to `shape` (itself when it has that shape).
fn broadcast(u: &UOp, shape: &[usize]) -> UOp {
    match u.sh() == shape {
        true => u.clone(),
        false => u.movement(Ops::Expand, Arg::Shape(shape.to_vec())),
    }
}
