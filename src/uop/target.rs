//! What codegen may assume about a device, as data: one codegen serves every device by reading
//! its target, never the machine it runs on. A device describes itself with one (it knows its
//! limits); the renderer layer picks its dialect by the target's language. A target is part of
//! every program and BEAM cache key, so two devices (or two settings of one) never share a
//! compiled kernel by accident.

use std::fmt;

use crate::dtype::{DType, Scalar};

/// A device's workgroups: threads that share local memory and meet at barriers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Workgroups {
    /// The most threads in one workgroup.
    pub max_threads: usize,
    /// The most threads along each of the (at most 3) local launch dims.
    pub max_local: [usize; 3],
    /// The most workgroups along each of the (at most 3) global launch dims.
    pub max_groups: [usize; 3],
    /// Bytes of local (shared) memory one workgroup may use.
    pub local_bytes: usize,
    /// Whether a workgroup's threads run side by side in SIMD lanes (a GPU), so that neighbouring
    /// threads should touch neighbouring elements; false where one core loops over them (OpenCL
    /// on a CPU), where each thread should compute what a core's registers hold.
    pub simd_threads: bool,
}

/// The element types a device computes in natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DTypeSupport {
    pub half: bool,
    pub bfloat16: bool,
    pub float64: bool,
    pub int64: bool,
}

pub use crate::uop::wmma::TensorCore;

/// The source a device compiles, which picks its renderer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    /// C for the system compiler (the CPU device).
    C,
    OpenCl,
    /// CUDA C for a GPU of this compute capability (major, minor).
    Cuda(u32, u32),
    /// The Metal Shading Language, for Apple GPUs (rendered and type-checked here; no Metal
    /// runtime exists on this platform).
    Metal,
    /// A listing of the linearized UOps, which the interpreter runs.
    Listing,
    /// WGSL for a WebGPU device (`wgpu`: Vulkan, Metal or DX12 underneath).
    Wgsl,
}

/// A device as codegen, the opts, the heuristics and BEAM see it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// The device family (`CPU`, `CL`, `INTERP`): static, as every kernel launch builds its
    /// device's target.
    pub name: &'static str,
    pub language: Language,
    /// The widest vector codegen builds, in bytes (values of at most this many bytes are one
    /// vector; 0: scalar code only).
    pub vector_bytes: usize,
    /// The width of one of the device's vector registers in bytes (a wider vector runs split
    /// into several).
    pub register_bytes: usize,
    /// How many CPU threads the THREAD opt may split a kernel over (1: none).
    pub threads: usize,
    /// Workgroups and local memory (the LOCAL, GROUP, GROUPTOP and NOLOCALS opts), if any.
    pub workgroups: Option<Workgroups>,
    /// Whether the device is GPU-like, parallel through workgroups rather than CPU threads: the
    /// heuristics and the layout choices (matmul panels, channels-last convolutions) follow it.
    /// INTERP has workgroups but is not GPU-like: it makes the CPU's choices, to be its oracle.
    pub gpu: bool,
    pub dtypes: DTypeSupport,
    /// The tensor-core instructions the TC opt may use (`uop/wmma.rs`).
    pub tensor_cores: Vec<&'static TensorCore>,
    /// The most buffers one kernel may bind (a WebGPU adapter's storage buffers per shader
    /// stage, Metal's 31); the scheduler stores part of a wider kernel first. None: no limit.
    pub max_buffers: Option<usize>,
}

impl Target {
    /// Whether kernels for the target may hold values of `dtype` (64-bit types need the device's
    /// support; 16-bit floats without it are stored as bits and computed in float32).
    pub fn computes_in(&self, dtype: DType) -> bool {
        match dtype.scalar {
            Scalar::Int64 | Scalar::UInt64 => self.dtypes.int64,
            Scalar::Float64 => self.dtypes.float64,
            _ => true,
        }
    }
    /// Whether the target launches workgroups of threads sharing local memory.
    pub fn has_local(&self) -> bool {
        self.workgroups.is_some()
    }

    /// Whether workgroups run as threads side by side (a GPU), not as one core's loop (OpenCL
    /// on a CPU, whose kernels then take a CPU's tiles and layouts).
    pub fn simd_workgroups(&self) -> bool {
        self.gpu && self.workgroups.as_ref().is_some_and(|w| w.simd_threads)
    }

    /// Lanes of one float32 vector (1 when the target builds no vectors).
    pub fn float_lanes(&self) -> usize {
        (self.vector_bytes / 4).max(1)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}-byte vectors, {} threads", self.name, self.vector_bytes, self.threads)?;
        if let Some(w) = &self.workgroups {
            write!(f, ", workgroups of up to {} threads", w.max_threads)?;
        }
        write!(f, ")")
    }
}
