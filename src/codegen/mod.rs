//! Kernel AST -> linear program: named passes, each a `graph_rewrite`.

use crate::uop::UOp;

/// A kernel ready for a device: its linearized UOps and, for compiled devices, its source.
#[derive(Clone, Debug)]
pub struct ProgramSpec {
    pub name: String,
    pub uops: Vec<UOp>,
    pub src: String,
    /// Estimated arithmetic ops and bytes moved per run (for DEBUG=2 GFLOP/s and GB/s).
    pub ops: u64,
    pub mem: u64,
}
