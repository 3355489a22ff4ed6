//! Devices, buffers, and the traits a backend implements.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::codegen::ProgramSpec;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::GlobalCounters;
use crate::renderer::Renderer;

pub use super::allocator::{Allocator, AllocatorStats, HostAllocator, HostMemory, LruAllocator, RawBuffer};

/// Turns rendered source into a loadable artifact, cached on disk by source.
pub trait Compiler: Send + Sync {
    /// The path of the compiled artifact for `src`.
    fn compile(&self, src: &str) -> Result<std::path::PathBuf>;
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
    /// `offset` bytes into another buffer's storage (the memory planner's arenas).
    View { base: Arc<Buffer>, offset: usize },
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
    /// device. It holds `base` (and so its memory) alive.
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
            storage: Storage::View { base, offset },
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
            Storage::View { base, offset } => Some((base, *offset)),
        }
    }
    pub fn is_allocated(&self) -> bool {
        match &self.storage {
            Storage::Own(m) => m.get().is_some(),
            Storage::View { base, .. } => base.is_allocated(),
        }
    }
    /// Base pointer of the (allocated) storage, for launching kernels.
    pub fn as_mut_ptr(&self) -> Result<*mut u8> {
        let memory = match &self.storage {
            Storage::View { base, offset } => {
                // SAFETY: `view` checked that offset + nbytes() lies inside base's allocation.
                return Ok(unsafe { base.as_mut_ptr()?.add(*offset) });
            }
            Storage::Own(m) => m,
        };
        if let Some(m) = memory.get() {
            return Ok(m.block.as_ref().expect("a live allocation has its block").host_ptr());
        }
        let device = get_device(&self.device)?;
        let block = device.allocator().alloc(self.nbytes())?;
        GlobalCounters::mem_allocated(self.nbytes() as u64);
        // when another thread allocated first, ours drops here and goes back to the allocator
        let mut ours = Some(Allocation { block: Some(block), bytes: self.nbytes(), device });
        let m = memory.get_or_init(|| ours.take().expect("initialized once"));
        Ok(m.block.as_ref().expect("a live allocation has its block").host_ptr())
    }
    /// Copy `data` (exactly `nbytes()` long) into the buffer.
    pub fn copyin(&self, data: &[u8]) -> Result<()> {
        if data.len() != self.nbytes() {
            return Err(Error::Invalid(format!("copyin of {} bytes into a {}-byte buffer", data.len(), self.nbytes())));
        }
        let dst = self.as_mut_ptr()?;
        // SAFETY: dst points to nbytes() writable bytes owned by this buffer, and `data` has
        // exactly that length; the regions cannot overlap because `data` is a Rust slice we
        // don't own mutably.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }
    /// The buffer's bytes.
    pub fn copyout(&self) -> Result<Vec<u8>> {
        let src = self.as_mut_ptr()?;
        let mut out = vec![0u8; self.nbytes()];
        // SAFETY: src points to nbytes() initialized bytes (zeroed when freshly allocated, else
        // last written by a kernel, a copy or a previous owner of a reused block).
        unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        Ok(out)
    }
}

/// A compiled kernel, ready to launch on its device.
pub trait Program: Send + Sync {
    /// Run over `bufs` (in PARAM order) and return the time it took.
    fn run(&self, bufs: &[Arc<Buffer>]) -> Result<Duration>;
}

/// A backend: how to allocate, render, compile and run kernels.
pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    fn allocator(&self) -> &dyn Allocator;
    /// The renderer, which also describes the device as codegen sees it (its `Target`).
    fn renderer(&self) -> &dyn Renderer;
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

fn registry() -> &'static Mutex<HashMap<String, Arc<dyn Device>>> {
    static DEVICES: OnceLock<Mutex<HashMap<String, Arc<dyn Device>>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The canonical name of a device spec: upper case, `:0` dropped.
pub fn canonical_device(name: &str) -> String {
    let up = name.to_ascii_uppercase();
    up.strip_suffix(":0").unwrap_or(&up).to_string()
}

/// Open (once) and return the device called `name` (`CPU`, `INTERP`).
pub fn get_device(name: &str) -> Result<Arc<dyn Device>> {
    let name = canonical_device(name);
    let mut devices = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = devices.get(&name) {
        return Ok(d.clone());
    }
    let dev: Arc<dyn Device> = match name.as_str() {
        "CPU" => Arc::new(super::cpu::CpuDevice::open()?),
        "INTERP" => Arc::new(super::interp::InterpDevice::new()),
        other => return Err(Error::Device(format!("unknown device {other:?} (known: CPU, INTERP)"))),
    };
    if crate::helpers::debug() >= 1 {
        eprintln!("opened device {name}");
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
/// CPU when a C compiler exists, else INTERP (with a one-line warning).
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
            match get_device("CPU") {
                Ok(_) => "CPU".into(),
                Err(e) => {
                    eprintln!("lazygrad: CPU device unavailable ({e}); falling back to INTERP");
                    "INTERP".into()
                }
            }
        })
        .clone()
}
