//! The job's collectives over MPI (the `mpi` crate over the system's Open MPI): one rank per
//! process, started by `mpirun -np N` (`-H host1,host2` across machines).

use std::sync::Mutex;

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Equivalence;

use super::collective::Collective;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::uop::Ops;

/// MPI's world communicator, used by one thread at a time, and the library kept initialized
/// until the process ends (finalized at exit).
pub struct MpiWorld {
    world: Mutex<Handles>,
    rank: usize,
    size: usize,
}

struct Handles {
    world: SimpleCommunicator,
    /// Finalizes MPI when dropped, which a process-wide world never is: `finalize_at_exit` does.
    _universe: mpi::environment::Universe,
}

// SAFETY: MPI is initialized for serialized use from any thread (`Threading::Serialized`, checked
// in `open`), and every call goes through the mutex, so no two threads are ever inside MPI at
// once; the handles are plain identifiers MPI hands out, valid on any thread.
unsafe impl Send for Handles {}

impl MpiWorld {
    /// Initialize MPI (once per process) and take its world.
    pub fn open() -> std::result::Result<MpiWorld, String> {
        let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or("MPI was initialized already, or could not be")?;
        if threading < mpi::Threading::Serialized {
            return Err(format!("MPI offers {threading:?} threading, lazygrad needs Serialized"));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        extern "C" {
            fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
        }
        // SAFETY: `atexit` takes any `extern "C" fn()` and calls it once at normal exit.
        if unsafe { atexit(finalize_at_exit) } != 0 {
            return Err("cannot register MPI's finalization at exit".into());
        }
        // a panic ends the job as an error does
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            crate::helpers::FAILING.store(true, std::sync::atomic::Ordering::Relaxed);
            previous(info)
        }));
        Ok(MpiWorld { world: Mutex::new(Handles { world, _universe: universe }), rank, size })
    }
    fn with<R>(&self, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        f(&self.world.lock().unwrap_or_else(|e| e.into_inner()).world)
    }
}

/// End MPI as the process exits: finalized after success, and after an error (`FAILING`) the
/// whole job aborted, so that the other ranks stop with an error instead of waiting in a
/// collective for this one forever.
extern "C" fn finalize_at_exit() {
    if mpi::environment::is_finalized() {
        return;
    }
    // SAFETY: MPI was initialized (this is registered after it was) and is not finalized yet; at
    // exit no other thread of lazygrad's is inside MPI (calls hold the world's lock and return
    // before the program does), and the world communicator is MPI's own constant.
    unsafe {
        if crate::helpers::FAILING.load(std::sync::atomic::Ordering::Relaxed) {
            mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 1);
        }
        mpi::ffi::MPI_Finalize();
    }
}

/// `data` as elements of `T`, combined over the ranks with `op`, written back.
fn reduce_as<T: Element + Equivalence + Default>(world: &SimpleCommunicator, data: &mut [u8], op: Ops) -> Result<()> {
    let send: Vec<T> = data.chunks_exact(T::DTYPE.itemsize()).map(T::read_le).collect();
    let mut recv = vec![T::default(); send.len()];
    let op = match op {
        Ops::Add => SystemOperation::sum(),
        Ops::Mul => SystemOperation::product(),
        Ops::Max => SystemOperation::max(),
        other => return Err(Error::value("all_reduce", format!("{} is no reduce op", other.name()))),
    };
    world.all_reduce_into(&send[..], &mut recv[..], op);
    let mut out = Vec::with_capacity(data.len());
    recv.into_iter().for_each(|v| v.write_le(&mut out));
    data.copy_from_slice(&out);
    Ok(())
}

impl Collective for MpiWorld {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn all_reduce(&self, data: &mut [u8], dtype: DType, op: Ops) -> Result<()> {
        self.with(|w| match dtype {
            DType::FLOAT32 => reduce_as::<f32>(w, data, op),
            DType::FLOAT64 => reduce_as::<f64>(w, data, op),
            DType::INT32 => reduce_as::<i32>(w, data, op),
            DType::INT64 => reduce_as::<i64>(w, data, op),
            DType::UINT32 => reduce_as::<u32>(w, data, op),
            DType::UINT64 => reduce_as::<u64>(w, data, op),
            other => Err(Error::DTypes {
                op: "all_reduce",
                dtypes: vec![other],
                reason: "MPI reduces 32- and 64-bit numbers here (cast first)".into(),
            }),
        })
    }
    fn all_gather(&self, data: &[u8]) -> Result<Vec<u8>> {
        let mut out = vec![0u8; data.len() * self.size];
        self.with(|w| w.all_gather_into(data, &mut out[..]));
        Ok(out)
    }
    fn broadcast(&self, data: &mut [u8], root: usize) -> Result<()> {
        if root >= self.size {
            return Err(Error::value("broadcast", format!("root {root} of {} ranks", self.size)));
        }
        self.with(|w| w.process_at_rank(root as i32).broadcast_into(data));
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.with(|w| w.barrier());
        Ok(())
    }
}
