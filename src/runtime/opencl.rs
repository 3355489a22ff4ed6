//! The OpenCL device (`CL`, `CL:1`, ...): OpenCL C from the shared C-family renderer, built by the
//! driver from source into a program binary (kept in the verified artifact cache, so a later run
//! loads it without the driver's front end), run as workgroups on one in-order queue with
//! profiling events. libOpenCL
//! is loaded at run time (`opencl3`'s dynamic loading), so a machine without it gets an error
//! value when it asks for the device, never a failure to start.

use std::any::Any;
use std::ptr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opencl3::command_queue::{enqueue_fill_buffer, enqueue_nd_range_kernel, enqueue_read_buffer, enqueue_write_buffer};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device as ClDeviceInfo, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::error_codes::ClError;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer as ClBuffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_command_queue, cl_event, cl_int, cl_mem, CL_BLOCKING};

use super::allocator::{Allocator, LruAllocator, RawBuffer};
use super::device::{Device, KernelArg, Program};
use crate::error::{Error, Result};
use crate::helpers::cache::ArtifactCache;
use crate::uop::Language;
use crate::uop::{DTypeSupport, LaunchGrid, ProgramSpec, Target, Workgroups};

fn cl_err(what: &str) -> impl Fn(opencl3::error_codes::ClError) -> Error + '_ {
    move |e| Error::Device(format!("OpenCL {what}: {e}"))
}

/// The OpenCL devices of every platform, in platform order.
fn all_devices() -> Result<Vec<ClDeviceInfo>> {
    // one query at a time: PoCL 3.1 found no devices for a thread that asked during another's
    static QUERY: Mutex<()> = Mutex::new(());
    let _one = QUERY.lock().unwrap_or_else(|e| e.into_inner());
    let platforms = opencl3::platform::get_platforms().map_err(cl_err("platforms"))?;
    let mut devices = vec![];
    for p in platforms {
        // a platform without devices of a type reports an error, not an empty list
        devices.extend(p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default().into_iter().map(ClDeviceInfo::new));
    }
    Ok(devices)
}

/// Whether the first OpenCL device is a GPU (only then is CL worth being the default device).
pub fn has_gpu() -> std::result::Result<(), String> {
    let first = all_devices().map_err(|e| e.to_string())?.into_iter().next().ok_or("no OpenCL device")?;
    match first.dev_type() {
        Ok(t) if t & CL_DEVICE_TYPE_GPU != 0 => Ok(()),
        _ => Err(format!("{} is not a GPU", first.name().unwrap_or_default())),
    }
}

/// Open OpenCL device number `ordinal` (over all platforms).
pub fn open(ordinal: usize) -> Result<Arc<dyn Device>> {
    let devices = all_devices()?;
    let count = devices.len();
    let device = devices
        .into_iter()
        .nth(ordinal)
        .ok_or_else(|| Error::Device(format!("OpenCL has {count} devices, no device {ordinal}")))?;
    Ok(Arc::new(ClDevice::new(device)?))
}

/// A device's OpenCL objects, shared by its allocator and programs.
struct Cl {
    context: Context,
    queue: CommandQueue,
    device: ClDeviceInfo,
}

impl Cl {
    /// Run `enqueue` on the queue (it returns its command's event) and wait for the command.
    fn blocking(
        &self,
        what: &str,
        enqueue: impl FnOnce(cl_command_queue) -> std::result::Result<cl_event, cl_int>,
    ) -> Result<Event> {
        let event = Event::new(enqueue(self.queue.get()).map_err(|e| cl_err(what)(ClError(e)))?);
        event.wait().map_err(cl_err(what))?;
        Ok(event)
    }
}

/// An allocation in device memory, or a sub-buffer of one.
struct ClMemory(ClBuffer<u8>);

impl RawBuffer for ClMemory {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn cl_mem_of(raw: &dyn RawBuffer) -> Result<cl_mem> {
    match raw.as_any().downcast_ref::<ClMemory>() {
        Some(m) => Ok(m.0.get()),
        None => Err(Error::Device("a buffer of another device where OpenCL memory was expected".into())),
    }
}

/// Device memory through the context, copies through the queue (blocking).
struct ClAllocator {
    cl: Arc<Cl>,
    align: usize,
}

impl Allocator for ClAllocator {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let n = bytes.max(1);
        // SAFETY: no host pointer is given, so the driver owns the memory it creates.
        let buf = unsafe { ClBuffer::<u8>::create(&self.cl.context, CL_MEM_READ_WRITE, n, ptr::null_mut()) }
            .map_err(|e| Error::Device(format!("OpenCL cannot allocate {bytes} bytes: {e}")))?;
        let zero = 0u8;
        // SAFETY: the pattern is one byte read during the call, and the range is the buffer's.
        self.cl.blocking("zero fill", |q| unsafe {
            enqueue_fill_buffer(q, buf.get(), (&zero as *const u8).cast(), 1, 0, n, 0, ptr::null())
        })?;
        Ok(Box::new(ClMemory(buf)))
    }
    fn view(&self, base: &dyn RawBuffer, offset: usize, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let Some(ClMemory(base)) = base.as_any().downcast_ref::<ClMemory>() else {
            return Err(Error::Device("a view of a buffer of another device".into()));
        };
        // SAFETY: `Buffer::view` checked that the range lies inside the base allocation.
        let sub = unsafe { base.create_sub_buffer(CL_MEM_READ_WRITE, offset, bytes.max(1)) }.map_err(cl_err("view"))?;
        Ok(Box::new(ClMemory(sub)))
    }
    fn view_alignment(&self) -> usize {
        self.align
    }
    fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let mem = cl_mem_of(dst)?;
        // SAFETY: a blocking write of `src` (read during the call) into a buffer at least as long.
        self.cl
            .blocking("copy in", |q| unsafe {
                enqueue_write_buffer(q, mem, CL_BLOCKING, 0, src.len(), src.as_ptr().cast(), 0, ptr::null())
            })
            .map(drop)
    }
    fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let mem = cl_mem_of(src)?;
        // SAFETY: a blocking read into `dst` (written during the call) from a buffer at least as
        // long.
        self.cl
            .blocking("copy out", |q| unsafe {
                enqueue_read_buffer(q, mem, CL_BLOCKING, 0, dst.len(), dst.as_mut_ptr().cast(), 0, ptr::null())
            })
            .map(drop)
    }
}

/// One OpenCL device.
pub struct ClDevice {
    cl: Arc<Cl>,
    target: Target,
    allocator: LruAllocator<ClAllocator>,
    options: String,
    /// The device, its driver and platform: with the build options, what a binary depends on.
    identity: String,
    cache: ArtifactCache,
}

impl ClDevice {
    fn new(device: ClDeviceInfo) -> Result<ClDevice> {
        let context = Context::from_device(&device).map_err(cl_err("context"))?;
        // SAFETY: the device belongs to the context; the queue is in order, with profiling.
        let queue =
            unsafe { CommandQueue::create_with_properties(&context, device.id(), CL_QUEUE_PROFILING_ENABLE, 0) }
                .map_err(cl_err("queue"))?;
        let extensions = device.extensions().unwrap_or_default();
        let item_sizes = device.max_work_item_sizes().map_err(cl_err("device info"))?;
        let max_local = [0, 1, 2].map(|d| item_sizes.get(d).copied().unwrap_or(1));
        let on_cpu = device.dev_type().map_err(cl_err("device info"))? & CL_DEVICE_TYPE_CPU != 0;
        let register_bytes = 4 * device.native_vector_width_float().unwrap_or(1) as usize;
        let target = Target {
            name: "CL",
            language: Language::OpenCl,
            // a CPU device's work-items are a core's loop iterations: its vector registers are
            // what OpenCL vectors fill (a GPU's threads fill its SIMD lanes instead)
            vector_bytes: if on_cpu { register_bytes } else { 0 },
            register_bytes,
            threads: 1,
            workgroups: Some(Workgroups {
                max_threads: device.max_work_group_size().map_err(cl_err("device info"))?,
                max_local,
                max_groups: [u32::MAX as usize; 3],
                local_bytes: device.local_mem_size().map_err(cl_err("device info"))? as usize,
                simd_threads: !on_cpu,
            }),
            gpu: true,
            dtypes: DTypeSupport {
                half: extensions.contains("cl_khr_fp16"),
                bfloat16: false,
                float64: extensions.contains("cl_khr_fp64"),
                int64: true,
            },
            tensor_cores: vec![],
            max_buffers: None,
        };
        // correctly rounded float32 division and square root where the device offers them
        let exact = device.single_fp_config().unwrap_or(0) & opencl3::device::CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT != 0;
        let options = match exact {
            true => "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt",
            false => "-cl-std=CL1.2",
        };
        let align = (device.mem_base_addr_align().map_err(cl_err("device info"))? as usize / 8).max(1);
        let identity = [device.name(), device.vendor(), device.driver_version(), device.version()]
            .map(|r| r.unwrap_or_default())
            .join("\n");
        let cl = Arc::new(Cl { context, queue, device });
        Ok(ClDevice {
            target,
            allocator: LruAllocator::new(ClAllocator { cl: cl.clone(), align }, 1 << 30),
            cl,
            options: options.into(),
            identity,
            cache: ArtifactCache::new("cl"),
        })
    }

    /// What a program binary of `src` depends on.
    fn inputs<'a>(&'a self, src: &'a str) -> [&'a str; 3] {
        [&self.identity, &self.options, src]
    }

    /// The program of kernel source `src`: loaded from its cached binary, else built.
    fn program(&self, src: &str) -> Result<Arc<ClProgram>> {
        if let Some((_, binary)) = self.cache.load(&self.inputs(src)) {
            if let Ok(p) = ClProgram::create_and_build_from_binary(&self.cl.context, &[&binary], &self.options) {
                return Ok(Arc::new(p));
            }
        }
        self.build(&[src])
    }

    /// `srcs` built as one program (one front-end run for the lot), its binary cached for each of
    /// them; or the build log.
    fn build(&self, srcs: &[&str]) -> Result<Arc<ClProgram>> {
        // one source (the renderer guards what kernels share): several crashed PoCL 3.1
        let src = srcs.concat();
        let mut program = ClProgram::create_from_source(&self.cl.context, &src).map_err(cl_err("program"))?;
        if let Err(e) = program.build(&[self.cl.device.id()], &self.options) {
            let log = program.get_build_log(self.cl.device.id()).unwrap_or_default();
            return Err(Error::Compile(format!("OpenCL build failed ({e}):\n{log}\n--- source ---\n{src}")));
        }
        if let Some(binary) = program.get_binaries().ok().and_then(|b| b.into_iter().next()) {
            for s in srcs {
                // a cache that cannot be written only costs the next run a build
                let _ = self.cache.store(&self.inputs(s), &binary);
            }
        }
        Ok(Arc::new(program))
    }

    fn load(&self, program: &Arc<ClProgram>, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        let kernel = Kernel::create(program, &spec.name.to_string()).map_err(cl_err("kernel"))?;
        let slots = spec.param_slots();
        let local = spec.local_size.unwrap_or([1; 3]);
        let global = spec.grid();
        Ok(Arc::new(ClKernel {
            cl: self.cl.clone(),
            _program: program.clone(),
            kernel: Mutex::new(kernel),
            slots,
            nvars: spec.vars().len(),
            grid: global,
            local,
        }))
    }
}

impl Device for ClDevice {
    fn name(&self) -> &str {
        "CL"
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn target(&self) -> Target {
        self.target.clone()
    }
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        let start = Instant::now();
        let program = self.program(&spec.src)?;
        if crate::helpers::debug() >= 3 {
            eprintln!("built {} in {:.2} ms", spec.name.for_debug(), start.elapsed().as_secs_f64() * 1e3);
        }
        self.load(&program, spec)
    }
    /// The kernels not in the cache built as one program, one front-end run for all of them
    /// (unless two share a name); a failing build is retried kernel by kernel, so that the error
    /// names the one that broke it.
    fn compile_all(&self, specs: &[&ProgramSpec]) -> Result<Vec<Arc<dyn Program>>> {
        let mut new: Vec<&ProgramSpec> =
            specs.iter().copied().filter(|s| !self.cache.contains(&self.inputs(&s.src))).collect();
        new.sort_by(|a, b| a.src.cmp(&b.src));
        new.dedup_by(|a, b| a.src == b.src);
        let mut names: Vec<String> = new.iter().map(|s| s.name.to_string()).collect();
        names.sort();
        names.dedup();
        let srcs: Vec<&str> = new.iter().map(|s| s.src.as_str()).collect();
        let batch = (names.len() == srcs.len() && srcs.len() > 1).then(|| self.build(&srcs).ok()).flatten();
        specs
            .iter()
            .map(|s| match &batch {
                Some(p) if srcs.contains(&s.src.as_str()) => self.load(p, s),
                _ => self.load(&self.program(&s.src)?, s),
            })
            .collect()
    }
}

/// A built kernel and its launch.
struct ClKernel {
    cl: Arc<Cl>,
    // the kernel belongs to the program, which must outlive it
    _program: Arc<ClProgram>,
    /// A kernel object holds its arguments: one launch sets and enqueues at a time.
    kernel: Mutex<Kernel>,
    /// The buffer slot of each pointer argument, in order.
    slots: Vec<usize>,
    /// How many variables' values follow the pointers.
    nvars: usize,
    /// Workgroups per dim (OpenCL's global size is workgroups times `local`).
    grid: LaunchGrid,
    local: [usize; 3],
}

impl Program for ClKernel {
    unsafe fn run(&self, bufs: &[KernelArg], vals: &[i64]) -> Result<Duration> {
        if vals.len() != self.nvars {
            return Err(Error::Device(format!("kernel reads {} variables, got {}", self.nvars, vals.len())));
        }
        let kernel = self.kernel.lock().unwrap_or_else(|e| e.into_inner());
        for (i, &slot) in self.slots.iter().enumerate() {
            let buf = bufs
                .get(slot)
                .ok_or_else(|| Error::Device(format!("kernel uses buffer slot {slot}, got {} buffers", bufs.len())))?;
            let mem: cl_mem = cl_mem_of(buf.raw)?;
            // SAFETY: argument `i` is the kernel's `i`-th `__global` pointer (the renderer declares
            // one per used slot, in slot order), and a cl_mem is what such an argument takes.
            unsafe { kernel.set_arg(i as u32, &mem) }.map_err(cl_err("kernel argument"))?;
        }
        for (i, v) in vals.iter().enumerate() {
            // SAFETY: the arguments after the pointers are the variables, each a `long`.
            unsafe { kernel.set_arg((self.slots.len() + i) as u32, v) }.map_err(cl_err("kernel argument"))?;
        }
        let groups = self.grid.at(vals);
        let global = [0, 1, 2].map(|d| groups[d] * self.local[d]);
        // SAFETY: the kernel's arguments are set; the sizes are three dims each, and the global
        // size a multiple of the local one.
        let event = self.cl.blocking("launch", |q| unsafe {
            enqueue_nd_range_kernel(
                q,
                kernel.get(),
                3,
                ptr::null(),
                global.as_ptr(),
                self.local.as_ptr(),
                0,
                ptr::null(),
            )
        })?;
        let ns = event.profiling_command_end().and_then(|end| Ok(end - event.profiling_command_start()?));
        Ok(Duration::from_nanos(ns.map_err(cl_err("profiling"))?))
    }
}
