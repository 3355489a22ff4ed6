//! Buffers: typed arrays on a device, allocated at first use from its allocator, or views into
//! another buffer's memory (the memory planner's arenas).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::allocator::{host_ptr, RawBuffer};
use super::device::{Device, KernelArg};
use super::registry::get_device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::GlobalCounters;
use crate::uop::{Arg, DeviceBuffer, Identified, Ops, Shared, UOp};

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
    /// Host memory its creator owns (`Buffer::from_host_ptr`), used in place and never freed.
    External(Box<dyn RawBuffer>),
}

/// A typed array on a device, allocated on first use (or a view into another buffer's memory).
pub struct Buffer {
    id: u64,
    /// Interned (`intern_device`): buffers are made on every eager op, and a name copied each time
    /// was an allocation.
    device: &'static str,
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
            device: super::registry::intern_device(device),
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
            return Err(Error::Size { op: "a view", bytes: end, capacity: base.nbytes() });
        }
        let (base, offset) = match base.base() {
            Some((b, o)) => (b.clone(), o + offset),
            None => (base.clone(), offset),
        };
        Ok(Buffer {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            device: base.device,
            size,
            dtype,
            storage: Storage::View { base, offset, raw: OnceLock::new() },
        })
    }
    /// A buffer of `size` elements of `dtype` on `device` over the host memory at `ptr`, which
    /// the caller owns (tinygrad's `allocate(external_ptr=...)`): kernels and copies read and
    /// write that memory in place, and nothing frees it. An error on a device whose memory is not
    /// the host's (CPU and INTERP take it).
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `size * dtype.itemsize()` bytes for as long as the
    /// buffer lives.
    pub unsafe fn from_host_ptr(device: &str, ptr: *mut u8, size: usize, dtype: DType) -> Result<Buffer> {
        let bytes = size.checked_mul(dtype.itemsize()).ok_or(Error::Size {
            op: "a buffer over host memory",
            bytes: usize::MAX,
            capacity: usize::MAX,
        })?;
        if !(ptr as usize).is_multiple_of(dtype.itemsize()) {
            let reason = format!("host memory at {ptr:?} is not aligned to its {dtype:?} elements");
            return Err(Error::value("a buffer over host memory", reason));
        }
        let dev = get_device(device)?;
        // SAFETY: the caller's promise, passed on
        let raw =
            unsafe { dev.allocator().external(ptr, bytes) }.map_err(|e| Error::Device(format!("{device}: {e}")))?;
        Ok(Buffer {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            device: super::registry::intern_device(device),
            size,
            dtype,
            storage: Storage::External(raw),
        })
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn device(&self) -> &'static str {
        self.device
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
            Storage::Own(_) | Storage::External(_) => None,
            Storage::View { base, offset, .. } => Some((base, *offset)),
        }
    }
    pub fn is_allocated(&self) -> bool {
        match &self.storage {
            Storage::Own(m) => m.get().is_some(),
            Storage::View { base, .. } => base.is_allocated(),
            Storage::External(_) => true,
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
                let view = get_device(self.device)?.allocator().view(base.raw()?, *offset, self.nbytes())?;
                // when another thread made the view first, ours is dropped
                return Ok(raw.get_or_init(|| view).as_ref());
            }
            Storage::External(raw) => return Ok(raw.as_ref()),
            Storage::Own(m) => m,
        };
        if let Some(m) = memory.get() {
            return Ok(m.block.as_deref().expect("a live allocation has its block"));
        }
        let device = get_device(self.device)?;
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
    /// Copy all of `src` (as many bytes) into this buffer: in one copy where either side is host
    /// memory (see `copy_through_host`), else through a host vector.
    pub fn copy_from(&self, src: &Buffer) -> Result<()> {
        if src.nbytes() != self.nbytes() {
            return Err(Error::Size { op: "a copy", bytes: src.nbytes(), capacity: self.nbytes() });
        }
        let (dst_device, src_device) = (get_device(self.device)?, get_device(src.device)?);
        let (dst_raw, src_raw) = (self.raw()?, src.raw()?);
        let direct = super::allocator::copy_through_host(
            (dst_raw, dst_device.allocator()),
            (src_raw, src_device.allocator()),
            self.nbytes(),
        );
        direct.unwrap_or_else(|| self.copyin(&src.copyout()?))
    }
    /// All of `src` combined with `op` (ADD, MUL or MAX) over the job's ranks, into this buffer
    /// (of as many bytes): on the device where its backend has a collective of its own (NCCL for
    /// CUDA), else through host memory and `job::world()` (MPI); alone, a copy.
    pub fn all_reduce_ranks_from(&self, src: &Buffer, op: Ops) -> Result<()> {
        let op_name = "an all-reduce over ranks";
        if src.dtype() != self.dtype() {
            return Err(Error::DTypes {
                op: op_name,
                dtypes: vec![src.dtype(), self.dtype()],
                reason: "differ".into(),
            });
        }
        if src.nbytes() != self.nbytes() {
            return Err(Error::Size { op: op_name, bytes: src.nbytes(), capacity: self.nbytes() });
        }
        let device = get_device(src.device)?;
        let on_device = match self.device == src.device {
            true => device.all_reduce_ranks(self.raw()?, src.raw()?, src.size(), src.dtype(), op),
            false => None,
        };
        on_device.unwrap_or_else(|| {
            let world = super::job::world()?;
            // alone, the values as they are: one copy, not a round trip through a host vector
            if world.size() == 1 {
                return self.copy_from(src);
            }
            let mut data = src.copyout()?;
            world.all_reduce(&mut data, src.dtype(), op)?;
            self.copyin(&data)
        })
    }
    /// Copy `data` (exactly `nbytes()` long) into the buffer.
    pub fn copyin(&self, data: &[u8]) -> Result<()> {
        if data.len() != self.nbytes() {
            return Err(Error::Size { op: "a copy in", bytes: data.len(), capacity: self.nbytes() });
        }
        get_device(self.device)?.allocator().copyin(self.raw()?, data)
    }
    /// The buffer's bytes.
    pub fn copyout(&self) -> Result<Vec<u8>> {
        let raw = self.raw()?;
        let mut out = Vec::new();
        out.try_reserve_exact(self.nbytes())
            .map_err(|e| Error::Device(format!("cannot allocate {} bytes on the host: {e}", self.nbytes())))?;
        out.resize(self.nbytes(), 0u8);
        get_device(self.device)?.allocator().copyout(raw, &mut out)?;
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
    fn device(&self) -> &'static str {
        self.device
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

impl Buffer {
    /// The buffers as a kernel launch takes them: their memory (allocated now where it was not)
    /// and sizes.
    pub fn kernel_args(bufs: &[Arc<Buffer>]) -> Result<Vec<KernelArg<'_>>> {
        bufs.iter().map(|b| Ok(KernelArg { raw: b.raw()?, bytes: b.nbytes() })).collect()
    }
}

/// The buffer behind a BUFFER or reshaped BUFFER node.
pub fn view_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    match u.op() {
        Ops::Buffer => Buffer::of(u),
        _ if u.is_buffer_view() => Buffer::of(&u.src()[0]),
        _ => None,
    }
}

/// A BUFFER node for `buf`, reshaped to `shape` when that differs from `[size]`.
pub fn buffer_view(buf: &Arc<Buffer>, shape: &[usize]) -> UOp {
    let b = UOp::new(Ops::Buffer, buf.dtype(), vec![], Buffer::arg(buf));
    if shape == [buf.size()] {
        b
    } else {
        UOp::new(Ops::Reshape, buf.dtype(), vec![b], Arg::Shape(shape.to_vec()))
    }
}
