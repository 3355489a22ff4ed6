//! Devices, buffers, and the traits a backend implements.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::GlobalCounters;
use crate::uop::{Arg, DeviceBuffer, Identified, Shared, UOp};
use crate::uop::{ProgramSpec, Target};

pub use super::allocator::{host_ptr, Allocator, AllocatorStats, HostAllocator, HostMemory, LruAllocator, RawBuffer};

/// Turns rendered source into the bytes a device loads (a shared object, a program binary),
/// kept in the verified artifact cache (`helpers/cache.rs`).
pub trait Compiler: Send + Sync {
    fn compile(&self, src: &str) -> Result<Vec<u8>>;
}

/// Memory taken from a device's allocator, given back to it (to its free list) when dropped;
/// `GlobalCounters` counts it as used while it lives.
struct Allocation {
    block: Option<Box<dyn RawBuffer>>,
    bytes: usize,
    device: Arc<dyn Device>,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.device.allocator().free(self.bytes, block);
        }
        GlobalCounters::mem_freed(self.bytes as u64);
    }
}

/// Where a buffer's bytes are.
enum Storage {
    /// Its own allocation, taken at first use.
    Own(OnceLock<Allocation>),
    /// `offset` bytes into another buffer's storage (the memory planner's arenas), with the
    /// device's handle for that part, made at first use.
    View { base: Arc<Buffer>, offset: usize, raw: OnceLock<Box<dyn RawBuffer>> },
}

/// A typed array on a device, allocated on first use (or a view into another buffer's memory).
pub struct Buffer {
    id: u64,
    device: String,
    size: usize,
    dtype: DType,
    storage: Storage,
}

static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

impl Buffer {
    /// A buffer of `size` elements of `dtype` on `device`; no memory is taken until used.
    pub fn new(device: &str, size: usize, dtype: DType) -> Buffer {
        Buffer {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            device: device.to_string(),
            size,
            dtype,
            storage: Storage::Own(OnceLock::new()),
        }
    }
    /// A buffer of `size` elements of `dtype` stored `offset` bytes into `base`'s memory, on its
    /// device; `offset` is a multiple of the device's `view_alignment`. It holds `base` (and so
    /// its memory) alive.
    pub fn view(base: &Arc<Buffer>, offset: usize, size: usize, dtype: DType) -> Result<Buffer> {
        let end = offset + size * dtype.itemsize();
        if end > base.nbytes() {
            return Err(Error::Invalid(format!(
                "a view of bytes {offset}..{end} does not fit in a {}-byte buffer",
                base.nbytes()
            )));
        }
        let (base, offset) = match base.base() {
            Some((b, o)) => (b.clone(), o + offset),
            None => (base.clone(), offset),
        };
        Ok(Buffer {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            device: base.device.clone(),
            size,
            dtype,
            storage: Storage::View { base, offset, raw: OnceLock::new() },
        })
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn device(&self) -> &str {
        &self.device
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn nbytes(&self) -> usize {
        self.size * self.dtype.itemsize()
    }
    /// The buffer whose memory this one views, and the byte offset into it (None: its own).
    pub fn base(&self) -> Option<(&Arc<Buffer>, usize)> {
        match &self.storage {
            Storage::Own(_) => None,
            Storage::View { base, offset, .. } => Some((base, *offset)),
        }
    }
    pub fn is_allocated(&self) -> bool {
        match &self.storage {
            Storage::Own(m) => m.get().is_some(),
            Storage::View { base, .. } => base.is_allocated(),
        }
    }
    /// The device's handle of the buffer's memory (allocated at first use), for launching
    /// kernels and copies.
    pub fn raw(&self) -> Result<&dyn RawBuffer> {
        let memory = match &self.storage {
            Storage::View { base, offset, raw } => {
                if let Some(r) = raw.get() {
                    return Ok(r.as_ref());
                }
                let view = get_device(&self.device)?.allocator().view(base.raw()?, *offset, self.nbytes())?;
                // when another thread made the view first, ours is dropped
                return Ok(raw.get_or_init(|| view).as_ref());
            }
            Storage::Own(m) => m,
        };
        if let Some(m) = memory.get() {
            return Ok(m.block.as_deref().expect("a live allocation has its block"));
        }
        let device = get_device(&self.device)?;
        let block = device.allocator().alloc(self.nbytes())?;
        GlobalCounters::mem_allocated(self.nbytes() as u64);
        // when another thread allocated first, ours drops here and goes back to the allocator
        let mut ours = Some(Allocation { block: Some(block), bytes: self.nbytes(), device });
        let m = memory.get_or_init(|| ours.take().expect("initialized once"));
        Ok(m.block.as_deref().expect("a live allocation has its block"))
    }
    /// The address of the buffer's memory, for devices whose memory is the host's (CPU, INTERP).
    pub fn host_ptr(&self) -> Result<*mut u8> {
        host_ptr(self.raw()?)
    }
    /// Copy `data` (exactly `nbytes()` long) into the buffer.
    pub fn copyin(&self, data: &[u8]) -> Result<()> {
        if data.len() != self.nbytes() {
            return Err(Error::Invalid(format!("copyin of {} bytes into a {}-byte buffer", data.len(), self.nbytes())));
        }
        get_device(&self.device)?.allocator().copyin(self.raw()?, data)
    }
    /// The buffer's bytes.
    pub fn copyout(&self) -> Result<Vec<u8>> {
        let raw = self.raw()?;
        let mut out = Vec::new();
        out.try_reserve_exact(self.nbytes())
            .map_err(|e| Error::Device(format!("cannot allocate {} bytes on the host: {e}", self.nbytes())))?;
        out.resize(self.nbytes(), 0u8);
        get_device(&self.device)?.allocator().copyout(raw, &mut out)?;
        Ok(out)
    }
}

impl Identified for Buffer {
    fn id(&self) -> u64 {
        Buffer::id(self)
    }
    fn describe(&self) -> String {
        format!("Buffer#{}({}, {:?})", Buffer::id(self), self.size(), self.dtype())
    }
}

impl DeviceBuffer for Buffer {
    fn numel(&self) -> usize {
        self.size
    }
}

impl Buffer {
    /// The buffer a BUFFER node stands for.
    pub fn of(u: &UOp) -> Option<Arc<Buffer>> {
        match u.arg() {
            Arg::Buffer(b) => (b.0.clone() as Arc<dyn Any + Send + Sync>).downcast().ok(),
            _ => None,
        }
    }
    /// The argument of a BUFFER node standing for `buffer`.
    pub fn arg(buffer: &Arc<Buffer>) -> Arg {
        Arg::Buffer(Shared(buffer.clone()))
    }
}

/// A compiled kernel, ready to launch on its device.
pub trait Program: Send + Sync {
    /// Run over `bufs` (in PARAM order) with `vals` the values of the kernel's variables (in
    /// `variable::kernel_vars` order) and return the time it took.
    fn run(&self, bufs: &[Arc<Buffer>], vals: &[i64]) -> Result<Duration>;
}

/// A backend: how to allocate, render, compile and run kernels.
pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    fn allocator(&self) -> &dyn Allocator;
    /// The device as codegen sees it (read afresh: settings such as `NUM_CPU_THREADS` may change
    /// it within a scope); its language picks the renderer.
    fn target(&self) -> Target;
    /// Whether kernel times are real (BEAM search times candidates only where they are).
    fn times_kernels(&self) -> bool {
        true
    }
    /// Turn a linearized kernel (rendered, for compiled devices) into something runnable.
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>>;
    /// `compile` for many kernels at once (a schedule's new kernels), in `specs` order; a device
    /// whose compiler has a start-up cost overrides it to compile them together.
    fn compile_all(&self, specs: &[&ProgramSpec]) -> Result<Vec<Arc<dyn Program>>> {
        specs.iter().map(|s| self.compile(s)).collect()
    }
}

/// A backend: its name, how to open its device number `n` (an error says why it is unavailable
/// here), and a quick check of whether its first device is worth defaulting to.
pub struct Backend {
    pub name: &'static str,
    pub open: fn(usize) -> Result<Arc<dyn Device>>,
    /// Why the backend is not a default candidate here, if it is not (OpenCL without a GPU: on a
    /// CPU the CPU device runs the same machine faster).
    pub default_check: fn() -> std::result::Result<(), String>,
}

/// Every backend, in the order the default device is chosen: CUDA, OpenCL or WebGPU on a GPU,
/// then the CPU, then the interpreter (which always opens).
pub const BACKENDS: &[Backend] = &[
    Backend { name: "CUDA", open: super::cuda::open, default_check: super::cuda::available },
    Backend { name: "CL", open: super::opencl::open, default_check: super::opencl::has_gpu },
    Backend { name: "WEBGPU", open: super::webgpu::open, default_check: super::webgpu::has_gpu },
    Backend { name: "METAL", open: super::metal::open, default_check: super::metal::available },
    Backend { name: "CPU", open: |_| Ok(Arc::new(super::cpu::CpuDevice::open()?)), default_check: || Ok(()) },
    Backend { name: "INTERP", open: |_| Ok(Arc::new(super::interp::InterpDevice::new())), default_check: || Ok(()) },
];

fn registry() -> &'static Mutex<HashMap<String, Arc<dyn Device>>> {
    static DEVICES: OnceLock<Mutex<HashMap<String, Arc<dyn Device>>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The canonical name of a device spec: upper case, `:0` dropped.
pub fn canonical_device(name: &str) -> String {
    let up = name.to_ascii_uppercase();
    up.strip_suffix(":0").unwrap_or(&up).to_string()
}

/// A device spec's backend and device number: `CL:1` is OpenCL device 1, `CPU` device 0.
fn parse_device(name: &str) -> Result<(&'static Backend, usize)> {
    let (base, ordinal) = match name.split_once(':') {
        Some((b, n)) => {
            let n = n.parse().map_err(|_| Error::Device(format!("bad device number in {name:?}")))?;
            (b, n)
        }
        None => (name, 0),
    };
    match BACKENDS.iter().find(|b| b.name == base) {
        Some(b) => Ok((b, ordinal)),
        None => {
            let known: Vec<&str> = BACKENDS.iter().map(|b| b.name).collect();
            Err(Error::Device(format!("unknown device {name:?} (known: {})", known.join(", "))))
        }
    }
}

/// Open (once) and return the device called `name` (`CPU`, `CL`, `CL:1`, `INTERP`); an
/// unavailable one is an error that says why.
pub fn get_device(name: &str) -> Result<Arc<dyn Device>> {
    let name = canonical_device(name);
    let mut devices = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = devices.get(&name) {
        return Ok(d.clone());
    }
    let (backend, ordinal) = parse_device(&name)?;
    let dev = (backend.open)(ordinal).map_err(|e| match e {
        Error::Device(why) => Error::Device(format!("{name} unavailable: {why}")),
        other => Error::Device(format!("{name} unavailable: {other}")),
    })?;
    if crate::helpers::debug() >= 1 {
        eprintln!("opened device {name}: {}", dev.target());
    }
    devices.insert(name, dev.clone());
    Ok(dev)
}

thread_local! {
    static SCOPED_DEFAULT: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(vec![]) };
}

/// Makes `device` the default for new tensors on this thread until dropped.
#[must_use = "the default only holds while the guard is alive"]
pub struct DefaultDevice(());

impl DefaultDevice {
    pub fn scoped(device: &str) -> DefaultDevice {
        SCOPED_DEFAULT.with(|s| s.borrow_mut().push(canonical_device(device)));
        DefaultDevice(())
    }
}

impl Drop for DefaultDevice {
    fn drop(&mut self) {
        SCOPED_DEFAULT.with(|s| s.borrow_mut().pop());
    }
}

/// The device tensors go to by default: a `DefaultDevice::scoped` override, else `$DEV`, else
/// the first backend in `BACKENDS` order that opens and is worth defaulting to. `DEBUG=1` says
/// which were skipped and why; falling back to INTERP warns on one line.
pub fn default_device() -> String {
    if let Some(d) = SCOPED_DEFAULT.with(|s| s.borrow().last().cloned()) {
        return d;
    }
    static DEFAULT: OnceLock<String> = OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            if let Some(dev) = crate::helpers::getenv_str("DEV") {
                return canonical_device(&dev);
            }
            let mut skipped = vec![];
            for backend in BACKENDS {
                let opened =
                    (backend.default_check)().map_err(|why| format!("{}: {why}", backend.name)).and_then(|()| {
                        match get_device(backend.name) {
                            Err(Error::Device(why)) => Err(why),
                            other => other.map_err(|e| e.to_string()),
                        }
                    });
                if let Err(why) = opened {
                    skipped.push(why);
                    continue;
                }
                if backend.name == "INTERP" {
                    eprintln!("lazygrad: {}; falling back to INTERP", skipped.join("; "));
                } else if crate::helpers::debug() >= 1 && !skipped.is_empty() {
                    eprintln!("default device {}: skipped {}", backend.name, skipped.join("; "));
                }
                return backend.name.into();
            }
            "INTERP".into()
        })
        .clone()
}
