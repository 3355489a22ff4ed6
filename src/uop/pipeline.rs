//! A compiler stage as a declared list of named steps (tinygrad's `full_rewrite_to_sink`): each
//! step a rule table that `graph_rewrite` runs to a fixed point, or a walk or analysis written as
//! a function and named as what it does. Running the list is the one place where VIZ records
//! each step and the spec check (`SPEC`) verifies each step's result against its stage: no step
//! calls them itself.

use super::pattern::PatternMatcher;
use super::rewrite::graph_rewrite;
use super::spec;
use super::stage::{IsStage, Staged};
use super::track;
use super::UOp;
use crate::error::Result;

/// What a step does to the stage's graph.
pub enum Action<C: 'static> {
    /// Rewrite to a fixed point with a context-free rule table.
    Table(fn() -> &'static PatternMatcher),
    /// Rewrite to a fixed point with a rule table over a context of its own: the function runs
    /// `graph_rewrite` with the table and the context it makes from the stage's (a table run
    /// with the wrong context does not compile), under the pass name it is given.
    Rules(fn(&UOp, &mut C, &'static str) -> UOp),
    /// A walk written as a function.
    Walk(fn(&UOp, &mut C) -> Result<UOp>),
    /// An analysis: it keeps what it finds in the stage's context and leaves the graph alone.
    Analysis(fn(&UOp, &mut C)),
}

/// One named step of a stage over context `C`.
pub struct Step<C: 'static> {
    pub name: &'static str,
    pub action: Action<C>,
    /// Whether the step runs for this context (a CPU kernel has no GPU launch dims to add).
    pub when: fn(&C) -> bool,
}

fn always<C>(_: &C) -> bool {
    true
}

impl<C> Step<C> {
    /// Rewrite with the context-free table `rules`.
    pub const fn table(name: &'static str, rules: fn() -> &'static PatternMatcher) -> Step<C> {
        Step { name, action: Action::Table(rules), when: always::<C> }
    }
    /// Rewrite with a table over its own context, as `rewrite` runs it.
    pub const fn rules(name: &'static str, rewrite: fn(&UOp, &mut C, &'static str) -> UOp) -> Step<C> {
        Step { name, action: Action::Rules(rewrite), when: always::<C> }
    }
    /// A walk.
    pub const fn walk(name: &'static str, walk: fn(&UOp, &mut C) -> Result<UOp>) -> Step<C> {
        Step { name, action: Action::Walk(walk), when: always::<C> }
    }
    /// An analysis.
    pub const fn analysis(name: &'static str, analysis: fn(&UOp, &mut C)) -> Step<C> {
        Step { name, action: Action::Analysis(analysis), when: always::<C> }
    }
    /// Run only where `when` holds.
    pub const fn when(mut self, when: fn(&C) -> bool) -> Step<C> {
        self.when = when;
        self
    }
}

/// `run`'s result, recorded for VIZ as the pass `name` on `root` when it is on (the passes `run`
/// itself runs are recorded inside it).
fn recorded(name: &str, root: &UOp, run: impl FnOnce() -> Result<UOp>) -> Result<UOp> {
    if !track::recording() {
        return run();
    }
    let pass = track::start_pass(name, root);
    let result = run()?;
    pass.finish(&result, &[]);
    Ok(result)
}

/// A stage: the steps that take a graph of stage `S` (whose spec every step's result is checked
/// against with `SPEC`) to its next form, in order.
pub struct Pipeline<C: 'static, S> {
    pub steps: &'static [Step<C>],
    pub stage: std::marker::PhantomData<S>,
}

impl<C, S: IsStage> Pipeline<C, S> {
    /// Run every step that applies to `ctx` on `root`, in order. With `SPEC` on, each step's
    /// result is checked against the stage's spec: a malformed node is the error, naming the
    /// step that made it.
    pub fn run(&self, root: &Staged<S>, ctx: &mut C) -> Result<Staged<S>> {
        let check = spec::enabled();
        let mut root = root.root().clone();
        for step in self.steps {
            if !(step.when)(ctx) {
                continue;
            }
            root = match &step.action {
                Action::Table(rules) => graph_rewrite(&root, rules(), &mut (), step.name, false),
                Action::Rules(rewrite) => rewrite(&root, ctx, step.name),
                Action::Walk(walk) => recorded(step.name, &root, || walk(&root, ctx))?,
                Action::Analysis(analysis) => recorded(step.name, &root, || {
                    analysis(&root, ctx);
                    Ok(root.clone())
                })?,
            };
            if check {
                spec::verify(&root, S::STAGE, step.name)?;
            }
        }
        Ok(Staged::checked(root))
    }

    /// The names of the steps, in order (what VIZ shows for each run).
    pub fn step_names(&self) -> Vec<&'static str> {
        self.steps.iter().map(|s| s.name).collect()
    }
}
