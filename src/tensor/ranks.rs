//! Many processes: a tensor combined over every process (rank) of the job, through the job's
//! collective (`runtime/collective.rs`: MPI under `mpirun`, else the one process alone).

use super::Tensor;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::uop::{Arg, Ops, UOp};

impl Tensor {
    /// This tensor combined with `op` (ADD, MUL or MAX) over every process of the job, the result
    /// on each: data-parallel training across processes sums its gradients so. Every rank must
    /// build the same graph. Alone, the tensor's values as they are.
    pub fn all_reduce_ranks(&self, op: Ops) -> Tensor {
        self.try_all_reduce_ranks(op).or_panic()
    }
    /// `all_reduce_ranks`, reporting an op that is not ADD, MUL or MAX as an error.
    pub fn try_all_reduce_ranks(&self, op: Ops) -> Result<Tensor> {
        ensure(matches!(op, Ops::Add | Ops::Mul | Ops::Max), || {
            Error::value("all_reduce_ranks", format!("{} is not ADD, MUL or MAX", op.name()))
        })?;
        let u = self.uop();
        Ok(self.lift(UOp::new(Ops::AllReduce, u.dtype(), vec![u], Arg::Reduce(op))))
    }
}
