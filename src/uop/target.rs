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
    /// The device family (`CPU`, `CL`, `INTERP`).
    pub name: String,
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

    /// This machine's CPU: its widest vector registers (or `VECTOR_BYTES`, 16, 32 or 64, to
    /// generate code for another width) and `NUM_CPU_THREADS` threads (else every core).
    pub fn host_cpu(name: &str) -> Target {
        let native = host_vector_bytes();
        let vector_bytes = match crate::helpers::getenv("VECTOR_BYTES", native as i64) {
            v @ (16 | 32 | 64) => v as usize,
            _ => native,
        };
        Target {
            name: name.to_string(),
            language: Language::C,
            vector_bytes,
            register_bytes: native,
            threads: crate::helpers::cpu_threads(),
            workgroups: None,
            gpu: false,
            dtypes: DTypeSupport { half: true, bfloat16: false, float64: true, int64: true },
            tensor_cores: vec![],
        }
    }
}

impl Target {
    /// The reference interpreter: the CPU's vectors and layout choices (it is the CPU's oracle),
    /// and unbounded workgroups so that every workgroup opt can be checked on it; with
    /// `EMULATE_CUDA=1` it offers CUDA's tensor cores and with `EMULATE_METAL=1` Metal's, so the
    /// TC opt and each layout are checked without a GPU.
    pub fn interp() -> Target {
        let unbounded = usize::MAX;
        let emulated = |var, tensor_cores: fn() -> Vec<&'static TensorCore>| {
            (crate::helpers::getenv(var, 0) != 0).then(tensor_cores).unwrap_or_default()
        };
        Target {
            language: Language::Listing,
            workgroups: Some(Workgroups {
                max_threads: 1024,
                max_local: [unbounded; 3],
                max_groups: [unbounded; 3],
                local_bytes: unbounded,
                simd_threads: false,
            }),
            dtypes: DTypeSupport { half: true, bfloat16: true, float64: true, int64: true },
            tensor_cores: [
                emulated("EMULATE_CUDA", crate::uop::wmma::nvidia_sm80),
                emulated("EMULATE_METAL", crate::uop::wmma::apple_simdgroup),
            ]
            .concat(),
            ..Target::host_cpu("INTERP")
        }
    }

    /// A CUDA GPU of compute capability `arch` with the given limits (threads per block, block
    /// dims, grid dims, shared memory bytes per block). Scalar code: a GPU's threads fill its
    /// SIMD lanes. The tensor cores of its architecture are read afresh (`ALLOW_TF32` may change
    /// within a scope).
    pub fn cuda(
        arch: (u32, u32),
        max_threads: usize,
        max_local: [usize; 3],
        max_groups: [usize; 3],
        shared: usize,
    ) -> Target {
        Target {
            name: format!("CUDA:{}", cuda_arch_name(arch)),
            language: Language::Cuda(arch.0, arch.1),
            vector_bytes: 0,
            register_bytes: 4,
            threads: 1,
            workgroups: Some(Workgroups {
                max_threads,
                max_local,
                max_groups,
                local_bytes: shared,
                simd_threads: true,
            }),
            gpu: true,
            dtypes: DTypeSupport { half: false, bfloat16: false, float64: true, int64: true },
            tensor_cores: match arch >= (8, 0) {
                true => crate::uop::wmma::nvidia_sm80(),
                false => vec![],
            },
        }
    }

    /// A CUDA GPU of architecture `arch` (`sm_90`) with the limits of every NVIDIA GPU since
    /// Volta: 1024 threads a block, blocks up to 1024x1024x64, grids up to (2^31-1)x65535x65535,
    /// 48 KiB of shared memory a block. For rendering without a device (`NVRTC_CHECK`).
    pub fn cuda_arch(arch: &str) -> Option<Target> {
        let digits = arch.strip_prefix("sm_").filter(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit()))?;
        let (major, minor) = digits.split_at(digits.len() - 1);
        let capability = (major.parse().ok()?, minor.parse().ok()?);
        Some(Target::cuda(capability, 1024, [1024, 1024, 64], [(1 << 31) - 1, 65535, 65535], 48 << 10))
    }

    /// An Apple-silicon GPU as Metal describes it (tinygrad's Metal target): threadgroups of up
    /// to 1024 threads running in SIMD groups of 32, 32 KiB of threadgroup memory, grids of up to
    /// 2^32-1 threadgroups a dim (`gid` is a `uint3`). Scalar code, as CUDA's: the GPU's threads
    /// fill its SIMD lanes. float16 and bfloat16 (MSL 3.1's `bfloat`) are computed in, int64 too;
    /// Metal has no float64. Its tensor cores are the `simdgroup_matrix` products (M1 and newer).
    pub fn metal() -> Target {
        let groups = (1 << 32) - 1;
        Target {
            name: "METAL".into(),
            language: Language::Metal,
            vector_bytes: 0,
            register_bytes: 4,
            threads: 1,
            workgroups: Some(Workgroups {
                max_threads: 1024,
                max_local: [1024; 3],
                max_groups: [groups; 3],
                local_bytes: 32 << 10,
                simd_threads: true,
            }),
            gpu: true,
            dtypes: DTypeSupport { half: true, bfloat16: true, float64: false, int64: true },
            tensor_cores: crate::uop::wmma::apple_simdgroup(),
        }
    }
}

/// The NVRTC architecture option for compute capability `(major, minor)`: `sm_90` for 9.0.
pub fn cuda_arch_name((major, minor): (u32, u32)) -> String {
    format!("sm_{major}{minor}")
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

/// The width of this machine's vector registers in bytes: 64 with AVX-512, 32 with AVX2 and
/// FMA, else 16.
fn host_vector_bytes() -> usize {
    static NATIVE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *NATIVE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return 64;
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return 32;
            }
        }
        16
    })
}
