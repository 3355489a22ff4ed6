//! A traced tensor function (tinygrad's `@function`) as the IR holds it: its body, traced once
//! over stand-in inputs, which every call's CALL node names by identity.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use super::uop::{Identified, Shared, UOp};

/// A function's graph over stand-ins for its inputs (unallocated BUFFER nodes), and its
/// backward graph once autograd has traced it.
pub struct TracedFunction {
    pub name: String,
    /// The stand-in BUFFER of each input.
    pub params: Vec<UOp>,
    pub body: UOp,
    /// The stand-in for the gradient arriving at the body (a BUFFER of the body's size).
    pub grad_in: UOp,
    /// Each input's gradient as a graph over `params` and `grad_in` (`None`: the body does not
    /// depend on it), traced on the first backward through a call.
    pub backward: OnceLock<Vec<Option<UOp>>>,
    id: u64,
}

impl TracedFunction {
    pub fn new(name: &str, params: Vec<UOp>, body: UOp, grad_in: UOp) -> TracedFunction {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        TracedFunction { name: name.into(), params, body, grad_in, backward: OnceLock::new(), id }
    }
}

/// A traced function shared by its calls, compared and hashed by identity (the key of every
/// CALL of it).
pub type FunctionRef = Shared<TracedFunction>;

impl Identified for TracedFunction {
    fn id(&self) -> u64 {
        self.id
    }
    fn describe(&self) -> String {
        format!("Function#{}({})", self.id, self.name)
    }
}
