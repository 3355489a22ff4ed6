//! Kernel optimizations as RANGE splits (UPCAST, UNROLL, LOCAL, GROUP, THREAD ...), chosen by
//! heuristics or BEAM search. This is their place in the pass list; the kernel is passed
//! through unchanged until the optimizer lands.

use crate::uop::UOp;

/// Apply the optimizations chosen for `ast` (none yet: `NOOPT` behaviour).
pub fn apply_opts(ast: &UOp) -> UOp {
    ast.clone()
}
