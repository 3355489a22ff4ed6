//! Device memory: the `Allocator` trait over opaque device handles, host memory, and tinygrad's
//! `LRUAllocator`, which keeps freed blocks on a per-size free list so that the next allocation
//! of that size reuses one.

use std::alloc::{self, Layout};
use std::any::Any;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// One allocation in a device's memory, or a view of part of one: an opaque handle that only its
/// device's allocator and programs look into (through `as_any`).
pub trait RawBuffer: Send + Sync {
    fn as_any(&self) -> &dyn Any;
}

/// What an allocator has done: blocks taken from the device, blocks reused from its free list,
/// and what the free list holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Allocations that went to the device (`malloc`, `cuMemAlloc` ...).
    pub allocs: u64,
    /// Allocations served from the free list.
    pub reused: u64,
    /// Blocks on the free list.
    pub cached_blocks: usize,
    /// Bytes on the free list.
    pub cached_bytes: usize,
}

/// Hands out device memory and moves bytes between it and the host.
pub trait Allocator: Send + Sync {
    /// A block of at least `bytes` bytes. Fresh memory is zeroed; a block reused from a free
    /// list holds whatever was written to it last (every kernel and copy writes its whole output).
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>>;
    /// The `bytes` bytes at `offset` in `base` (a block this allocator returned) as a buffer of
    /// their own; `offset` is a multiple of `view_alignment`. The caller keeps `base` alive.
    fn view(&self, base: &dyn RawBuffer, offset: usize, bytes: usize) -> Result<Box<dyn RawBuffer>>;
    /// What view offsets must be a multiple of.
    fn view_alignment(&self) -> usize {
        HostMemory::ALIGN
    }
    /// Write `src` to the start of `dst`, which holds at least `src.len()` bytes.
    fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()>;
    /// Read the first `dst.len()` bytes of `src` into `dst`.
    fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()>;
    /// Take back a block that `alloc(bytes)` returned. The default releases it.
    fn free(&self, bytes: usize, block: Box<dyn RawBuffer>) {
        let _ = bytes;
        drop(block);
    }
    /// `bytes` bytes of host memory at `ptr`, which the caller owns, as a block of this device
    /// (tinygrad's `allocate(external_ptr=...)`): nothing frees it. An error on a device whose
    /// memory is not the host's.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `bytes` bytes for as long as the block lives.
    unsafe fn external(&self, ptr: *mut u8, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let _ = (ptr, bytes);
        Err(Error::Device("its memory is not the host's, so it cannot use host memory in place".into()))
    }
    /// Release every cached free block to the device.
    fn free_cache(&self) {}
    fn stats(&self) -> AllocatorStats {
        AllocatorStats::default()
    }
}

/// Zeroed host memory aligned for wide vector loads. Blocks of `HUGE_MIN` bytes or more are
/// anonymous maps advised to use transparent huge pages: a kernel streaming through tens of MB
/// then walks 2 MiB pages instead of 4 KiB ones (a 64 MiB sum reads ~15% faster).
pub enum HostMemory {
    Heap {
        ptr: *mut u8,
        layout: Layout,
    },
    /// `ptr` is the map's start, taken once from `as_mut_ptr`; the map is held to unmap on drop.
    Map {
        ptr: *mut u8,
        map: memmap2::MmapMut,
    },
    /// Memory the caller owns (`Allocator::external`), never freed here.
    External {
        ptr: *mut u8,
    },
}

// SAFETY: HostMemory owns its allocation exclusively (or, `External`, is lent it by a caller who
// promised it stays valid while the block lives: `Allocator::external`); the raw pointer is only a
// handle to it, so moving or sharing the owner between threads is as safe as for a Vec<u8>.
unsafe impl Send for HostMemory {}
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// The alignment of every host allocation (and of the memory planner's offsets).
    pub const ALIGN: usize = 64;
    /// The smallest block that gets its own map (one huge page).
    pub const HUGE_MIN: usize = 2 << 20;

    pub fn new(bytes: usize) -> Result<HostMemory> {
        let oom = |e: &dyn std::fmt::Display| Error::Device(format!("cannot allocate {bytes} bytes: {e}"));
        if bytes >= Self::HUGE_MIN {
            let mut map = memmap2::MmapMut::map_anon(bytes).map_err(|e| oom(&e))?;
            // only advice: without huge pages the map works the same
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            return Ok(HostMemory::Map { ptr: map.as_mut_ptr(), map });
        }
        let layout = Layout::from_size_align(bytes.max(1), Self::ALIGN).map_err(|e| oom(&e))?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::Device(format!("out of memory allocating {bytes} bytes")));
        }
        Ok(HostMemory::Heap { ptr, layout })
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if let HostMemory::Heap { ptr, layout } = self {
            // SAFETY: ptr was returned by alloc_zeroed with this exact layout and is freed once.
            unsafe { alloc::dealloc(*ptr, *layout) }
        }
    }
}

impl HostMemory {
    /// The allocation's address.
    pub fn ptr(&self) -> *mut u8 {
        match self {
            HostMemory::Heap { ptr, .. } | HostMemory::Map { ptr, .. } | HostMemory::External { ptr } => *ptr,
        }
    }
}

/// Host memory a buffer uses: a whole allocation or a part of one, which it keeps alive (so a
/// view outlives nothing it points into), with its length (so every copy and kernel argument is
/// checked against it).
pub struct HostBlock {
    memory: std::sync::Arc<HostMemory>,
    offset: usize,
    len: usize,
}

impl HostBlock {
    /// The block's first byte.
    pub fn ptr(&self) -> *mut u8 {
        // SAFETY: `offset` lies inside the allocation (`HostAllocator::view` checks it), so the
        // result points into the same allocated object.
        unsafe { self.memory.ptr().add(self.offset) }
    }
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl RawBuffer for HostBlock {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The host memory `raw` is (a `HostBlock`), or an error naming what it is not.
pub fn host_block(raw: &dyn RawBuffer) -> Result<&HostBlock> {
    raw.as_any()
        .downcast_ref::<HostBlock>()
        .ok_or_else(|| Error::Device("a buffer of another device where host memory was expected".into()))
}

/// The address of host memory `raw`, or an error naming what it is not.
pub fn host_ptr(raw: &dyn RawBuffer) -> Result<*mut u8> {
    host_block(raw).map(HostBlock::ptr)
}

/// Copy the first `bytes` bytes of `src` to `dst` where one side or both are host memory: one
/// copy, with no staging vector on the host (a CPU buffer to another CPU device, or straight
/// between a GPU buffer and host memory through the GPU allocator's `copyin`/`copyout`). `None`
/// when neither is host memory.
pub fn copy_through_host(
    dst: (&dyn RawBuffer, &dyn Allocator),
    src: (&dyn RawBuffer, &dyn Allocator),
    bytes: usize,
) -> Option<Result<()>> {
    let (host_dst, host_src) = (host_block(dst.0).ok(), host_block(src.0).ok());
    let fit = |b: &HostBlock| fits(b, bytes, "a copy");
    Some(match (host_dst, host_src) {
        (None, None) => return None,
        (Some(d), Some(s)) => fit(d).and_then(|()| fit(s)).map(|()| {
            // SAFETY: both blocks hold at least `bytes` bytes (checked) and stay allocated while
            // borrowed; `copy` allows the ranges to overlap (two views of one block).
            unsafe { std::ptr::copy(s.ptr(), d.ptr(), bytes) }
        }),
        (Some(d), None) => fit(d).and_then(|()| {
            // SAFETY: the block holds `bytes` bytes (checked) and stays allocated while borrowed;
            // no Rust reference into host memory a buffer owns lives outside a call like this one
            // (kernels and copies reach it through raw pointers, one step at a time).
            let out = unsafe { std::slice::from_raw_parts_mut(d.ptr(), bytes) };
            src.1.copyout(src.0, out)
        }),
        (None, Some(s)) => fit(s).and_then(|()| {
            // SAFETY: as above; the bytes are initialized (zeroed when allocated, else written).
            let data = unsafe { std::slice::from_raw_parts(s.ptr(), bytes) };
            dst.1.copyin(dst.0, data)
        }),
    })
}

/// `Err` unless `bytes` bytes fit in `block` (`what` names the access).
fn fits(block: &HostBlock, bytes: usize, what: &'static str) -> Result<()> {
    match bytes <= block.len {
        true => Ok(()),
        false => Err(Error::Size { op: what, bytes, capacity: block.len }),
    }
}

/// Allocates aligned, zeroed host memory (CPU and INTERP).
pub struct HostAllocator;

impl Allocator for HostAllocator {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        Ok(Box::new(HostBlock { memory: std::sync::Arc::new(HostMemory::new(bytes)?), offset: 0, len: bytes }))
    }
    fn view(&self, base: &dyn RawBuffer, offset: usize, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let base = host_block(base)?;
        let end =
            offset.checked_add(bytes).ok_or(Error::Size { op: "a view", bytes: usize::MAX, capacity: base.len })?;
        fits(base, end, "a view")?;
        Ok(Box::new(HostBlock { memory: base.memory.clone(), offset: base.offset + offset, len: bytes }))
    }
    unsafe fn external(&self, ptr: *mut u8, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        if ptr.is_null() {
            return Err(Error::Device(format!("a null pointer holds no {bytes} bytes")));
        }
        Ok(Box::new(HostBlock { memory: std::sync::Arc::new(HostMemory::External { ptr }), offset: 0, len: bytes }))
    }
    fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()> {
        let dst = host_block(dst)?;
        fits(dst, src.len(), "a copy in")?;
        // SAFETY: the block holds at least src.len() writable bytes (checked above) and stays
        // allocated while borrowed; `src` is a Rust slice, which cannot overlap host memory a
        // buffer owns.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.ptr(), src.len()) };
        Ok(())
    }
    fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()> {
        let src = host_block(src)?;
        fits(src, dst.len(), "a copy out")?;
        // SAFETY: the block holds at least dst.len() initialized bytes (checked above; zeroed when
        // freshly allocated, else last written by a kernel, a copy or a previous owner of a
        // reused block).
        unsafe { std::ptr::copy_nonoverlapping(src.ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
}

/// Freed blocks of one size, oldest first, each with the sequence number it was freed at.
type Blocks = VecDeque<(u64, Box<dyn RawBuffer>)>;

/// Freed blocks by size; `order` maps each block's sequence number (when it was freed) to its
/// size, so the least recently freed block is `order`'s first.
#[derive(Default)]
struct FreeList {
    by_size: HashMap<usize, Blocks>,
    order: BTreeMap<u64, usize>,
    next: u64,
    bytes: usize,
    allocs: u64,
    reused: u64,
}

impl FreeList {
    /// The most recently freed block of `bytes` (warmest in the caches).
    fn take(&mut self, bytes: usize) -> Option<Box<dyn RawBuffer>> {
        let list = self.by_size.get_mut(&bytes)?;
        let (seq, block) = list.pop_back()?;
        if list.is_empty() {
            self.by_size.remove(&bytes);
        }
        self.order.remove(&seq);
        self.bytes -= bytes;
        Some(block)
    }
    /// The least recently freed block, and its size.
    fn pop_oldest(&mut self) -> Option<(usize, Box<dyn RawBuffer>)> {
        let (_, bytes) = self.order.pop_first()?;
        let list = self.by_size.get_mut(&bytes).expect("every ordered block is listed by size");
        let (_, block) = list.pop_front().expect("every ordered block is listed by size");
        if list.is_empty() {
            self.by_size.remove(&bytes);
        }
        self.bytes -= bytes;
        Some((bytes, block))
    }
}

/// tinygrad's `LRUAllocator` over `inner`: a freed block goes on a free list for its size (the
/// least recently freed blocks are released once the list holds more than `cap` bytes), an
/// allocation of that size takes it back, and when the device is out of memory the whole list is
/// released and the allocation retried. `LRU=0` turns the free list off.
pub struct LruAllocator<A> {
    inner: A,
    cap: usize,
    free: Mutex<FreeList>,
}

/// The machine's memory in bytes (`MemTotal` in `/proc/meminfo`), when it can be read.
fn physical_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().strip_suffix("kB")?;
    kib.trim().parse::<usize>().ok().map(|k| k << 10)
}

impl<A: Allocator> LruAllocator<A> {
    /// The default bound on cached bytes: a quarter of the machine's memory, at least 1 GiB. It
    /// must hold a JIT's whole arena: an evaluation over a test set plans one of gigabytes, and
    /// were it released, each of the JIT's first three calls would fault in fresh memory again.
    pub fn default_cap() -> usize {
        (physical_memory().unwrap_or(0) / 4).max(1 << 30)
    }

    pub fn new(inner: A, cap: usize) -> LruAllocator<A> {
        LruAllocator { inner, cap, free: Mutex::new(FreeList::default()) }
    }
    fn list(&self) -> std::sync::MutexGuard<'_, FreeList> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<A: Allocator> Allocator for LruAllocator<A> {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        if let Some(block) = {
            let mut list = self.list();
            let block = list.take(bytes);
            list.reused += block.is_some() as u64;
            block
        } {
            return Ok(block);
        }
        let block = match self.inner.alloc(bytes) {
            Ok(b) => b,
            Err(_) => {
                self.free_cache();
                self.inner.alloc(bytes)?
            }
        };
        self.list().allocs += 1;
        Ok(block)
    }
    fn free(&self, bytes: usize, block: Box<dyn RawBuffer>) {
        if bytes > self.cap || crate::helpers::getenv("LRU", 1) == 0 {
            return self.inner.free(bytes, block);
        }
        let evicted = {
            let mut list = self.list();
            let seq = list.next;
            list.next += 1;
            list.by_size.entry(bytes).or_default().push_back((seq, block));
            list.order.insert(seq, bytes);
            list.bytes += bytes;
            let mut evicted = vec![];
            while list.bytes > self.cap {
                evicted.extend(list.pop_oldest());
            }
            evicted
        };
        // released outside the lock: the inner allocator may take its time
        evicted.into_iter().for_each(|(n, b)| self.inner.free(n, b));
    }
    fn view(&self, base: &dyn RawBuffer, offset: usize, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        self.inner.view(base, offset, bytes)
    }
    fn view_alignment(&self) -> usize {
        self.inner.view_alignment()
    }
    fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()> {
        self.inner.copyin(dst, src)
    }
    fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()> {
        self.inner.copyout(src, dst)
    }
    unsafe fn external(&self, ptr: *mut u8, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        // SAFETY: the caller's promise, passed on
        unsafe { self.inner.external(ptr, bytes) }
    }
    fn free_cache(&self) {
        let all: Vec<_> = {
            let mut list = self.list();
            std::iter::from_fn(|| list.pop_oldest()).collect()
        };
        all.into_iter().for_each(|(n, b)| self.inner.free(n, b));
    }
    fn stats(&self) -> AllocatorStats {
        let list = self.list();
        AllocatorStats {
            allocs: list.allocs,
            reused: list.reused,
            cached_blocks: list.order.len(),
            cached_bytes: list.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Host memory that counts live blocks and fails above a limit.
    struct Counting {
        live: Arc<AtomicUsize>,
        limit: usize,
    }
    impl Allocator for Counting {
        fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
            if self.live.load(Ordering::SeqCst) >= self.limit {
                return Err(Error::Device("out of memory".into()));
            }
            self.live.fetch_add(1, Ordering::SeqCst);
            HostAllocator.alloc(bytes)
        }
        fn view(&self, base: &dyn RawBuffer, offset: usize, bytes: usize) -> Result<Box<dyn RawBuffer>> {
            HostAllocator.view(base, offset, bytes)
        }
        fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()> {
            HostAllocator.copyin(dst, src)
        }
        fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()> {
            HostAllocator.copyout(src, dst)
        }
        fn free(&self, _bytes: usize, block: Box<dyn RawBuffer>) {
            self.live.fetch_sub(1, Ordering::SeqCst);
            drop(block);
        }
    }

    #[test]
    fn host_blocks_small_and_mapped_are_aligned_zeroed_and_writable() {
        for bytes in [1, 1000, HostMemory::HUGE_MIN, 3 * HostMemory::HUGE_MIN + 12] {
            let block = HostMemory::new(bytes).unwrap();
            assert_eq!(matches!(block, HostMemory::Map { .. }), bytes >= HostMemory::HUGE_MIN);
            let ptr = block.ptr();
            assert_eq!(ptr as usize % HostMemory::ALIGN, 0, "{bytes} bytes");
            // SAFETY: `ptr` is the start of a live allocation of `bytes` bytes owned by `block`.
            let mem = unsafe { std::slice::from_raw_parts_mut(ptr, bytes) };
            assert!(mem.iter().all(|&b| b == 0), "{bytes} bytes are zeroed");
            mem[bytes - 1] = 7;
            assert_eq!(mem[bytes - 1], 7);
        }
    }

    #[test]
    fn reuses_by_size_evicts_oldest_and_retries_when_out_of_memory() {
        let live = Arc::new(AtomicUsize::new(0));
        let lru = LruAllocator::new(Counting { live: live.clone(), limit: 3 }, 300);
        let a = lru.alloc(100).unwrap();
        let pa = host_ptr(a.as_ref()).unwrap();
        lru.free(100, a);
        assert_eq!(lru.stats().cached_bytes, 100);
        let b = lru.alloc(100).unwrap();
        assert_eq!(host_ptr(b.as_ref()).unwrap(), pa, "the same block comes back");
        assert_eq!((lru.stats().allocs, lru.stats().reused), (1, 1));
        // another size is a new block
        let c = lru.alloc(200).unwrap();
        lru.free(100, b);
        lru.free(200, c);
        assert_eq!(lru.stats().cached_bytes, 300);
        // over the cap: the least recently freed (the 100) goes back to the device
        let d = lru.alloc(50).unwrap();
        lru.free(50, d);
        assert_eq!(lru.stats().cached_bytes, 250);
        assert_eq!(live.load(Ordering::SeqCst), 2);
        // the device holds at most 3 blocks: allocating 3 new sizes frees the cache to fit
        let held: Vec<_> = [10, 20, 30].iter().map(|&n| lru.alloc(n).unwrap()).collect();
        assert_eq!(lru.stats().cached_blocks, 0);
        assert_eq!(live.load(Ordering::SeqCst), 3);
        drop(held);
    }

    #[test]
    fn the_default_cap_is_a_quarter_of_the_machines_memory_and_at_least_1_gib() {
        let cap = LruAllocator::<HostAllocator>::default_cap();
        assert!(cap >= 1 << 30);
        let total = physical_memory().expect("/proc/meminfo has MemTotal");
        assert_eq!(cap, (total / 4).max(1 << 30));
    }
}
