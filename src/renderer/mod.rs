//! Linear program -> source text.

pub mod c;
pub mod cstyle;

use crate::uop::{Ops, UOp};

/// A source renderer for one family of devices.
pub trait Renderer: Send + Sync {
    /// Ops this target renders directly; others are decomposed before rendering.
    fn supports(&self, op: Ops) -> bool;
    /// The source of kernel `name` from its linearized UOps.
    fn render(&self, name: &str, uops: &[UOp]) -> String;
}
