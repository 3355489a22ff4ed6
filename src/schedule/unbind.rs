//! Variables' values leave the graph before scheduling: every BIND becomes its DEFINE_VAR, and
//! the values travel beside the schedule to the kernels that read them. So the schedule cache,
//! the kernels and the compiled programs depend on the variables, not on their values.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::dtype::DType;
use crate::uop::variable::{bind, bound_value, var_name};
use crate::uop::{graph_rewrite, rule_ctx, Arg, Ops, PatternMatcher, UOp, UPat};

/// The value of each variable for one run, by name.
pub type VarVals = BTreeMap<String, i64>;

/// Values found so far, and the first variable bound to two different values.
#[derive(Default)]
struct Bindings {
    vals: VarVals,
    conflict: Option<(String, i64, i64)>,
}

static PM_UNBIND: LazyLock<PatternMatcher> = LazyLock::new(|| {
    PatternMatcher::new(vec![rule_ctx(UPat::ops(&[Ops::Bind]).named("b"), |m, ctx: &mut Bindings| {
        let bind = &m["b"];
        let (name, value) = (var_name(&bind.src()[0]).to_string(), bound_value(bind));
        match ctx.vals.insert(name.clone(), value) {
            Some(old) if old != value => ctx.conflict = ctx.conflict.clone().or(Some((name, old, value))),
            _ => {}
        }
        Some(bind.src()[0].clone())
    })])
});

/// `outputs` with every BIND replaced by its variable, and the variables' values. Panics if one
/// variable is bound to two values in the same graph.
pub fn unbind(outputs: &[UOp]) -> (Vec<UOp>, VarVals) {
    let sink = UOp::new(Ops::Sink, DType::VOID, outputs.to_vec(), Arg::None);
    if !sink.toposort().iter().any(|u| u.op() == Ops::Bind) {
        return (outputs.to_vec(), VarVals::new());
    }
    let mut ctx = Bindings::default();
    let sink = graph_rewrite(&sink, &PM_UNBIND, &mut ctx, "unbind variables", false);
    if let Some((name, a, b)) = ctx.conflict {
        panic!("realize: variable {name} is bound to both {a} and {b} in one graph");
    }
    (sink.src().to_vec(), ctx.vals)
}

/// `u` with each variable in `vals` bound to its value again (what realized outputs of symbolic
/// shape become in the tensors, which keep their values).
pub fn rebind(u: &UOp, vals: &VarVals) -> UOp {
    static PM_REBIND: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(vec![rule_ctx(UPat::var("x"), |m, vals: &mut VarVals| {
            let x = &m["x"];
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
    graph_rewrite(u, &PM_REBIND, &mut vals.clone(), "rebind variables", false)
}
