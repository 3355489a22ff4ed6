//! Collectives across the processes of one job (its ranks), for training over many machines: the
//! job's world is MPI's when the program was started by `mpirun` and built with the `mpi`
//! feature, else this one process alone. No transport of our own: where MPI is, it carries.

use std::sync::OnceLock;

use crate::dtype::DType;
use crate::error::{Error, Result};
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
struct Alone;

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

/// Whether a launcher started this process as one rank of several (Open MPI's and MPICH's
/// variables).
fn launched_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"].iter().any(|v| std::env::var(v).is_ok_and(|n| n != "1"))
}

/// The job this process belongs to: MPI's world when `mpirun` started it (with the `mpi` feature;
/// without it such a start is an error rather than ranks that silently train apart), else one
/// process alone.
pub fn world() -> Result<&'static dyn Collective> {
    static WORLD: OnceLock<std::result::Result<Box<dyn Collective>, String>> = OnceLock::new();
    let world = WORLD.get_or_init(|| match launched_by_mpirun() {
        false => Ok(Box::new(Alone)),
        true => open_mpi(),
    });
    match world {
        Ok(w) => Ok(w.as_ref()),
        Err(why) => Err(Error::Device(why.clone())),
    }
}

#[cfg(feature = "mpi")]
fn open_mpi() -> std::result::Result<Box<dyn Collective>, String> {
    super::mpi::MpiWorld::open().map(|w| Box::new(w) as Box<dyn Collective>)
}

#[cfg(not(feature = "mpi"))]
fn open_mpi() -> std::result::Result<Box<dyn Collective>, String> {
    Err("started by mpirun, but this build has no MPI (build with `--features mpi`)".into())
}
