//! The "renderer" of the INTERP device, which runs linearized UOps as they are: its source is the
//! program's listing, one UOp per line (also DEBUG=6's format and VIZ's code pane).

use super::Renderer;
use crate::uop::Target;
use crate::uop::{LinearProgram, Ops, UOp};

/// Lists the UOps INTERP executes, on a target that is the host CPU's with emulated workgroups
/// (so that the same opts apply on CPU and INTERP, LOCAL and GROUP too); with `EMULATE_CUDA=1`
/// also NVIDIA's tensor cores and with `EMULATE_METAL=1` Apple's, which INTERP runs warp by warp
/// (tinygrad's `EMULATE`), so that the TC opt is checked without a GPU.
pub struct ListingRenderer;

impl Renderer for ListingRenderer {
    fn language(&self) -> &'static str {
        "uops"
    }
    fn target(&self) -> Target {
        crate::runtime::interp::target()
    }
    /// All but float32 EXP2 and LOG2, which codegen computes in float64 as for the CPU
    /// (`transcendental.rs`), so that the oracle gives the CPU's bits.
    fn supports(&self, op: Ops) -> bool {
        !matches!(op, Ops::Exp2 | Ops::Log2)
    }
    fn render(&self, _name: &str, uops: &LinearProgram) -> String {
        listing(uops)
    }
}

/// A linearized program, one line per UOp: index, op, dtype, arg.
pub fn listing(uops: &[UOp]) -> String {
    let lines = uops
        .iter()
        .enumerate()
        .map(|(i, u)| format!("{i:4} {:<12} {:?} {}\n", u.op().name(), u.dtype(), crate::uop::print::arg_str(u.arg())));
    lines.collect()
}
