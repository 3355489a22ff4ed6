//! Algebraic and integer-index simplification (stub until the rule table lands).

use std::sync::LazyLock;

use super::pattern::PatternMatcher;
use super::rewrite::graph_rewrite;
use super::uop::UOp;

/// The symbolic rule table.
pub fn symbolic() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| PatternMatcher::new(vec![]));
    &PM
}

/// `u` simplified with the symbolic rules.
pub fn simplify(u: &UOp) -> UOp {
    graph_rewrite(u, symbolic(), &mut (), "symbolic", false)
}
