//! Linear program -> source text, in the dialect of the device's target (`for_target`).

pub mod c;
pub mod cstyle;
pub mod cuda;
pub mod listing;
pub mod metal;
pub mod opencl;
pub mod wgsl;

use crate::uop::Language;
use crate::uop::Target;
use crate::uop::{LinearProgram, Ops};

/// A source renderer for one family of devices, and the target it renders for.
pub trait Renderer: Send + Sync {
    /// The source language (`c`); also the file extension of process-replay captures.
    fn language(&self) -> &'static str;
    /// What codegen may assume about the device (read afresh: settings such as
    /// `NUM_CPU_THREADS` may change it within a scope).
    fn target(&self) -> Target;
    /// Ops this target renders directly; others are decomposed before rendering.
    fn supports(&self, op: Ops) -> bool;
    /// The source of kernel `name` from its linearized UOps.
    fn render(&self, name: &str, uops: &LinearProgram) -> String;
}

/// The renderer for a target: its language picks the dialect.
pub fn for_target(target: Target) -> Box<dyn Renderer> {
    match target.language {
        Language::C => Box::new(c::CRenderer),
        Language::OpenCl => Box::new(opencl::OpenClRenderer { target }),
        Language::Cuda(..) => Box::new(cuda::CudaRenderer { target }),
        Language::Metal => Box::new(metal::MetalRenderer { target }),
        Language::Listing => Box::new(listing::ListingRenderer),
        Language::Wgsl => Box::new(wgsl::WgslRenderer { target }),
    }
}
