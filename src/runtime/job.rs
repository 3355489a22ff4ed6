//! The job this process belongs to: MPI's world when `mpirun` started it and the program was
//! built with the `mpi` feature, else this one process alone. No transport of our own: where MPI
//! is, it carries.

use std::sync::OnceLock;

use super::collective::{Alone, Collective};
use crate::error::{Error, Result};

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
