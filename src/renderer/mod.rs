//! Linear program -> source text.

pub mod c;
pub mod cstyle;

use crate::uop::{Ops, UOp};

/// A source renderer for one family of devices.
pub trait Renderer: Send + Sync {
    /// The source language (`c`); also the file extension of process-replay captures.
    fn language(&self) -> &'static str;
    /// Ops this target renders directly; others are decomposed before rendering.
    fn supports(&self, op: Ops) -> bool;
    /// Whether the target computes in bfloat16 (else codegen emulates it in float32).
    fn bf16_math(&self) -> bool;
    /// Whether the target launches workgroups of threads sharing local memory (the LOCAL, GROUP,
    /// GROUPTOP and NOLOCALS opts); a CPU has none.
    fn has_local(&self) -> bool {
        false
    }
    /// The source of kernel `name` from its linearized UOps.
    fn render(&self, name: &str, uops: &[UOp]) -> String;
}
