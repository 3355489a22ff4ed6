//! Neural-network support: optimizers.

pub mod optim;
