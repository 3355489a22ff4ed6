//! A traced tensor function (tinygrad's `@function`) as the IR holds it: its body, traced once
//! over stand-in inputs, which every call's CALL node names by identity.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::uop::UOp;

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
#[derive(Clone)]
pub struct FunctionRef(pub Arc<TracedFunction>);

impl PartialEq for FunctionRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for FunctionRef {}
impl Hash for FunctionRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}
impl fmt::Debug for FunctionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Function#{}({})", self.0.id, self.0.name)
    }
}
