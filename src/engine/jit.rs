//! The JIT (tinygrad's TinyJit): run a function once normally, capture the kernels it runs on
//! the second call, and from the third call on replay them on the new inputs' buffers without
//! scheduling or codegen. An input may be a bound variable (`Tensor::from_var`): a replay passes
//! its new value to the kernels that read it.

use std::collections::HashSet;
use std::sync::Arc;

use super::realize::{capture, ExecItem, Runner};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::debug;
use crate::runtime::Buffer;
use crate::schedule::memory::{plan_memory, replace_planned, Step};
use crate::schedule::{buffer_view, view_buffer, VarVals};
use crate::tensor::Tensor;
use crate::uop::BoundVar;

/// Where a captured kernel's buffer comes from on replay.
enum Slot {
    /// The buffer of the call's `i`-th input.
    Input(usize),
    /// A buffer the captured call allocated or used (weights, intermediates, outputs).
    Fixed(Arc<Buffer>),
}

struct Captured {
    items: Vec<(ExecItem, Vec<Slot>)>,
    outputs: Vec<(Slot, Vec<usize>, String)>,
}

/// What a call's input must match: a tensor's shape, dtype and device, or a variable's name.
#[derive(PartialEq, Debug)]
enum Input {
    Tensor(Vec<usize>, DType, String),
    Variable(String),
}
type Signature = Vec<Input>;

/// A function over tensors whose kernels are captured once and replayed.
pub struct Jit<F> {
    f: F,
    calls: usize,
    signature: Option<Signature>,
    captured: Option<Captured>,
}

fn buffer_of(t: &Tensor) -> Result<Arc<Buffer>> {
    view_buffer(&t.uop())
        .cloned()
        .ok_or_else(|| Error::Invalid(format!("JIT: input of shape {:?} is not a realized buffer", t.shape())))
}

/// The captured items with their intermediate buffers (not inputs or outputs, nothing held
/// outside the capture) sharing memory where their lifetimes allow (`schedule::memory`).
fn plan_items(mut items: Vec<ExecItem>, keep: &HashSet<u64>) -> Vec<ExecItem> {
    let plan = {
        let steps: Vec<Step> = items
            .iter()
            .map(|e| Step {
                bufs: e.bufs.iter().collect(),
                reads_output: matches!(&e.runner, Runner::Kernel(k) if k.reads_output),
            })
            .collect();
        plan_memory(&steps, keep, "JIT ")
    };
    items.iter_mut().for_each(|e| replace_planned(&mut e.bufs, &plan));
    items
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
                return Err(Error::Invalid(format!("JIT: inputs changed from {first:?} to {sig:?}")));
            }
            _ => {}
        }
        let in_bufs = tensors.iter().map(buffer_of).collect::<Result<Vec<_>>>()?;
        let vals: VarVals = vars.iter().map(|v| (v.variable().name().to_string(), v.value() as i64)).collect();
        let result = self.run(inputs, &in_bufs, &vals);
        if result.is_err() && self.captured.is_none() {
            // the first call or the capture failed: the next call runs it again
            self.calls -= 1;
        }
        result
    }

    fn run(&mut self, inputs: &[Tensor], in_bufs: &[Arc<Buffer>], vals: &VarVals) -> Result<Vec<Tensor>> {
        self.calls += 1;
        match self.calls {
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
                    return Err(Error::Invalid("JIT: the function ran no kernels, nothing to capture".into()));
                }
                let out_bufs = out.iter().map(buffer_of).collect::<Result<Vec<_>>>()?;
                let keep = in_bufs.iter().chain(&out_bufs).map(|b| b.id()).collect();
                let items = plan_items(items, &keep);
                let slot = |b: &Arc<Buffer>| match in_bufs.iter().position(|i| Arc::ptr_eq(i, b)) {
                    Some(i) => Slot::Input(i),
                    None => Slot::Fixed(b.clone()),
                };
                let items =
                    items.into_iter().map(|e| (e.bufs.iter().map(slot).collect(), e)).map(|(s, e)| (e, s)).collect();
                let outputs =
                    out.iter().zip(&out_bufs).map(|(t, b)| (slot(b), t.shape(), t.device().to_string())).collect();
                let captured = Captured { items, outputs };
                if debug() >= 1 {
                    eprintln!("JIT call 2: captured {} kernels with {} inputs", captured.items.len(), inputs.len());
                }
                self.captured = Some(captured);
                Ok(out)
            }
            _ => {
                let cap = self.captured.as_ref().ok_or_else(|| Error::Invalid("JIT: nothing was captured".into()))?;
                let resolve = |s: &Slot| match s {
                    Slot::Input(i) => in_bufs[*i].clone(),
                    Slot::Fixed(b) => b.clone(),
                };
                let mut seconds = 0.0;
                for (item, slots) in &cap.items {
                    // a variable not among the inputs keeps the value it was captured with
                    let vals = match &item.runner {
                        Runner::Kernel(k) => {
                            k.vars.iter().zip(&item.vals).map(|(n, &v)| vals.get(n).copied().unwrap_or(v)).collect()
                        }
                        Runner::Copy => vec![],
                    };
                    let bufs = slots.iter().map(resolve).collect();
                    seconds += ExecItem { runner: item.runner.clone(), bufs, vals }.run()?;
                }
                if debug() >= 1 {
                    eprintln!(
                        "JIT call {}: replayed {} kernels in {:.2} ms",
                        self.calls,
                        cap.items.len(),
                        seconds * 1e3
                    );
                }
                Ok(cap
                    .outputs
                    .iter()
                    .map(|(s, shape, dev)| Tensor::from_uop(buffer_view(&resolve(s), shape), dev))
                    .collect())
            }
        }
    }
}
