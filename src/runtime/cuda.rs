//! The CUDA device (`CUDA`, `CUDA:1`): CUDA C from the shared C-family renderer, compiled by NVRTC
//! to a cubin for the device's architecture (kept in the verified artifact cache), loaded as a
//! module and launched as blocks of threads on one stream, timed with events. libcuda and
//! libnvrtc load at run time (`cudarc`'s dynamic loading, which panics on first use of a missing
//! library, so both are looked for first): a machine without them gets an error value.

use std::any::Any;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::result as cu;
use cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr, CUevent_flags, CUfunction, CUmodule};
use cudarc::driver::{CudaContext, CudaStream, DriverError};

use super::allocator::{Allocator, LruAllocator, RawBuffer};
use super::device::{Device, KernelArg, Program};
use crate::error::{Error, Result};
use crate::helpers::cache::ArtifactCache;
use crate::uop::{DTypeSupport, Language, LaunchGrid, ProgramSpec, Target, Workgroups};

fn cu_err(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| Error::Device(format!("CUDA {what}: {e}"))
}

/// Whether the driver library is there (without it, cudarc's first call panics).
fn driver_present() -> std::result::Result<(), String> {
    // SAFETY: loads libcuda to look for it and unloads it again; no symbol is called.
    match unsafe { cudarc::driver::sys::is_culib_present() } {
        true => Ok(()),
        false => Err("no libcuda.so (the NVIDIA driver) on this machine".into()),
    }
}

/// Whether a CUDA device is there to default to.
pub fn available() -> std::result::Result<(), String> {
    driver_present()?;
    cu::init().map_err(|e| format!("the driver failed to start: {e}"))?;
    match cu::device::get_count() {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err("no CUDA device".into()),
        Err(e) => Err(format!("the driver cannot count its devices: {e}")),
    }
}

/// Open CUDA device number `ordinal`.
pub fn open(ordinal: usize) -> Result<Arc<dyn Device>> {
    available().map_err(Error::Device)?;
    Ok(Arc::new(CudaDevice::new(ordinal)?))
}

/// `src` compiled by NVRTC into a cubin for architecture `arch` (`sm_90`), or the compile log;
/// kept in the verified artifact cache under the NVRTC version, the architecture and the source.
pub fn nvrtc_compile(src: &str, arch: &str) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result as rtc, sys};
    // SAFETY: loads libnvrtc to look for it and unloads it again; no symbol is called.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Compile("NVRTC unavailable: no libnvrtc.so on the library path".into()));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two ints written by the call; the library is present (checked above).
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| Error::Compile(format!("NVRTC: {e}")))?;
    static CACHE: std::sync::LazyLock<ArtifactCache> = std::sync::LazyLock::new(|| ArtifactCache::new("cuda"));
    let version = format!("NVRTC {major}.{minor}");
    let inputs = [version.as_str(), arch, src];
    if let Some((_, cubin)) = CACHE.load(&inputs) {
        return Ok(cubin);
    }
    let text = CString::new(src).map_err(|_| Error::Compile("CUDA source holds a NUL byte".into()))?;
    let program = rtc::create_program(&text, None).map_err(|e| Error::Compile(format!("NVRTC: {e}")))?;
    let options = [format!("--gpu-architecture={arch}"), "-default-device".into(), "-std=c++17".into()];
    // SAFETY: `program` was created above and is destroyed once, below; `text` outlives it.
    let built = unsafe { rtc::compile_program(program, &options) };
    // SAFETY: as above; the log and the cubin are copied out before the program is destroyed.
    let result = unsafe {
        match built {
            Err(e) => {
                let log = rtc::get_program_log(program).unwrap_or_default();
                let log: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                Err(Error::Compile(format!(
                    "NVRTC ({arch}) failed ({e}):\n{}\n--- source ---\n{src}",
                    String::from_utf8_lossy(&log)
                )))
            }
            Ok(()) => {
                let mut size = 0usize;
                let mut cubin = vec![];
                let status = sys::nvrtcGetCUBINSize(program, &mut size).result().and_then(|()| {
                    cubin = vec![0u8; size];
                    sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast()).result()
                });
                status.map(|()| cubin).map_err(|e| Error::Compile(format!("NVRTC cubin: {e}")))
            }
        }
    };
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { rtc::destroy_program(program) };
    if let Ok(cubin) = &result {
        // a cache that cannot be written only costs the next run a compile
        let _ = CACHE.store(&inputs, cubin);
    }
    result
}

/// A device allocation, freed when the last buffer or view of it goes.
struct Allocation {
    ctx: Arc<CudaContext>,
    ptr: CUdeviceptr,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `malloc_sync` in this context and is freed once, here.
            let _ = unsafe { cu::free_sync(self.ptr) };
        }
    }
}

/// Bytes of an allocation from `offset` on (a whole buffer or a view of one).
struct CudaMemory {
    allocation: Arc<Allocation>,
    offset: usize,
}

impl CudaMemory {
    fn ptr(&self) -> CUdeviceptr {
        self.allocation.ptr + self.offset as u64
    }
}

impl RawBuffer for CudaMemory {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn memory_of(raw: &dyn RawBuffer) -> Result<&CudaMemory> {
    raw.as_any()
        .downcast_ref::<CudaMemory>()
        .ok_or_else(|| Error::Device("a buffer of another device where CUDA memory was expected".into()))
}

/// Plain device allocations (never managed memory); copies synchronous on the context.
struct CudaAllocator {
    ctx: Arc<CudaContext>,
}

impl Allocator for CudaAllocator {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        self.ctx.bind_to_thread().map_err(cu_err("context"))?;
        // SAFETY: a fresh allocation of at least one byte, zeroed over its whole length before
        // anyone reads it.
        let ptr = unsafe {
            let ptr = cu::malloc_sync(bytes.max(1))
                .map_err(|e| Error::Device(format!("CUDA cannot allocate {bytes} bytes: {e}")))?;
            cu::memset_d8_sync(ptr, 0, bytes.max(1)).map_err(cu_err("zero fill"))?;
            ptr
        };
        Ok(Box::new(CudaMemory { allocation: Arc::new(Allocation { ctx: self.ctx.clone(), ptr }), offset: 0 }))
    }
    fn view(&self, base: &dyn RawBuffer, offset: usize, _bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let base = memory_of(base)?;
        Ok(Box::new(CudaMemory { allocation: base.allocation.clone(), offset: base.offset + offset }))
    }
    fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()> {
        let dst = memory_of(dst)?;
        self.ctx.bind_to_thread().map_err(cu_err("context"))?;
        // SAFETY: `Buffer` checked that `src` fits in the destination's bytes.
        unsafe { cu::memcpy_htod_sync(dst.ptr(), src) }.map_err(cu_err("copy in"))
    }
    fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()> {
        let src = memory_of(src)?;
        self.ctx.bind_to_thread().map_err(cu_err("context"))?;
        // SAFETY: `Buffer` checked that `dst` is no longer than the source's bytes.
        unsafe { cu::memcpy_dtoh_sync(dst, src.ptr()) }.map_err(cu_err("copy out"))
    }
}

/// What a CUDA device reports of itself: compute capability, threads per block, block dims,
/// grid dims and shared memory bytes per block.
struct CudaLimits {
    arch: (u32, u32),
    max_threads: usize,
    max_local: [usize; 3],
    max_groups: [usize; 3],
    shared: usize,
}

/// One CUDA device.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The GPU and its limits, from which `target` is built afresh (its tensor cores follow
    /// `ALLOW_TF32`).
    limits: CudaLimits,
    allocator: LruAllocator<CudaAllocator>,
    /// The communicator over the job's ranks, joined at the first all-reduce across them.
    #[cfg(feature = "nccl")]
    ranks: std::sync::OnceLock<std::result::Result<super::nccl::NcclRanks, String>>,
}

impl CudaDevice {
    fn new(ordinal: usize) -> Result<CudaDevice> {
        let ctx = CudaContext::new(ordinal).map_err(cu_err("context"))?;
        let attr = |a: CUdevice_attribute| ctx.attribute(a).map(|v| v as usize).map_err(cu_err("device info"));
        use CUdevice_attribute::*;
        let (major, minor) = ctx.compute_capability().map_err(cu_err("device info"))?;
        let limits = CudaLimits {
            arch: (major as u32, minor as u32),
            max_threads: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_local: [
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_groups: [
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            shared: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        };
        Ok(CudaDevice {
            stream: ctx.default_stream(),
            allocator: LruAllocator::new(CudaAllocator { ctx: ctx.clone() }, 1 << 32),
            ctx,
            limits,
            #[cfg(feature = "nccl")]
            ranks: std::sync::OnceLock::new(),
        })
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        "CUDA"
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn target(&self) -> Target {
        let l = &self.limits;
        target(l.arch, l.max_threads, l.max_local, l.max_groups, l.shared)
    }
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        let start = Instant::now();
        let cubin = nvrtc_compile(&spec.src, &arch_name(self.limits.arch))?;
        if crate::helpers::debug() >= 3 {
            eprintln!("built {} in {:.2} ms", spec.name.for_debug(), start.elapsed().as_secs_f64() * 1e3);
        }
        self.ctx.bind_to_thread().map_err(cu_err("context"))?;
        let name = CString::new(spec.name.to_string()).map_err(|_| Error::Compile("kernel name holds a NUL".into()))?;
        // SAFETY: the image is a whole cubin NVRTC produced (or the cache verified against the
        // source it was built from); the function is looked up in the module just loaded.
        let (module, function) = unsafe {
            let module = cu::module::load_data(cubin.as_ptr().cast()).map_err(cu_err("module"))?;
            (module, cu::module::get_function(module, name).map_err(cu_err("kernel"))?)
        };
        let slots = spec.param_slots();
        let local = spec.local_size.unwrap_or([1; 3]);
        Ok(Arc::new(CudaKernel {
            ctx: self.ctx.clone(),
            stream: self.stream.clone(),
            module,
            function,
            launch: Mutex::new(()),
            slots,
            nvars: spec.vars().len(),
            grid: spec.grid(),
            block: local,
        }))
    }
    /// The new kernels' cubins built by NVRTC on every core at once (each lands in the artifact
    /// cache; a failure is reported by the load that follows), then each loaded in order.
    fn compile_all(&self, specs: &[&ProgramSpec]) -> Result<Vec<Arc<dyn Program>>> {
        let (arch, next) = (arch_name(self.limits.arch), std::sync::atomic::AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..crate::helpers::cpu_threads().min(specs.len()) {
                scope.spawn(|| {
                    while let Some(spec) = specs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        let _ = nvrtc_compile(&spec.src, &arch);
                    }
                });
            }
        });
        specs.iter().map(|s| self.compile(s)).collect()
    }
    /// Through NCCL, GPU to GPU, where libnccl is there.
    #[cfg(feature = "nccl")]
    fn all_reduce_ranks(
        &self,
        dst: &dyn RawBuffer,
        src: &dyn RawBuffer,
        count: usize,
        dtype: crate::dtype::DType,
        op: crate::uop::Ops,
    ) -> Option<Result<()>> {
        if !super::nccl::present() {
            return None;
        }
        let reduce = || {
            self.ctx.bind_to_thread().map_err(cu_err("context"))?;
            let world = super::job::world()?;
            let open = || super::nccl::NcclRanks::open(world).map_err(|e| e.to_string());
            let ranks = self.ranks.get_or_init(open).as_ref().map_err(|e| Error::Device(e.clone()))?;
            let (dst, src) = (memory_of(dst)?, memory_of(src)?);
            // SAFETY: both are this context's allocations, each holding `count` elements of
            // `dtype` (`Buffer::all_reduce_ranks_from` checked that their buffers match).
            unsafe { ranks.all_reduce(dst.ptr(), src.ptr(), count, dtype, op, &self.stream) }
        };
        Some(reduce())
    }
}

/// A loaded kernel and its launch.
struct CudaKernel {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: CUmodule,
    function: CUfunction,
    /// One launch at a time: the events and argument array are per launch.
    launch: Mutex<()>,
    /// The buffer slot of each pointer argument, in order.
    slots: Vec<usize>,
    /// How many variables' values follow the pointers.
    nvars: usize,
    grid: LaunchGrid,
    block: [usize; 3],
}

// SAFETY: the module and function handles are plain driver handles, valid in any thread that
// binds the context (every use does first), and launches are serialized by `launch`.
unsafe impl Send for CudaKernel {}
// SAFETY: as for Send: no shared mutable state outside the mutex.
unsafe impl Sync for CudaKernel {}

impl Drop for CudaKernel {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the module was loaded in this context and is unloaded once, here.
            let _ = unsafe { cu::module::unload(self.module) };
        }
    }
}

impl Program for CudaKernel {
    unsafe fn run(&self, bufs: &[KernelArg], vals: &[i64]) -> Result<Duration> {
        if vals.len() != self.nvars {
            return Err(Error::Device(format!("kernel reads {} variables, got {}", self.nvars, vals.len())));
        }
        let _one = self.launch.lock().unwrap_or_else(|e| e.into_inner());
        self.ctx.bind_to_thread().map_err(cu_err("context"))?;
        let mut pointers: Vec<CUdeviceptr> = Vec::with_capacity(self.slots.len());
        for &slot in &self.slots {
            let buf = bufs
                .get(slot)
                .ok_or_else(|| Error::Device(format!("kernel uses buffer slot {slot}, got {} buffers", bufs.len())))?;
            pointers.push(memory_of(buf.raw)?.ptr());
        }
        let mut vals = vals.to_vec();
        let mut params: Vec<*mut c_void> = pointers.iter_mut().map(|p| (p as *mut CUdeviceptr).cast()).collect();
        params.extend(vals.iter_mut().map(|v| (v as *mut i64).cast()));
        let dims = |d: [usize; 3]| (d[0] as u32, d[1] as u32, d[2] as u32);
        let stream = self.stream.cu_stream();
        // SAFETY: each parameter points at a device pointer or a variable's value (`long long`)
        // that lives until the launch has been enqueued (the driver copies the values): one
        // per `__global` pointer the kernel declares, in slot order, then one per variable; the events are created, recorded on this stream, waited for
        // and destroyed here.
        unsafe {
            let (start, end) = (
                cu::event::create(CUevent_flags::CU_EVENT_DEFAULT).map_err(cu_err("event"))?,
                cu::event::create(CUevent_flags::CU_EVENT_DEFAULT).map_err(cu_err("event"))?,
            );
            let timed = cu::event::record(start, stream)
                .and_then(|()| {
                    cu::launch_kernel(
                        self.function,
                        dims(self.grid.at(&vals)),
                        dims(self.block),
                        0,
                        stream,
                        &mut params,
                    )
                })
                .and_then(|()| cu::event::record(end, stream))
                .and_then(|()| cu::event::synchronize(end))
                .and_then(|()| cu::event::elapsed(start, end));
            let _ = (cu::event::destroy(start), cu::event::destroy(end));
            let ms = timed.map_err(cu_err("launch"))?;
            Ok(Duration::from_secs_f64(ms as f64 / 1e3))
        }
    }
}

/// A CUDA GPU of compute capability `arch` with the given limits (threads per block, block
/// dims, grid dims, shared memory bytes per block). Scalar code: a GPU's threads fill its
/// SIMD lanes. The tensor cores of its architecture are read afresh (`ALLOW_TF32` may change
/// within a scope).
pub fn target(
    arch: (u32, u32),
    max_threads: usize,
    max_local: [usize; 3],
    max_groups: [usize; 3],
    shared: usize,
) -> Target {
    Target {
        name: "CUDA",
        language: Language::Cuda(arch.0, arch.1),
        vector_bytes: 0,
        register_bytes: 4,
        threads: 1,
        workgroups: Some(Workgroups { max_threads, max_local, max_groups, local_bytes: shared, simd_threads: true }),
        gpu: true,
        dtypes: DTypeSupport { half: false, bfloat16: false, float64: true, int64: true },
        tensor_cores: match arch >= (8, 0) {
            true => crate::uop::wmma::nvidia_sm80(),
            false => vec![],
        },
        max_buffers: None,
    }
}

/// A CUDA GPU of architecture `arch` (`sm_90`) with the limits of every NVIDIA GPU since
/// Volta: 1024 threads a block, blocks up to 1024x1024x64, grids up to (2^31-1)x65535x65535,
/// 48 KiB of shared memory a block. For rendering without a device (`NVRTC_CHECK`).
pub fn arch_target(arch: &str) -> Option<Target> {
    let digits = arch.strip_prefix("sm_").filter(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit()))?;
    let (major, minor) = digits.split_at(digits.len() - 1);
    let capability = (major.parse().ok()?, minor.parse().ok()?);
    Some(target(capability, 1024, [1024, 1024, 64], [(1 << 31) - 1, 65535, 65535], 48 << 10))
}

/// The NVRTC architecture option for compute capability `(major, minor)`: `sm_90` for 9.0.
pub fn arch_name((major, minor): (u32, u32)) -> String {
    format!("sm_{major}{minor}")
}
