//! Devices, buffers, and the traits a backend implements.

use std::alloc::{self, Layout};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::codegen::ProgramSpec;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::renderer::Renderer;

/// Zeroed host memory aligned for wide vector loads.
pub struct HostMemory {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: HostMemory owns its allocation exclusively; the raw pointer is only a handle to it,
// so moving or sharing the owner between threads is as safe as for a Vec<u8>.
unsafe impl Send for HostMemory {}
unsafe impl Sync for HostMemory {}

impl HostMemory {
    const ALIGN: usize = 64;

    pub fn new(bytes: usize) -> Result<HostMemory> {
        let layout = Layout::from_size_align(bytes.max(1), Self::ALIGN)
            .map_err(|e| Error::Device(format!("cannot allocate {bytes} bytes: {e}")))?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::Device(format!("out of memory allocating {bytes} bytes")));
        }
        Ok(HostMemory { ptr, layout })
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: ptr was returned by alloc_zeroed with this exact layout and is freed once.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

impl RawBuffer for HostMemory {
    fn host_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

/// One allocation in a device's memory.
pub trait RawBuffer: Send + Sync {
    /// The allocation's address in this process (host-memory devices).
    fn host_ptr(&self) -> *mut u8;
}

/// Hands out device memory.
pub trait Allocator: Send + Sync {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>>;
}

/// Allocates aligned, zeroed host memory (CPU and INTERP).
pub struct HostAllocator;

impl Allocator for HostAllocator {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        Ok(Box::new(HostMemory::new(bytes)?))
    }
}

/// Turns rendered source into a loadable artifact, cached on disk by source.
pub trait Compiler: Send + Sync {
    /// The path of the compiled artifact for `src`.
    fn compile(&self, src: &str) -> Result<std::path::PathBuf>;
}

/// A typed array on a device, allocated on first use.
pub struct Buffer {
    id: u64,
    device: String,
    size: usize,
    dtype: DType,
    memory: OnceLock<Box<dyn RawBuffer>>,
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
            memory: OnceLock::new(),
        }
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
    pub fn is_allocated(&self) -> bool {
        self.memory.get().is_some()
    }
    fn memory(&self) -> Result<&dyn RawBuffer> {
        if let Some(m) = self.memory.get() {
            return Ok(m.as_ref());
        }
        let m = get_device(&self.device)?.allocator().alloc(self.nbytes())?;
        Ok(self.memory.get_or_init(|| m).as_ref())
    }
    /// Base pointer of the (allocated) storage, for launching kernels.
    pub fn as_mut_ptr(&self) -> Result<*mut u8> {
        Ok(self.memory()?.host_ptr())
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
        // SAFETY: src points to nbytes() initialized (zeroed at allocation) bytes.
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
    /// The source renderer (None for devices that run UOps directly).
    fn renderer(&self) -> Option<&dyn Renderer>;
    /// Turn a linearized kernel (rendered, for compiled devices) into something runnable.
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>>;
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
        "INTERP" => Arc::new(super::interp::InterpDevice),
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
