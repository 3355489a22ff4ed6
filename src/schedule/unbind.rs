//! Values leave the graph before scheduling, so the schedule cache, the kernels and the compiled
//! programs depend on where values are used, not on the values: every BIND becomes its
//! DEFINE_VAR, and every float constant that is data (`t * 0.37`, a learning rate) becomes a
//! scalar parameter, a DEFINE_VAR holding the constant's bits. The values travel beside the
//! schedule to the kernels that read them, so `t * 0.5` and `t * 0.37` run one program.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::dtype::{DType, Scalar};
use crate::rule;
use crate::uop::variable::{bind, bound_value, var_name};
use crate::uop::{graph_rewrite, Arg, Ops, PatternMatcher, UOp, UOpMap, UPat};

/// The value of each variable for one run, by name.
pub type VarVals = BTreeMap<String, i64>;

/// Values found so far, the scalar parameter each lifted constant becomes, and the first
/// variable bound to two different values.
#[derive(Default)]
struct Bindings {
    vals: VarVals,
    params: UOpMap<UOp>,
    conflict: Option<(String, i64, i64)>,
}

static PM_UNBIND: LazyLock<PatternMatcher<Bindings>> = LazyLock::new(|| {
    PatternMatcher::new(vec![
        rule!("a bound variable unbound", |bind; ctx: &mut Bindings| UPat::ops(&[Ops::Bind]).named(bind) => {
            let (name, value) = (var_name(&bind.src()[0]).to_string(), bound_value(bind));
            match ctx.vals.insert(name.clone(), value) {
                Some(old) if old != value => ctx.conflict = ctx.conflict.clone().or(Some((name, old, value))),
                _ => {}
            }
            Some(bind.src()[0].clone())
        }),
        rule!("a constant as a parameter", |c; ctx: &mut Bindings| UPat::ops(&[Ops::Const]).named(c)
            => ctx.params.get(c).cloned()),
    ])
});

/// Whether tensor-graph node `u` is a constant passed to its kernels as a scalar parameter: a
/// float constant (on a device: not a shape or an index) of at most 32 bits whose value no rule
/// folds. Zero, one, minus one, infinities and NaN stay in the kernel, where `x * 1`, `x + 0`,
/// masks and reduce identities fold; integers stay too (indices, aranges, integer powers).
fn is_scalar_param(u: &UOp) -> bool {
    let dtype = u.dtype();
    u.op() == Ops::Const
        && !u.src().is_empty()
        && dtype.count == 1
        && matches!(dtype.scalar, Scalar::Float16 | Scalar::BFloat16 | Scalar::Float32)
        && u.const_value().is_some_and(|c| c.as_f64().is_finite() && ![0.0, 1.0, -1.0].contains(&c.as_f64()))
}

/// The scalar parameter named `name` that constant `c` becomes: a DEFINE_VAR on `c`'s device
/// holding the bits of its float32 value (exact for float16 and bfloat16 too), read back by a
/// BITCAST. An integer variable carries them because every device already passes those at launch.
fn scalar_param(c: &UOp, name: String) -> (UOp, i64) {
    let range = Arg::Var(name, i32::MIN as i64, i32::MAX as i64);
    let var = UOp::new(Ops::DefineVar, DType::INDEX, c.src().to_vec(), range);
    let bits = UOp::new(Ops::Bitcast, DType::FLOAT32, vec![var.cast(DType::INT32)], Arg::None);
    let value = c.const_value().expect("a scalar parameter is a CONST").as_f64() as f32;
    (bits.cast(c.dtype()), value.to_bits() as i32 as i64)
}

/// `outputs` with every BIND replaced by its variable and every data constant by a scalar
/// parameter, and the values of both. A scalar parameter is named by its constant's position in
/// the graph, starting with a digit so that no `Variable` can share its name. Panics if one
/// variable is bound to two values in the same graph.
pub fn unbind(outputs: &[UOp]) -> (Vec<UOp>, VarVals) {
    unbind_graph(outputs, &UOp::toposort_all(outputs))
}

/// `unbind`, given the graph's nodes (`order`, the `UOp::toposort_all` of `outputs`).
pub fn unbind_graph(outputs: &[UOp], order: &[UOp]) -> (Vec<UOp>, VarVals) {
    let mut ctx = Bindings::default();
    for (i, c) in order.iter().filter(|u| is_scalar_param(u)).enumerate() {
        let name = format!("{i}_scalar");
        let (param, value) = scalar_param(c, name.clone());
        ctx.vals.insert(name, value);
        ctx.params.insert(c.clone(), param);
    }
    if ctx.params.is_empty() && !order.iter().any(|u| u.op() == Ops::Bind) {
        return (outputs.to_vec(), VarVals::new());
    }
    let sink = UOp::new(Ops::Sink, DType::VOID, outputs.to_vec(), Arg::None);
    let sink = graph_rewrite(&sink, &PM_UNBIND, &mut ctx, "unbind variables", false);
    if let Some((name, a, b)) = ctx.conflict {
        panic!("realize: variable {name} is bound to both {a} and {b} in one graph");
    }
    (sink.src().to_vec(), ctx.vals)
}

/// `u` with each variable in `vals` bound to its value again (what realized outputs of symbolic
/// shape become in the tensors, which keep their values).
pub fn rebind(u: &UOp, vals: &VarVals) -> UOp {
    static PM_REBIND: LazyLock<PatternMatcher<VarVals>> = LazyLock::new(|| {
        PatternMatcher::new(vec![rule!("a variable bound again", |x; vals: &mut VarVals| UPat::var(x) => {
            let bound = |v: &UOp| match v.arg() {
                Arg::Var(name, ..) if v.op() == Ops::DefineVar => vals.get(name).map(|&value| bind(v, value)),
                _ => None,
            };
            if x.op() == Ops::Bind || !x.src().iter().any(|s| bound(s).is_some()) {
                return None;
            }
            Some(x.replace_src(x.src().iter().map(|s| bound(s).unwrap_or_else(|| s.clone())).collect()))
        })])
    });
    if !u.toposort().iter().any(|n| n.op() == Ops::DefineVar) {
        return u.clone();
    }
    graph_rewrite(u, &PM_REBIND, &mut vals.clone(), "rebind variables", false)
}
