//! Devices: buffers, allocation, compilers and program launch.

pub mod cpu;
pub mod device;
pub mod interp;
pub mod pool;

pub use device::{
    canonical_device, default_device, get_device, Allocator, Buffer, Compiler, DefaultDevice, Device, Program,
    RawBuffer,
};
