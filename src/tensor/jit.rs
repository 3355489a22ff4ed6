//! The JIT (tinygrad's TinyJit): run a function over tensors once normally, capture the kernels
//! it runs on the second call, and from the third call on replay them (`engine::jit`) on the new
//! inputs' buffers without scheduling or codegen. An input may be a bound variable
//! (`Tensor::from_var`), or a tensor of variable shape (a view of its buffer): a replay passes
//! the variables' new values to the kernels that read them. An output
//! is a buffer or a view of one (an assignment through a view returns the view, an output of
//! variable shape is read at this call's values); as in tinygrad,
//! a replay's outputs are the captured call's buffers, which the next replay writes again.

use std::sync::Arc;

use super::Tensor;
use crate::dtype::DType;
use crate::engine::capture;
use crate::engine::jit::CapturedJit;
use crate::error::{Error, Result};
use crate::helpers::debug;
use crate::runtime::Buffer;
use crate::runtime::{buffer_view, view_buffer};
use crate::schedule::{rebind, unbind, VarVals};
use crate::uop::rewrite::substitute;
use crate::uop::{BoundVar, Ops, UOp, UOpMap};

/// What a call's input must match: a tensor's shape, dtype and device, or a variable's name.
#[derive(PartialEq, Debug)]
enum Input {
    Tensor(Vec<usize>, DType, String),
    Variable(String),
}
type Signature = Vec<Input>;

/// A capture and each output it returns: the output as captured (its buffer, or a view of it:
/// an assignment through a view returns the view) and its device.
struct Captured {
    jit: CapturedJit,
    outputs: Vec<(UOp, String)>,
}

/// A function over tensors whose kernels are captured once and replayed.
pub struct Jit<F> {
    f: F,
    calls: usize,
    signature: Option<Signature>,
    captured: Option<Captured>,
}

/// An input's buffers: the one it is or views (a tensor of variable shape is a symbolic SHRINK of
/// its buffer, as tinygrad's JIT takes it), or each device's of a tensor on several devices.
fn buffers_of(t: &Tensor) -> Result<Vec<Arc<Buffer>>> {
    let u = t.uop();
    let parts = if u.op() == Ops::Multi { u.src().to_vec() } else { vec![u] };
    let buffer = |p: &UOp| {
        view_buffer(p)
            .or_else(|| buffer_under(p).and_then(|b| Buffer::of(&b)))
            .ok_or_else(|| Error::shape("JIT", &[&t.shape()], "an input that is not a realized buffer"))
    };
    parts.iter().map(buffer).collect()
}

/// The BUFFER nodes an output is stored in: the one under it, or one per device under each
/// shard of a tensor on several devices; `None` for an output not stored so.
fn buffers_under(u: &UOp) -> Option<Vec<UOp>> {
    match u.op() {
        Ops::Multi => u.src().iter().map(buffer_under).collect(),
        _ => buffer_under(u).map(|b| vec![b]),
    }
}

/// The BUFFER node under `u` when `u` is one or a view of one (RESHAPE, PERMUTE, SHRINK, FLIP,
/// PAD: an assignment through a view returns the view, an output of variable shape is a
/// symbolic SHRINK of its buffer).
fn buffer_under(u: &UOp) -> Option<UOp> {
    let mut u = u.clone();
    while matches!(u.op(), Ops::Reshape | Ops::Permute | Ops::Shrink | Ops::Flip | Ops::Pad) {
        u = u.src()[0].clone();
    }
    (u.op() == Ops::Buffer).then_some(u)
}

impl<F: FnMut(&[Tensor]) -> Vec<Tensor>> Jit<F> {
    pub fn new(f: F) -> Jit<F> {
        Jit { f, calls: 0, signature: None, captured: None }
    }

    /// Call the function (or replay it). Inputs are realized first; every call must pass the
    /// same shapes, dtypes and devices.
    pub fn call(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let vars: Vec<BoundVar> = inputs.iter().filter_map(Tensor::as_var).collect();
        let tensors: Vec<Tensor> = inputs.iter().filter(|t| t.as_var().is_none()).cloned().collect();
        Tensor::realize_all(&tensors)?;
        let sig: Signature = inputs
            .iter()
            .map(|t| match t.as_var() {
                Some(v) => Input::Variable(v.variable().name().to_string()),
                None => Input::Tensor(t.shape(), t.dtype(), t.device().to_string()),
            })
            .collect();
        match &self.signature {
            None => self.signature = Some(sig),
            Some(first) if *first != sig => {
                return Err(Error::value("JIT", format!("inputs changed from {first:?} to {sig:?}")));
            }
            _ => {}
        }
        let in_bufs: Vec<Arc<Buffer>> = tensors.iter().map(buffers_of).collect::<Result<Vec<_>>>()?.concat();
        let mut vals: VarVals = vars.iter().map(|v| (v.variable().name().to_string(), v.value() as i64)).collect();
        // and the variables a tensor input's shape is bound to
        let binds = tensors.iter().flat_map(|t| t.uop().toposort()).filter_map(|u| BoundVar::from_uop(&u));
        vals.extend(binds.map(|v| (v.variable().name().to_string(), v.value() as i64)));
        // a call counts once it succeeded: after an error or a panic (in the function, or in the
        // capture) the next call runs the same stage again
        let out = self.run(self.calls + 1, inputs, &in_bufs, &vals)?;
        self.calls += 1;
        Ok(out)
    }

    fn run(&mut self, call: usize, inputs: &[Tensor], in_bufs: &[Arc<Buffer>], vals: &VarVals) -> Result<Vec<Tensor>> {
        match call {
            1 => {
                let _viz = crate::viz::group(|| "JIT first call".into());
                let out = (self.f)(inputs);
                Tensor::realize_all(&out)?;
                Ok(out)
            }
            2 => {
                let _viz = crate::viz::group(|| "JIT capture".into());
                let (out, items) = capture(|| {
                    let out = (self.f)(inputs);
                    Tensor::realize_all(&out).map(|_| out)
                });
                let out = out?;
                if items.is_empty() {
                    return Err(Error::value("JIT", "the function ran no kernels, nothing to capture"));
                }
                let out_nodes = out
                    .iter()
                    .map(|t| {
                        buffers_under(&t.uop()).ok_or_else(|| {
                            Error::shape("JIT", &[&t.shape()], "an output that is no realized buffer or view of one")
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let out_bufs: Vec<Arc<Buffer>> =
                    out_nodes.concat().iter().map(|b| Buffer::of(b).expect("a BUFFER node has its buffer")).collect();
                let jit = CapturedJit::new(items, in_bufs, &out_bufs);
                if debug() >= 1 {
                    eprintln!("JIT call 2: captured {} kernels with {} inputs", jit.len(), inputs.len());
                }
                let outputs = out.iter().map(|t| (t.uop(), t.device().to_string())).collect();
                self.captured = Some(Captured { jit, outputs });
                Ok(out)
            }
            _ => {
                let cap = self.captured.as_ref().ok_or_else(|| Error::value("JIT", "nothing was captured"))?;
                if !cap.jit.replays(in_bufs) {
                    // one tensor given for two inputs where the capture had two, or the reverse:
                    // the function itself says what that computes
                    if debug() >= 1 {
                        eprintln!(
                            "JIT call {call}: inputs share memory unlike the captured call's; running it eagerly"
                        );
                    }
                    let out = (self.f)(inputs);
                    Tensor::realize_all(&out)?;
                    return Ok(out);
                }
                let (out_bufs, seconds) = cap.jit.replay(in_bufs, vals)?;
                if debug() >= 1 {
                    eprintln!("JIT call {call}: replayed {} kernels in {:.2} ms", cap.jit.len(), seconds * 1e3);
                }
                // each output over the buffers the replay wrote it to (an input's, for an
                // assignment into an input), its variable sizes bound to this call's values
                let mut out_bufs = out_bufs.into_iter();
                let over = |captured: &UOp, bufs: &mut dyn Iterator<Item = Arc<Buffer>>| {
                    let nodes = buffers_under(captured).expect("checked at capture");
                    let mut map: UOpMap<UOp> =
                        nodes.into_iter().zip(bufs).map(|(n, b)| (n, buffer_view(&b, &[b.size()]))).collect();
                    let (unbound, mut bindings) = unbind(&[substitute(captured, &mut map, "JIT output")]);
                    bindings.extend(vals.iter().map(|(name, &value)| (name.clone(), value)));
                    rebind(&unbound[0], &bindings)
                };
                Ok(cap.outputs.iter().map(|(u, dev)| Tensor::from_uop(over(u, &mut out_bufs), dev)).collect())
            }
        }
    }
}
