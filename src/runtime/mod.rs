//! Devices: buffers, allocation, compilers and program launch, what a device lets codegen assume
//! (`Target`), and the programs it runs (`ProgramSpec`).

pub mod allocator;
pub mod cpu;
pub mod cuda;
pub mod device;
pub mod interp;
pub mod metal;
pub mod opencl;
pub mod pool;
pub mod webgpu;

pub use device::{
    canonical_device, default_device, get_device, Allocator, AllocatorStats, Buffer, Compiler, DefaultDevice, Device,
    LruAllocator, Program, RawBuffer,
};
