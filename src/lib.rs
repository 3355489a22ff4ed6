//! lazygrad: tinygrad's design in Rust.
//!
//! A lazy [`Tensor`] builds a graph of hash-consed [`UOp`]s. `realize()` schedules the graph into
//! kernels, generates source for the device, compiles it at run time and runs it. See
//! `DESIGN.md` for the map of the layers.

pub mod codegen;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod helpers;
pub mod models;
pub mod nn;
pub mod renderer;
pub mod runtime;
pub mod schedule;
pub mod tensor;
pub mod uop;
pub mod viz;

pub use dtype::DType;
pub use error::{Error, Result};
pub use helpers::{Context, GlobalCounters};
pub use tensor::Jit;
pub use tensor::Tensor;

pub use uop::{BoundVar, Ops, Sint, UOp, Variable};

/// mimalloc serves every allocation of a program linked with lazygrad: graphs, schedules and
/// launches are many small short-lived allocations. A program that sets its own global
/// allocator builds lazygrad with `default-features = false`.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
