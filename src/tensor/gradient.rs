//! Reverse-mode autodiff: one gradient rule per primitive op (a rule table, as tinygrad's
//! `gradient.py`), applied from the loss back to the targets. Gradients are lazy tensors, so the
//! backward pass is scheduled and fused like the forward one.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use super::Tensor;
use crate::dtype::DType;
use crate::uop::{rule_ctx, Arg, Call, Ops, PatternMatcher, UOp, UPat};

/// What a gradient rule sees: the node's incoming gradient, and the device to build on.
struct GradCtx {
    grad: UOp,
    device: String,
}

/// Marks a source that gets no gradient (comparisons' inputs, WHERE's condition ...).
fn no_grad() -> UOp {
    UOp::new(Ops::Noop, DType::VOID, vec![], Arg::None)
}

/// The per-source gradients of a node, bundled so a rule can return them as one UOp.
fn grads(src: Vec<Option<Tensor>>) -> Option<UOp> {
    Some(UOp::new(
        Ops::Sink,
        DType::VOID,
        src.into_iter().map(|g| g.map_or_else(no_grad, |t| t.uop())).collect(),
        Arg::None,
    ))
}

/// A gradient rule over tensors: the node, its sources and the incoming gradient in, one
/// gradient per source out.
#[track_caller]
fn grad_rule(op: Ops, f: fn(&Tensor, &[Tensor], &Tensor) -> Vec<Option<Tensor>>) -> crate::uop::pattern::Rule<GradCtx> {
    rule_ctx(UPat::ops(&[op]).named("k"), move |m, ctx: &mut GradCtx| {
        let t = |u: &UOp| Tensor::from_uop(u.clone(), &ctx.device);
        let k = &m["k"];
        let src: Vec<Tensor> = k.src().iter().map(t).collect();
        grads(f(&t(k), &src, &t(&ctx.grad)))
    })
}

/// The gradients of `x @ w` (`w` a matrix `[k, n]`, `x` `[..., k]`) for the incoming gradient
/// `g`, as matmuls the scheduler lays out as it does the forward one: `g @ w.T`, and
/// `x.T @ g` over the rows of every batch, whose right operand `g` is then read in column panels
/// (a GPT's weight gradients, as the sum of products over batch and sequence that the forward
/// expression differentiates to, ran at 170-190 GFLOP/s where the product runs at 230).
fn matmul_backward(x: &Tensor, w: &Tensor, g: &Tensor) -> (Tensor, Tensor) {
    let (xs, n) = (x.shape(), w.shape()[1] as isize);
    let rows = xs[..xs.len() - 1].iter().product::<usize>() as isize;
    let dx = g.matmul(&w.T()).reshape(&xs.iter().map(|&d| d as isize).collect::<Vec<_>>());
    let dw = x.reshape(&[rows, w.shape()[0] as isize]).T().matmul(&g.reshape(&[rows, n]));
    (dx, dw)
}

/// For each element of `x`, the product of the other elements it was reduced with into `prod`
/// (the gradient of a product, as PyTorch's): `prod / x` where the row has no zero, the product
/// of the non-zero elements at its only zero, and 0 elsewhere (dividing by a zero gave NaN).
fn product_of_others(x: &Tensor, prod: &Tensor) -> Tensor {
    let (shape, axes) = (x.shape(), reduce_axes(&prod.uop()));
    let zero = x.eq(0.0);
    let zeros = zero.cast(DType::INT32).sum(axes.as_slice(), true).expand(&shape);
    let nonzero = zero.where_(1.0, x);
    let without_zeros = nonzero.prod(axes.as_slice(), true).expand(&shape);
    zero.where_(zeros.eq(1).where_(&without_zeros, 0.0), zeros.eq(0).where_(without_zeros / nonzero, 0.0))
}

fn reduce_axes(k: &UOp) -> Vec<isize> {
    match k.arg() {
        Arg::ReduceAxis(_, axes) => axes.iter().map(|&a| a as isize).collect(),
        _ => vec![],
    }
}

static PM_GRADIENT: LazyLock<PatternMatcher<GradCtx>> = LazyLock::new(|| {
    use std::f64::consts::LN_2;
    PatternMatcher::new(vec![
        grad_rule(Ops::Cast, |_, s, g| vec![Some(g.cast(s[0].dtype()))]),
        grad_rule(Ops::Add, |_, _, g| vec![Some(g.clone()), Some(g.clone())]),
        grad_rule(Ops::Mul, |_, s, g| vec![Some(g * &s[1]), Some(g * &s[0])]),
        grad_rule(Ops::Neg, |_, _, g| vec![Some(-g)]),
        grad_rule(Ops::FDiv, |_, s, g| vec![Some(g / &s[1]), Some(-(g * &s[0]) / (&s[1] * &s[1]))]),
        // ties split the gradient evenly, as tinygrad does
        grad_rule(Ops::Max, |_, s, g| {
            let share = |a: &Tensor, b: &Tensor| a.gt(b).where_(g, a.eq(b).where_(g * 0.5, 0.0));
            vec![Some(share(&s[0], &s[1])), Some(share(&s[1], &s[0]))]
        }),
        grad_rule(Ops::Where, |_, s, g| vec![None, Some(s[0].where_(g, 0.0)), Some(s[0].where_(0.0, g))]),
        grad_rule(Ops::Exp2, |k, _, g| vec![Some(g * k * LN_2)]),
        grad_rule(Ops::Log2, |_, s, g| vec![Some(g / (&s[0] * LN_2))]),
        grad_rule(Ops::Sin, |_, s, g| vec![Some(g * s[0].cos())]),
        grad_rule(Ops::Sqrt, |k, _, g| vec![Some(g / (k * 2.0))]),
        grad_rule(Ops::Recip, |k, _, g| vec![Some(-(g * k * k))]),
        grad_rule(Ops::Trunc, |_, s, _| vec![Some(s[0].zeros_like())]),
        // as PyTorch: d/da a^b = b a^(b-1), 0 where b = 0 (0^-1 is infinite at a = 0); d/db
        // a^b = a^b ln a, 0 where a = 0 and b >= 0
        grad_rule(Ops::Pow, |k, s, g| {
            let dbase = s[1].eq(0.0).where_(0.0, g * &s[1] * s[0].pow(&s[1] - 1.0));
            let dexp = s[0].eq(0.0).bitwise_and(s[1].ge(0.0)).where_(0.0, g * k * s[0].log());
            vec![Some(dbase), Some(dexp)]
        }),
        grad_rule(Ops::Reshape, |_, s, g| vec![Some(g.reshape(&s[0].shape()))]),
        grad_rule(Ops::Permute, |k, _, g| {
            let Arg::Axes(order) = k.uop().arg().clone() else { unreachable!("PERMUTE has an order") };
            let mut inverse = vec![0isize; order.len()];
            order.iter().enumerate().for_each(|(i, &o)| inverse[o] = i as isize);
            vec![Some(g.permute(&inverse))]
        }),
        grad_rule(Ops::Expand, |k, s, g| {
            let axes: Vec<isize> =
                (0..s[0].ndim()).filter(|&i| s[0].shape()[i] == 1 && k.shape()[i] != 1).map(|i| i as isize).collect();
            vec![Some(g.sum(axes.as_slice(), true).cast(g.dtype()))]
        }),
        grad_rule(Ops::Pad, |k, s, g| {
            let Arg::Pairs(pads) = k.uop().arg().clone() else { unreachable!("PAD has pads") };
            let bounds: Vec<(usize, usize)> = pads.iter().zip(s[0].shape()).map(|(&(b, _), d)| (b, b + d)).collect();
            vec![Some(g.shrink(&bounds))]
        }),
        grad_rule(Ops::Shrink, |k, s, g| {
            let Arg::Pairs(bounds) = k.uop().arg().clone() else { unreachable!("SHRINK has bounds") };
            let pads: Vec<(usize, usize)> = bounds.iter().zip(s[0].shape()).map(|(&(b, e), d)| (b, d - e)).collect();
            vec![Some(g.pad(&pads))]
        }),
        grad_rule(Ops::Flip, |k, _, g| {
            let Arg::Axes(axes) = k.uop().arg().clone() else { unreachable!("FLIP has axes") };
            vec![Some(g.flip(&axes.iter().map(|&a| a as isize).collect::<Vec<_>>()))]
        }),
        grad_rule(Ops::ReduceAxis, |k, s, g| {
            let shape = s[0].shape();
            match k.uop().arg() {
                Arg::ReduceAxis(Ops::Add, _) => vec![Some(g.expand(&shape))],
                Arg::ReduceAxis(Ops::Max, _) => {
                    let mask = s[0].eq(k.expand(&shape));
                    let count = mask.sum(reduce_axes(&k.uop()).as_slice(), true).cast(g.dtype());
                    vec![Some(mask.where_(g.expand(&shape), 0.0) / count.expand(&shape))]
                }
                Arg::ReduceAxis(Ops::Mul, _) => vec![Some(g.expand(&shape) * product_of_others(&s[0], k))],
                arg => panic!("gradient: no rule for REDUCE_AXIS {arg:?}"),
            }
        }),
        // a function's own backward rule, its value (src 0) getting no gradient
        grad_rule(Ops::Call, |k, s, g| match k.uop().arg() {
            Arg::Call(Call::Matmul, _) => {
                let (dx, dw) = matmul_backward(&s[1], &s[2], g);
                vec![None, Some(dx), Some(dw)]
            }
            Arg::Call(Call::Conv, params) => {
                let (dx, dw) = g.conv_backward(&s[1], &s[2], params);
                vec![None, Some(dx), Some(dw)]
            }
            Arg::Call(f, _) => vec![None, Some(g * super::transcendental::derivative(*f, &s[1], k))],
            Arg::Function(f) => {
                let traced = &f.0;
                let backward = traced.backward.get_or_init(|| trace_backward(traced, g.device()));
                let inputs: Vec<UOp> = s[1..].iter().map(Tensor::uop).collect();
                let grad_in = (&traced.grad_in, &g.uop());
                let bind = |b: &UOp| super::function::bind_stand_ins(b, &traced.params, &inputs, Some(grad_in));
                let grads =
                    backward.iter().zip(&s[1..]).map(|(b, x)| b.as_ref().map(|b| x.lift(bind(b)).reshape(&x.shape())));
                std::iter::once(None).chain(grads).collect()
            }
            arg => panic!("gradient: no backward rule for CALL {arg:?}"),
        }),
        grad_rule(Ops::Contiguous, |_, _, g| vec![Some(g.clone())]),
        // each rank's input reaches every rank's output: its gradient sums theirs, times how
        // the output moves with it (for MAX where it is the maximum, for MUL the others' product)
        grad_rule(Ops::AllReduce, |k, s, g| {
            let summed = g.all_reduce_ranks(Ops::Add);
            vec![Some(match k.uop().arg() {
                Arg::Reduce(Ops::Max) => s[0].eq(k).where_(&summed, 0.0),
                Arg::Reduce(Ops::Mul) => &summed * &(k / &s[0]),
                _ => summed,
            })]
        }),
        grad_rule(Ops::Copy, |_, s, g| {
            let from = crate::schedule::graph_device(&s[0].uop());
            vec![Some(g.to(&from.unwrap_or_else(|| g.device().to_string())))]
        }),
        // each shard's gradient is its device's part of the whole gradient (copied there first:
        // the gradient may itself be split, and a split axis cannot be cut); the copies of a
        // replicated tensor are one value, whose gradient goes to the first
        grad_rule(Ops::Multi, |k, s, g| {
            let axis = crate::schedule::multi_axis(&k.uop());
            let part = |(i, shard): (usize, &Tensor)| {
                let device = crate::schedule::graph_device(&shard.uop())?;
                match axis {
                    None if i > 0 => None,
                    None => Some(g.to(&device)),
                    Some(a) => Some(g.to(&device).shard_part(a, i, s.len())),
                }
            };
            s.iter().enumerate().map(part).collect()
        }),
        grad_rule(Ops::Detach, |_, _, _| vec![None]),
        grad_rule(Ops::CmpLt, |_, _, _| vec![None, None]),
        grad_rule(Ops::CmpNe, |_, _, _| vec![None, None]),
        grad_rule(Ops::CmpEq, |_, _, _| vec![None, None]),
    ])
});

impl Tensor {
    /// This tensor as the value of the function `f` of `inputs`: autograd then takes the
    /// inputs' gradients from the `CALL` rule for `f` instead of differentiating this graph.
    pub(super) fn call(&self, f: Call, params: Vec<isize>, inputs: &[&Tensor]) -> Tensor {
        let src: Vec<UOp> = std::iter::once(self.uop()).chain(inputs.iter().map(|t| t.uop())).collect();
        self.lift(UOp::new(Ops::Call, self.dtype(), src, Arg::Call(f, params)))
    }
}

/// Each input's gradient of traced function `f`, as a graph over its stand-ins and the stand-in
/// of the gradient arriving at its body.
fn trace_backward(f: &crate::uop::function::TracedFunction, device: &str) -> Vec<Option<UOp>> {
    let seed = UOp::new(Ops::Reshape, f.grad_in.dtype(), vec![f.grad_in.clone()], Arg::Shape(f.body.sh().to_vec()));
    let targets: HashSet<UOp> = f.params.iter().cloned().collect();
    let grads = compute_gradient(&f.body, &seed, &targets, device);
    f.params.iter().map(|p| grads.get(p).cloned()).collect()
}

/// The nodes gradients may pass through from `root`, sources first: a BUFFER with an origin
/// (`origin.rs`) leads on into the graph realized into it.
pub fn gradient_graph(root: &UOp) -> Vec<UOp> {
    root.toposort_with(super::origin::origin_of)
}

/// Where each node of a graph that spans devices (it has a COPY or a MULTI) computes
/// (`graph_devices`); `None` for a graph on one device: every node is on `root`'s.
fn node_devices(order: &[UOp]) -> Option<HashMap<UOp, String>> {
    let spans = order.iter().any(|u| matches!(u.op(), Ops::Copy | Ops::Multi));
    spans.then(|| crate::schedule::graph_devices(order))
}

/// Gradients of `root` (whose own gradient is `root_grad`) with respect to each of `targets`
/// that `root` depends on. Values realized since they were built are read from their buffers.
pub fn compute_gradient(root: &UOp, root_grad: &UOp, targets: &HashSet<UOp>, device: &str) -> HashMap<UOp, UOp> {
    let order = gradient_graph(root);
    let origins: HashMap<UOp, UOp> =
        order.iter().filter_map(|u| super::origin::origin_of(u).map(|o| (u.clone(), o))).collect();
    // a node's gradient reshaped to `shape`
    let reshaped = |g: &UOp, shape: &[usize]| match g.sh() == shape {
        true => g.clone(),
        false => UOp::new(Ops::Reshape, g.dtype(), vec![g.clone()], Arg::Shape(shape.to_vec())),
    };
    // only nodes with a target below them carry gradient
    let mut on_path: HashSet<UOp> = HashSet::new();
    for u in &order {
        if targets.contains(u) || u.src().iter().chain(origins.get(u)).any(|s| on_path.contains(s)) {
            on_path.insert(u.clone());
        }
    }
    let devices = node_devices(&order);
    let mut grads: HashMap<UOp, UOp> = HashMap::from([(root.clone(), root_grad.clone())]);
    let add = |grads: &mut HashMap<UOp, UOp>, s: &UOp, sg: &UOp| {
        let total = match grads.get(s) {
            Some(prev) => prev.alu(Ops::Add, &[sg]),
            None => sg.clone(),
        };
        grads.insert(s.clone(), total);
    };
    for k in order.iter().rev() {
        let Some(g) = grads.get(k).cloned() else { continue };
        if !on_path.contains(k) || k.op() == Ops::Detach {
            continue;
        }
        if let Some(o) = origins.get(k).filter(|o| on_path.contains(*o)) {
            add(&mut grads, o, &reshaped(&g, o.sh()));
        }
        if k.src().is_empty() {
            continue;
        }
        let device = devices.as_ref().and_then(|d| d.get(k)).map_or(device, String::as_str);
        let mut ctx = GradCtx { grad: g, device: device.to_string() };
        let bundle = PM_GRADIENT
            .rewrite(k, &mut ctx)
            .unwrap_or_else(|| panic!("gradient: no rule for {} (dtype {:?})", k.op().name(), k.dtype()));
        for (s, sg) in k.src().iter().zip(bundle.src()) {
            if sg.op() != Ops::Noop && on_path.contains(s) {
                add(&mut grads, s, sg);
            }
        }
    }
    grads.retain(|u, _| targets.contains(u));
    // the forward values the rules read from an origin's graph are in its buffer
    let mut realized: crate::uop::UOpMap<UOp> = origins.iter().map(|(b, o)| (o.clone(), reshaped(b, o.sh()))).collect();
    if !realized.is_empty() {
        for g in grads.values_mut() {
            *g = crate::uop::substitute(g, &mut realized, "read realized values");
        }
    }
    grads
}
