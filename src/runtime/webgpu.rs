//! The WebGPU device (`WEBGPU`, `WEBGPU:1`, ...) through `wgpu`: WGSL kernels (validated by naga
//! first, so a malformed one is a compile error naming the line) as compute pipelines over
//! storage buffers, on whichever native API wgpu finds at run time: Vulkan (Linux, Windows),
//! Metal (macOS), DX12 (Windows). So one code path reaches every GPU vendor, and Mesa's lavapipe
//! (Vulkan on the CPU) tests it on a machine without a GPU.
//!
//! The device asks for its adapter's own limits rather than WebGPU's defaults, binds buffers
//! through explicit bind-group layouts (an automatic one drops bindings a shader never reads),
//! caches pipelines by source, and times kernels with timestamp queries where the adapter has
//! them. Every wgpu call that can fail runs inside error scopes, so a failure is an error value,
//! never wgpu's default panic.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::allocator::{Allocator, LruAllocator, RawBuffer};
use super::device::{Device, KernelArg, Program};
use crate::error::{Error, Result};
use crate::uop::{DTypeSupport, Language, LaunchGrid, ProgramSpec, Target, Workgroups};

/// The process's wgpu instance over the platform's native APIs.
fn instance() -> &'static wgpu::Instance {
    static INSTANCE: OnceLock<wgpu::Instance> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::PRIMARY,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        })
    })
}

/// The adapters wgpu finds, real GPUs first (discrete, integrated, virtual, other), software
/// ones such as lavapipe last: `WEBGPU:n` is the n-th.
fn adapters() -> Vec<wgpu::Adapter> {
    let mut all = pollster::block_on(instance().enumerate_adapters(wgpu::Backends::PRIMARY));
    let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    all.sort_by_key(rank);
    all
}

/// Whether WEBGPU is worth being the default device: its first adapter is a real GPU (lavapipe,
/// Vulkan on the CPU, only when asked for). On Linux a GPU has a device node, so a machine
/// without one is passed over without loading the Vulkan driver.
pub fn has_gpu() -> std::result::Result<(), String> {
    if cfg!(target_os = "linux") {
        let nodes = std::fs::read_dir("/dev/dri").into_iter().flatten().flatten();
        let render = nodes.into_iter().any(|e| e.file_name().to_string_lossy().starts_with("renderD"));
        if !render && !std::path::Path::new("/dev/nvidia0").exists() {
            return Err("no GPU device node (/dev/dri/renderD*, /dev/nvidia0)".into());
        }
    }
    let first = adapters().into_iter().next().ok_or("no WebGPU adapter")?.get_info();
    match first.device_type {
        wgpu::DeviceType::Cpu => Err(format!("{} is not a GPU", first.name)),
        _ => Ok(()),
    }
}

/// Open WebGPU adapter number `ordinal` (real GPUs first) as a device.
pub fn open(ordinal: usize) -> Result<Arc<dyn Device>> {
    let all = adapters();
    let count = all.len();
    let adapter = all.into_iter().nth(ordinal).ok_or_else(|| match count {
        0 => Error::Device("no WebGPU adapter (no Vulkan, Metal or DX12 driver found)".into()),
        n => Error::Device(format!("WebGPU has {n} adapters, no adapter {ordinal}")),
    })?;
    Ok(Arc::new(WebGpuDevice::new(&adapter)?))
}

/// What codegen may assume about a WebGPU device with `limits`, computing in `f16` when `half`.
fn target(limits: &wgpu::Limits, half: bool) -> Target {
    Target {
        name: "WEBGPU",
        language: Language::Wgsl,
        vector_bytes: 0,
        register_bytes: 4,
        threads: 1,
        workgroups: Some(Workgroups {
            max_threads: limits.max_compute_invocations_per_workgroup as usize,
            max_local: [
                limits.max_compute_workgroup_size_x,
                limits.max_compute_workgroup_size_y,
                limits.max_compute_workgroup_size_z,
            ]
            .map(|n| n as usize),
            max_groups: [limits.max_compute_workgroups_per_dimension as usize; 3],
            local_bytes: limits.max_compute_workgroup_storage_size as usize,
            simd_threads: true,
        }),
        gpu: true,
        dtypes: DTypeSupport { half, bfloat16: false, float64: false, int64: false },
        tensor_cores: vec![],
        max_buffers: Some(limits.max_storage_buffers_per_shader_stage as usize),
    }
}

/// Any WebGPU device as WebGPU guarantees it (its default limits, no `f16`): the target WGSL is
/// rendered for where no adapter is asked (`WGSL_CHECK`).
pub fn baseline_target() -> Target {
    target(&wgpu::Limits::default(), false)
}

/// Parse and validate WGSL `src` as naga does for wgpu, with only WebGPU's baseline capabilities
/// (and `f16` where `half`): a malformed kernel is `Error::Compile` with naga's report.
pub fn validate(src: &str, half: bool) -> Result<()> {
    let module = naga::front::wgsl::parse_str(src)
        .map_err(|e| Error::Compile(format!("WGSL parse error:\n{}\n--- source ---\n{src}", e.emit_to_string(src))))?;
    // packing float16 into u32 words is core WGSL, which naga lists as a capability
    let capabilities = match half {
        true => naga::valid::Capabilities::SHADER_FLOAT16 | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
        false => naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    };
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities).validate(&module).map_err(|e| {
        Error::Compile(format!("WGSL validation error:\n{}\n--- source ---\n{src}", e.emit_to_string(src)))
    })?;
    Ok(())
}

/// What wgpu says went wrong, with its cause.
fn describe(e: &wgpu::Error) -> String {
    match e {
        wgpu::Error::Validation { description, .. } | wgpu::Error::Internal { description, .. } => description.clone(),
        wgpu::Error::OutOfMemory { source } => format!("out of memory: {source}"),
    }
}

/// One opened adapter: its device and queue, and what it offers.
struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: wgpu::Limits,
    /// Timestamp queries, their resolve buffer and a buffer to read them back, where the
    /// adapter has them (one launch at a time uses them).
    timer: Option<Mutex<Timer>>,
    /// Nanoseconds per timestamp tick.
    period: f64,
    /// Errors wgpu raised outside every scope (kept, reported by the next check).
    stray: Arc<Mutex<Vec<String>>>,
}

struct Timer {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
}

impl Gpu {
    /// Run `f` inside validation, out-of-memory and internal error scopes; an error any of
    /// them caught (or one raised outside every scope meanwhile) is `Error::Device` naming `what`.
    fn checked<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T> {
        let scopes = [wgpu::ErrorFilter::Internal, wgpu::ErrorFilter::OutOfMemory, wgpu::ErrorFilter::Validation]
            .map(|filter| self.device.push_error_scope(filter));
        let out = f();
        let mut errors: Vec<String> = vec![];
        for scope in scopes.into_iter().rev() {
            errors.extend(pollster::block_on(scope.pop()).map(|e| describe(&e)));
        }
        errors.extend(self.stray.lock().unwrap_or_else(|e| e.into_inner()).drain(..));
        match errors.is_empty() {
            true => Ok(out),
            false => Err(Error::Device(format!("WebGPU {what}: {}", errors.join("; ")))),
        }
    }

    /// Wait until the queue has run everything submitted so far.
    fn wait(&self, what: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(drop)
            .map_err(|e| Error::Device(format!("WebGPU {what}: {e}")))
    }

    /// The bytes `range` of `buffer` (a multiple of 4 long, at a multiple of 4), copied into a
    /// mappable buffer and read back.
    fn read(&self, buffer: &wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>> {
        let staging = self.checked("read", || {
            let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: len,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = self.device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, len);
            self.queue.submit([encoder.finish()]);
            staging
        })?;
        self.map_read(&staging)
    }

    /// The contents of `staging` (MAP_READ), once the queue has filled it.
    fn map_read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        let (done, mapped) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| drop(done.send(r)));
        // whichever thread polls the device runs the callback: wait for it, polling meanwhile
        let outcome = loop {
            self.wait("read")?;
            match mapped.recv_timeout(Duration::from_millis(1)) {
                Ok(outcome) => break outcome,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(e) => return Err(Error::Device(format!("WebGPU lost a buffer it was mapping: {e}"))),
            }
        };
        outcome.map_err(|e| Error::Device(format!("WebGPU cannot map a buffer to read it: {e}")))?;
        let bytes = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Device(format!("WebGPU cannot read a mapped buffer: {e}")))?
            .to_vec();
        staging.unmap();
        Ok(bytes)
    }
}

/// A block of device memory, or part of one: the buffer, the byte offset and the length asked
/// for (bindings and copies round it up to 4 bytes, which the block always holds).
struct GpuMemory {
    buffer: Arc<wgpu::Buffer>,
    offset: u64,
    bytes: u64,
}

impl RawBuffer for GpuMemory {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn memory_of(raw: &dyn RawBuffer) -> Result<&GpuMemory> {
    raw.as_any()
        .downcast_ref::<GpuMemory>()
        .ok_or_else(|| Error::Device("a buffer of another device where WebGPU memory was expected".into()))
}

/// `n` rounded up to a multiple of 4 (WebGPU copies and bindings move whole 32-bit words).
fn words(n: u64) -> u64 {
    n.div_ceil(4) * 4
}

/// Storage buffers that copies go in and out of.
struct WebGpuAllocator {
    gpu: Arc<Gpu>,
}

impl Allocator for WebGpuAllocator {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let size = words(bytes.max(4) as u64);
        if size > self.gpu.limits.max_buffer_size {
            return Err(Error::Device(format!(
                "WebGPU cannot allocate {bytes} bytes: the adapter's largest buffer is {} bytes",
                self.gpu.limits.max_buffer_size
            )));
        }
        // wgpu zeroes new buffers
        let buffer = self.gpu.checked(&format!("allocation of {bytes} bytes"), || {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        Ok(Box::new(GpuMemory { buffer: Arc::new(buffer), offset: 0, bytes: bytes as u64 }))
    }
    fn view(&self, base: &dyn RawBuffer, offset: usize, bytes: usize) -> Result<Box<dyn RawBuffer>> {
        let base = memory_of(base)?;
        Ok(Box::new(GpuMemory {
            buffer: base.buffer.clone(),
            offset: base.offset + offset as u64,
            bytes: bytes as u64,
        }))
    }
    fn view_alignment(&self) -> usize {
        self.gpu.limits.min_storage_buffer_offset_alignment as usize
    }
    fn copyin(&self, dst: &dyn RawBuffer, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let dst = memory_of(dst)?;
        // the bytes past `src` up to a whole word are the block's padding (views start on
        // aligned offsets, so no other buffer's bytes lie there)
        let mut padded = src.to_vec();
        padded.resize(words(src.len() as u64) as usize, 0);
        self.gpu.checked("copy in", || self.gpu.queue.write_buffer(&dst.buffer, dst.offset, &padded))
    }
    fn copyout(&self, src: &dyn RawBuffer, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let src = memory_of(src)?;
        let bytes = self.gpu.read(&src.buffer, src.offset, words(dst.len() as u64))?;
        dst.copy_from_slice(&bytes[..dst.len()]);
        Ok(())
    }
}

/// One WebGPU adapter as a device.
pub struct WebGpuDevice {
    gpu: Arc<Gpu>,
    target: Target,
    allocator: LruAllocator<WebGpuAllocator>,
    /// Compiled pipelines by source.
    pipelines: Mutex<HashMap<String, Arc<Pipeline>>>,
}

/// A kernel's compute pipeline and the layout of its bindings.
struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

impl WebGpuDevice {
    fn new(adapter: &wgpu::Adapter) -> Result<WebGpuDevice> {
        let info = adapter.get_info();
        let offered = adapter.features();
        let wanted = wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY;
        let features = offered & wanted;
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("lazygrad"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::Device(format!("WebGPU cannot open {} ({:?}): {e}", info.name, info.backend)))?;
        let stray: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = stray.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(describe(&e))
        }));
        let timer = features.contains(wgpu::Features::TIMESTAMP_QUERY).then(|| {
            let buffer = |usage| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: 16,
                    usage,
                    mapped_at_creation: false,
                })
            };
            Mutex::new(Timer {
                queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: None,
                    ty: wgpu::QueryType::Timestamp,
                    count: 2,
                }),
                resolved: buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
                readback: buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            })
        });
        let period = queue.get_timestamp_period() as f64;
        let target = target(&limits, features.contains(wgpu::Features::SHADER_F16));
        let gpu = Arc::new(Gpu { device, queue, limits, timer, period, stray });
        if crate::helpers::debug() >= 1 {
            eprintln!("WEBGPU adapter: {} ({:?}, {})", info.name, info.backend, info.driver_info);
        }
        Ok(WebGpuDevice {
            allocator: LruAllocator::new(WebGpuAllocator { gpu: gpu.clone() }, 1 << 30),
            gpu,
            target,
            pipelines: Mutex::default(),
        })
    }

    /// The pipeline of WGSL `src` with entry point `name` binding `buffers` storage buffers and,
    /// with `vars`, a uniform after them: cached, else validated and built.
    fn pipeline(&self, src: &str, name: &str, buffers: usize, vars: bool) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).get(src) {
            return Ok(p.clone());
        }
        let storage = self.gpu.limits.max_storage_buffers_per_shader_stage as usize;
        if buffers > storage {
            return Err(Error::Compile(format!(
                "kernel {name} binds {buffers} buffers; the WebGPU adapter allows {storage}"
            )));
        }
        validate(src, self.target.dtypes.half)?;
        let entry = |binding: usize, ty| wgpu::BindGroupLayoutEntry {
            binding: binding as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        };
        // every buffer read-write: a buffer bound twice (an in-place update) must not be bound
        // both read-only and writable
        let mut entries: Vec<_> =
            (0..buffers).map(|i| entry(i, wgpu::BufferBindingType::Storage { read_only: false })).collect();
        if vars {
            entries.push(entry(buffers, wgpu::BufferBindingType::Uniform));
        }
        let device = &self.gpu.device;
        let pipeline = self.gpu.checked(&format!("pipeline of {name}"), || {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(name),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
            let layout =
                device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(name),
                compilation_options: Default::default(),
                cache: None,
            });
            Pipeline { pipeline, layout }
        })?;
        let pipeline = Arc::new(pipeline);
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).insert(src.to_string(), pipeline.clone());
        Ok(pipeline)
    }
}

impl Device for WebGpuDevice {
    fn name(&self) -> &str {
        "WEBGPU"
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn target(&self) -> Target {
        self.target.clone()
    }
    fn times_kernels(&self) -> bool {
        self.gpu.timer.is_some()
    }
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        let start = Instant::now();
        let (slots, nvars) = (spec.param_slots(), spec.vars().len());
        let name = spec.name.to_string();
        let pipeline = self.pipeline(&spec.src, &name, slots.len(), nvars > 0)?;
        if crate::helpers::debug() >= 3 {
            eprintln!("built {} in {:.2} ms", spec.name.for_debug(), start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(Arc::new(WebGpuKernel { gpu: self.gpu.clone(), pipeline, name, slots, nvars, grid: spec.grid() }))
    }
}

/// A built kernel and its launch.
struct WebGpuKernel {
    gpu: Arc<Gpu>,
    pipeline: Arc<Pipeline>,
    name: String,
    /// The buffer slot of each storage binding, in order.
    slots: Vec<usize>,
    /// How many variables the uniform after them holds.
    nvars: usize,
    grid: LaunchGrid,
}

impl WebGpuKernel {
    /// The uniform buffer holding the variables' values as `i32`s.
    fn uniform(&self, vals: &[i64]) -> Result<wgpu::Buffer> {
        let mut bytes = vec![];
        for v in vals {
            let v = i32::try_from(*v).map_err(|_| {
                Error::Device(format!("kernel {}: variable value {v} does not fit WGSL's i32", self.name))
            })?;
            bytes.extend(v.to_le_bytes());
        }
        bytes.resize(bytes.len().div_ceil(16) * 16, 0);
        self.gpu.checked("variables", || {
            let buffer = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes.len() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.gpu.queue.write_buffer(&buffer, 0, &bytes);
            buffer
        })
    }
}

impl Program for WebGpuKernel {
    unsafe fn run(&self, bufs: &[KernelArg], vals: &[i64]) -> Result<Duration> {
        if vals.len() != self.nvars {
            return Err(Error::Device(format!("kernel reads {} variables, got {}", self.nvars, vals.len())));
        }
        let groups = self.grid.at(vals);
        let most = self.gpu.limits.max_compute_workgroups_per_dimension as usize;
        if groups.iter().any(|g| *g > most) {
            return Err(Error::Device(format!(
                "kernel {} launches {groups:?} workgroups; the WebGPU adapter allows {most} per dim",
                self.name
            )));
        }
        let mut memory = vec![];
        for &slot in &self.slots {
            let buf = bufs
                .get(slot)
                .ok_or_else(|| Error::Device(format!("kernel uses buffer slot {slot}, got {} buffers", bufs.len())))?;
            memory.push(memory_of(buf.raw)?);
        }
        let uniform = (self.nvars > 0).then(|| self.uniform(vals)).transpose()?;
        let timer = self.gpu.timer.as_ref().map(|t| t.lock().unwrap_or_else(|e| e.into_inner()));
        let start = Instant::now();
        self.gpu.checked(&format!("launch of {}", self.name), || {
            let mut entries: Vec<wgpu::BindGroupEntry> = memory
                .iter()
                .enumerate()
                .map(|(i, m)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &m.buffer,
                        offset: m.offset,
                        size: NonZeroU64::new(words(m.bytes.max(4))),
                    }),
                })
                .collect();
            if let Some(u) = &uniform {
                entries.push(wgpu::BindGroupEntry { binding: memory.len() as u32, resource: u.as_entire_binding() });
            }
            let device = &self.gpu.device;
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &self.pipeline.layout,
                entries: &entries,
            });
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let timestamp_writes = timer.as_ref().map(|t| wgpu::ComputePassTimestampWrites {
                    query_set: &t.queries,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                });
                let mut pass =
                    encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
                pass.set_pipeline(&self.pipeline.pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.dispatch_workgroups(groups[0] as u32, groups[1] as u32, groups[2] as u32);
            }
            if let Some(t) = &timer {
                encoder.resolve_query_set(&t.queries, 0..2, &t.resolved, 0);
                encoder.copy_buffer_to_buffer(&t.resolved, 0, &t.readback, 0, 16);
            }
            self.gpu.queue.submit([encoder.finish()]);
        })?;
        let Some(t) = &timer else {
            self.gpu.wait("launch")?;
            return Ok(start.elapsed());
        };
        let stamps = self.gpu.map_read(&t.readback)?;
        let tick = |i: usize| u64::from_le_bytes(stamps[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Ok(Duration::from_nanos((tick(1).saturating_sub(tick(0)) as f64 * self.gpu.period) as u64))
    }
}
