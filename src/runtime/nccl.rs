//! All-reduce across the ranks of a job straight between CUDA buffers, through NCCL (feature
//! `nccl`, which brings `mpi`): where a rank all-reduces a CUDA buffer, the GPUs exchange it
//! themselves (NVLink, InfiniBand, PCIe) instead of each rank copying it to host memory for MPI.
//! MPI still starts the job and hands every rank the communicator's id. libnccl loads at run time
//! (`cudarc`'s dynamic loading, looked for first: without it the engine goes through the host).

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;
use cudarc::nccl::result as nccl;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};

use super::collective::Collective;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::uop::Ops;

fn nccl_err(what: &'static str) -> impl Fn(nccl::NcclError) -> Error {
    move |e| Error::Device(format!("NCCL {what}: {:?}", e.0))
}

/// Whether libnccl is there (without it, cudarc's first call panics).
pub(super) fn present() -> bool {
    // SAFETY: loads libnccl to look for it and unloads it again; no symbol is called.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// One device's communicator over every rank of the job.
pub(super) struct NcclRanks {
    /// NCCL calls on one communicator go one at a time.
    comm: Mutex<ncclComm_t>,
}

// SAFETY: the communicator is an opaque handle that NCCL lets any thread use, one call at a time
// (the mutex); it is destroyed once, on drop.
unsafe impl Send for NcclRanks {}
// SAFETY: as for Send: every use goes through the mutex.
unsafe impl Sync for NcclRanks {}

impl NcclRanks {
    /// The communicator of the calling device over `world`'s ranks: rank 0 draws the id, MPI
    /// broadcasts it, every rank joins. Every rank must call this at the same point (the first
    /// all-reduce over ranks of a CUDA buffer), with its CUDA context bound to the thread.
    pub(super) fn open(world: &dyn Collective) -> Result<NcclRanks> {
        let mut id = [0u8; 128];
        if world.rank() == 0 {
            let drawn = nccl::get_uniqueid().map_err(nccl_err("unique id"))?;
            id.iter_mut().zip(drawn.internal).for_each(|(b, c)| *b = c as u8);
        }
        world.broadcast(&mut id, 0)?;
        let id = ncclUniqueId { internal: id.map(|b| b as std::ffi::c_char) };
        let as_int = |n: usize| i32::try_from(n).map_err(|_| Error::Device(format!("NCCL: {n} ranks")));
        let mut comm = std::mem::MaybeUninit::uninit();
        // SAFETY: `comm` is written by NCCL before it is read (an error returns before that);
        // the id is the one every rank received.
        let comm = unsafe {
            nccl::comm_init_rank(comm.as_mut_ptr(), as_int(world.size())?, id, as_int(world.rank())?)
                .map_err(nccl_err("joining the ranks"))?;
            comm.assume_init()
        };
        Ok(NcclRanks { comm: Mutex::new(comm) })
    }

    /// `count` elements of `dtype` at `src` combined with `op` over the ranks into `dst` (the two
    /// may be one), on `stream`, waited for.
    ///
    /// # Safety
    /// `src` and `dst` are allocations of the stream's context holding `count` elements of
    /// `dtype` each.
    pub(super) unsafe fn all_reduce(
        &self,
        dst: CUdeviceptr,
        src: CUdeviceptr,
        count: usize,
        dtype: DType,
        op: Ops,
        stream: &CudaStream,
    ) -> Result<()> {
        let (kind, op) = (nccl_dtype(dtype)?, nccl_op(op)?);
        let comm = self.comm.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller vouches for the pointers and their sizes; the stream belongs to
        // their context.
        unsafe {
            let (src, dst) = (src as *const c_void, dst as *mut c_void);
            nccl::all_reduce(src, dst, count, kind, op, *comm, stream.cu_stream().cast())
                .map_err(nccl_err("all-reduce"))?;
        }
        stream.synchronize().map_err(|e| Error::Device(format!("NCCL all-reduce: {e}")))
    }
}

impl Drop for NcclRanks {
    fn drop(&mut self) {
        let comm = *self.comm.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the communicator came from comm_init_rank and is destroyed once, here.
        let _ = unsafe { nccl::comm_destroy(comm) };
    }
}

fn nccl_dtype(dtype: DType) -> Result<ncclDataType_t> {
    use ncclDataType_t::*;
    Ok(match dtype {
        DType::INT8 => ncclInt8,
        DType::UINT8 => ncclUint8,
        DType::INT32 => ncclInt32,
        DType::UINT32 => ncclUint32,
        DType::INT64 => ncclInt64,
        DType::UINT64 => ncclUint64,
        DType::FLOAT16 => ncclFloat16,
        DType::BFLOAT16 => ncclBfloat16,
        DType::FLOAT32 => ncclFloat32,
        DType::FLOAT64 => ncclFloat64,
        other => return Err(Error::Device(format!("NCCL reduces no {other:?}"))),
    })
}

fn nccl_op(op: Ops) -> Result<ncclRedOp_t> {
    Ok(match op {
        Ops::Add => ncclRedOp_t::ncclSum,
        Ops::Mul => ncclRedOp_t::ncclProd,
        Ops::Max => ncclRedOp_t::ncclMax,
        other => return Err(Error::Device(format!("NCCL: no all-reduce for {}", other.name()))),
    })
}
