//! What a backend implements: a compiler, the programs it launches and the device itself.

use std::sync::Arc;
use std::time::Duration;

use super::allocator::{host_block, Allocator, RawBuffer};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::uop::{Ops, ProgramSpec, Target};

/// Turns rendered source into the bytes a device loads (a shared object, a program binary),
/// kept in the verified artifact cache (`helpers/cache.rs`).
pub trait Compiler: Send + Sync {
    fn compile(&self, src: &str) -> Result<Vec<u8>>;
}

/// A buffer as a kernel launch sees it: its device memory and its length in bytes.
#[derive(Clone, Copy)]
pub struct KernelArg<'a> {
    pub raw: &'a dyn RawBuffer,
    pub bytes: usize,
}

impl KernelArg<'_> {
    /// The address of the argument's host memory (CPU and INTERP), which is checked to hold its
    /// `bytes`: a launch never reads or writes past a block it was given.
    pub fn host_ptr(&self) -> Result<*mut u8> {
        let block = host_block(self.raw)?;
        match self.bytes <= block.len() {
            true => Ok(block.ptr()),
            false => Err(Error::Size { op: "a kernel argument", bytes: self.bytes, capacity: block.len() }),
        }
    }
}

/// A compiled kernel, ready to launch on its device.
pub trait Program: Send + Sync {
    /// Run over `bufs` (in PARAM order) with `vals` the values of the kernel's variables (in
    /// `variable::kernel_vars` order) and return the time it took.
    ///
    /// # Safety
    /// The kernel's source is arbitrary code: the caller vouches that it touches only its
    /// arguments' memory and that each argument holds every byte the kernel reaches through it
    /// at these values (`CompiledKernel::launch` checks this for kernels made from an AST).
    unsafe fn run(&self, bufs: &[KernelArg], vals: &[i64]) -> Result<Duration>;
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
    /// `src`'s `count` elements of `dtype` combined with `op` over the job's ranks into `dst`,
    /// both this device's memory, where the backend has a collective of its own (NCCL for CUDA);
    /// `None` where it has not (the buffer then goes through host memory and the job's MPI).
    fn all_reduce_ranks(
        &self,
        _dst: &dyn RawBuffer,
        _src: &dyn RawBuffer,
        _count: usize,
        _dtype: DType,
        _op: Ops,
    ) -> Option<Result<()>> {
        None
    }
}
