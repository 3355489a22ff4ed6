//! Collectives across the processes of one job (its ranks), for training over many machines:
//! what the ranks do together, and the job of one process. `job::world()` picks the job's.

use crate::dtype::DType;
use crate::error::Result;
use crate::uop::Ops;

/// What the ranks of a job do together. Every rank calls each operation in the same order.
pub trait Collective: Send + Sync {
    /// This process's number in the job, `0..size()`.
    fn rank(&self) -> usize;
    /// How many processes the job has.
    fn size(&self) -> usize;
    /// `data` (elements of `dtype`) combined with `op` (ADD, MUL or MAX) over every rank, the
    /// result in `data` on each.
    fn all_reduce(&self, data: &mut [u8], dtype: DType, op: Ops) -> Result<()>;
    /// Every rank's `data` (each as long), in rank order.
    fn all_gather(&self, data: &[u8]) -> Result<Vec<u8>>;
    /// `data` as rank `root` has it, on every rank.
    fn broadcast(&self, data: &mut [u8], root: usize) -> Result<()>;
    /// Wait until every rank has come here.
    fn barrier(&self) -> Result<()>;
}

/// A job of one process: every collective is the identity.
pub struct Alone;

impl Collective for Alone {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_reduce(&self, _: &mut [u8], _: DType, _: Ops) -> Result<()> {
        Ok(())
    }
    fn all_gather(&self, data: &[u8]) -> Result<Vec<u8>> {
        Ok(data.to_vec())
    }
    fn broadcast(&self, _: &mut [u8], _: usize) -> Result<()> {
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
}
