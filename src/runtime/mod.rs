//! Devices: buffers, allocation, compilers and program launch, what a device lets codegen assume
//! (`Target`), and the programs it runs (`ProgramSpec`).

pub mod allocator;
pub mod buffer;
pub mod collective;
pub mod cpu;
pub mod cuda;
pub mod device;
pub mod interp;
pub mod job;
pub mod metal;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
mod nccl;
pub mod opencl;
pub mod pool;
pub mod registry;
pub mod webgpu;

pub use allocator::{Allocator, AllocatorStats, LruAllocator, RawBuffer};
pub use buffer::{buffer_view, view_buffer, Buffer};
pub use device::{Compiler, Device, KernelArg, Program};
pub use registry::{
    canonical_device, default_device, default_devices, device_list, get_device, intern_device, DefaultDevice,
};
