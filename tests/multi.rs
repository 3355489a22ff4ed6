//! Tensors on several devices: sharding, ops per shard, all-reduce, autograd and training over
//! `CPU:0..3` (each CPU:n its own device), checked against the same program on one device.

#[path = "multi/ops.rs"]
mod ops;
#[path = "multi/sweep.rs"]
mod sweep;
#[path = "multi/train.rs"]
mod train;
