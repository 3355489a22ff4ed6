//! Neural-network support: layers, optimizers (`optim`), model state and safetensors (`state`), data sets.

pub mod datasets;
pub mod gguf;
pub mod layers;
pub mod optim;
pub mod quantized;
pub mod state;
