//! Tensors on several devices (tinygrad's `shard`): one graph per device under a MULTI, split
//! along an axis or replicated. Every op works on them as on one device; `schedule/multi.rs`
//! lowers the graph to per-device kernels, all-reducing where a reduce crosses the shards.

use super::movement::resolve_axis;
use super::Tensor;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::runtime::{canonical_device, device_list};
use crate::schedule::{multi, multi_axis};
use crate::uop::Ops;

impl Tensor {
    /// tinygrad's `shard`: this tensor split along `axis` into equal parts, part `i` on
    /// `devices[i]` (each device holding all of it when `axis` is `None`). The result lives on the
    /// tuple of devices (`device()` names them joined by commas); ops on it run on each device.
    pub fn shard(&self, devices: &[&str], axis: Option<isize>) -> Tensor {
        self.try_shard(devices, axis).or_panic()
    }
    /// `shard`, reporting no devices, a device named twice, a tensor already on several devices,
    /// a bad axis or one that does not split evenly as an error.
    pub fn try_shard(&self, devices: &[&str], axis: Option<isize>) -> Result<Tensor> {
        let devices: Vec<String> = devices.iter().map(|d| canonical_device(d)).collect();
        let named = || Error::Devices { op: "shard", devices: devices.clone() };
        ensure(!devices.is_empty() && devices.iter().all(|d| !d.contains(',')), named)?;
        ensure((1..devices.len()).all(|i| !devices[..i].contains(&devices[i])), named)?;
        ensure(!self.device().contains(','), || {
            Error::value("shard", format!("the tensor is on several devices already ({})", self.device()))
        })?;
        let shape = self.shape();
        let axis = axis.map(|a| resolve_axis("shard", a, shape.len(), &shape)).transpose()?;
        let n = devices.len();
        let parts: Vec<Tensor> = match axis {
            None => vec![self.clone(); n],
            Some(a) => {
                ensure(shape[a].is_multiple_of(n), || {
                    Error::shape("shard", &[&shape], format!("axis {a} does not split evenly over {n} devices"))
                })?;
                (0..n).map(|i| self.shard_part(a, i, n)).collect()
            }
        };
        let shards = parts.iter().zip(&devices).map(|(p, d)| p.to(d).uop()).collect();
        Ok(Tensor::from_uop(multi(shards, axis), &devices.join(",")))
    }
    /// `shard` in place (tinygrad's `shard_`): this tensor, and its gradient, move to the tuple of
    /// devices; returns it.
    pub fn shard_(&self, devices: &[&str], axis: Option<isize>) -> Tensor {
        self.try_shard_(devices, axis).or_panic()
    }
    /// `shard_`, with `try_shard`'s errors.
    pub fn try_shard_(&self, devices: &[&str], axis: Option<isize>) -> Result<Tensor> {
        let grad = self.grad().map(|g| g.try_shard(devices, axis)).transpose()?;
        Ok(self.become_(&self.try_shard(devices, axis)?, |_| grad.clone().expect("a gradient to move")))
    }
    /// Part `i` of `n` equal parts along `axis` (which splits evenly): what shard `i` holds.
    pub(crate) fn shard_part(&self, axis: usize, i: usize, n: usize) -> Tensor {
        let shape = self.shape();
        let size = shape[axis] / n;
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        bounds[axis] = (i * size, (i + 1) * size);
        self.shrink(&bounds)
    }
    /// The devices this tensor lives on: one, or the tuple a sharded tensor spans.
    pub fn devices(&self) -> Vec<String> {
        device_list(self.device()).into_iter().map(String::from).collect()
    }
    /// The axis a tensor on several devices is split along (`None`: each device holds all of it,
    /// or it lives on one device), as its graph stands now.
    pub fn shard_axis(&self) -> Option<usize> {
        let u = self.uop();
        match u.op() {
            Ops::Multi => multi_axis(&u),
            _ => crate::schedule::lower_multi(&[u]).ok().and_then(|l| multi_axis(&l[0])),
        }
    }
}
