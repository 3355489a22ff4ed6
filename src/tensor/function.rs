//! `Function`: a closure over tensors traced once into a graph (tinygrad's `@function`).
//!
//! Each call is one CALL node named by the function (`Arg::Function`), whose value is the body
//! with the call's inputs in place of the stand-ins it was traced over. Scheduling inlines it, so
//! its kernels fuse with what surrounds it; autograd differentiates it as a unit: the body's
//! backward is traced once, on the first gradient through any call, and every call's gradients
//! are that graph over its own inputs. With `own_kernels` the call's inputs and output are
//! stored, so every call runs the same kernels of its own.

use std::sync::Arc;

use super::Tensor;
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::runtime::Buffer;
use crate::runtime::{buffer_view, view_buffer};
use crate::uop::function::TracedFunction;
use crate::uop::{substitute, Arg, Ops, Shared, UOp, UOpMap};

/// A traced tensor function; see the module doc.
pub struct Function {
    traced: Arc<TracedFunction>,
    inputs: Vec<(Vec<usize>, DType)>,
    own_kernels: bool,
}

/// A stand-in BUFFER of `numel` elements: never allocated, only substituted.
fn stand_in(device: &str, numel: usize, dtype: DType) -> UOp {
    UOp::new(Ops::Buffer, dtype, vec![], Buffer::arg(&Arc::new(Buffer::new(device, numel, dtype))))
}

impl Function {
    /// Trace `f` once over inputs shaped, typed and placed like `examples`.
    pub fn new(name: &str, examples: &[&Tensor], f: impl FnOnce(&[Tensor]) -> Tensor) -> Function {
        let params: Vec<UOp> = examples.iter().map(|t| stand_in(t.device(), t.numel(), t.dtype())).collect();
        let args: Vec<Tensor> = params
            .iter()
            .zip(examples)
            .map(|(p, t)| {
                Tensor::from_uop(buffer_view(&Buffer::of(p).expect("a stand-in is a BUFFER"), &t.shape()), t.device())
            })
            .collect();
        let out = f(&args);
        let grad_in = stand_in(out.device(), out.numel(), out.dtype().to_float());
        let inputs = examples.iter().map(|t| (t.shape(), t.dtype())).collect();
        Function { traced: Arc::new(TracedFunction::new(name, params, out.uop(), grad_in)), inputs, own_kernels: false }
    }

    /// Store each call's inputs and output: the body runs as kernels of its own, the same
    /// kernels for every call, instead of fusing into its surroundings.
    pub fn own_kernels(mut self) -> Function {
        self.own_kernels = true;
        self
    }

    /// The function of `inputs` (lazily); panics, naming the function, if they differ in number,
    /// shape or dtype from the examples it was traced with.
    pub fn call(&self, inputs: &[&Tensor]) -> Tensor {
        self.try_call(inputs).or_panic()
    }
    /// `call`, reporting inputs that differ from the traced examples as an error.
    pub fn try_call(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        let got: Vec<(Vec<usize>, DType)> = inputs.iter().map(|t| (t.shape(), t.dtype())).collect();
        ensure(got == self.inputs, || {
            Error::value(
                "function",
                format!("{} called with inputs {got:?}, traced with {:?}", self.traced.name, self.inputs),
            )
        })?;
        // stored inputs: a buffer already is one
        let stored = |t: &Tensor| view_buffer(&t.uop()).is_some() || !self.own_kernels;
        let inputs: Vec<Tensor> =
            inputs.iter().map(|t| if stored(t) { (*t).clone() } else { t.contiguous() }).collect();
        let uops: Vec<UOp> = inputs.iter().map(Tensor::uop).collect();
        let value = bind_stand_ins(&self.traced.body, &self.traced.params, &uops, None);
        let src = std::iter::once(value).chain(uops).collect();
        let call = UOp::new(Ops::Call, self.traced.body.dtype(), src, Arg::Function(Shared(self.traced.clone())));
        let out = Tensor::from_uop(call, inputs.first().map_or(&crate::runtime::default_device(), |t| t.device()));
        Ok(if self.own_kernels { out.contiguous() } else { out })
    }
}

/// `graph` with each of the stand-ins `params` replaced by the value in `values` (and the
/// gradient's stand-in by `grad`, given as `(stand-in, value)`).
pub(super) fn bind_stand_ins(graph: &UOp, params: &[UOp], values: &[UOp], grad: Option<(&UOp, &UOp)>) -> UOp {
    let flat = |v: &UOp, like: &UOp| match v.sh() == like.sh() {
        true => v.clone(),
        false => UOp::new(Ops::Reshape, v.dtype(), vec![v.clone()], Arg::Shape(like.sh().to_vec())),
    };
    let mut map: UOpMap<UOp> = params.iter().zip(values).map(|(p, v)| (p.clone(), flat(v, p))).collect();
    if let Some((stand_in, g)) = grad {
        map.insert(stand_in.clone(), flat(g, stand_in));
    }
    substitute(graph, &mut map, "bind function inputs")
}
