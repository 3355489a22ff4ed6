//! JIT call sequences: a random program (the main part's generator, assignments into an input
//! included) becomes a function over its inputs, called through a `Jit` 4 to 8 times. Each
//! call's inputs are fresh values, the tensor the slot had last call, an output of the last
//! call fed back (`x = jit(x)`), or another slot's tensor (one tensor given twice); once in a
//! while an input of another shape or dtype, which lazygrad defines as an error ("inputs
//! changed") that leaves the JIT as it was. After every call, its outputs and every input (an
//! assignment writes one) equal, bit for bit, what the same function computes eagerly on copies
//! of the same inputs.

use std::sync::atomic::{AtomicUsize, Ordering};

use lazygrad::runtime::DefaultDevice;
use lazygrad::{DType, Jit, Tensor};

use super::driver;
use super::program::{build, Choices, Program};

/// CI's programs per run (each called 4 to 8 times on every device).
pub const PROGRAMS: usize = 100;

/// Choice lists that once failed, replayed first (each bug also has a named test): a function
/// returning an assignment through a slice of its input (tests/jit.rs
/// an_assignment_through_a_view_is_returned_over_the_calls_input).
pub const REGRESSIONS: &[&[u16]] = &[&[27722, 4276, 0, 16300, 0, 0, 0, 0, 0, 0, 0, 15374, 0, 0, 0, 0]];

/// Calls checked so far with an output fed back, with one tensor given for two inputs, and with
/// a changed input.
pub static FED: AtomicUsize = AtomicUsize::new(0);
pub static ALIASED: AtomicUsize = AtomicUsize::new(0);
pub static CHANGED: AtomicUsize = AtomicUsize::new(0);

/// Where a call's input comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// The slot's values rotated by this many positions (a new tensor).
    Fresh(usize),
    /// The tensor this slot had in the last call.
    Again,
    /// Output 0 of the last call.
    Fed,
    /// The tensor of an earlier slot in this call.
    Alias(usize),
    /// A tensor whose shape has an extra axis, or whose dtype differs: an error.
    Changed,
}

/// Whether slot `i` of a call is the last call's output (fed back, or an alias of that).
fn is_fed(sources: &[Source], i: usize) -> bool {
    match sources[i] {
        Source::Fed => true,
        Source::Alias(j) => sources[j] == Source::Fed,
        _ => false,
    }
}

/// The plan of one sequence: each call's source per input slot.
fn plan(p: &Program, c: &mut Choices) -> Vec<Vec<Source>> {
    let n = p.inputs.len();
    let calls = 4 + c.pick(5);
    let out = (&p.root.shape, p.root.dtype);
    let output_fits = |i: usize| p.assign.is_none() && (&p.inputs[i].shape, p.inputs[i].dtype) == out;
    let mut changed = false;
    // whether a slot's last tensor was an output: a later replay overwrites it (as tinygrad's
    // outputs, the JIT's are its buffers), so it is not given again
    let mut was_output = vec![false; n];
    (0..calls)
        .map(|call| {
            let mut sources: Vec<Source> = vec![];
            for (i, &was) in was_output.iter().enumerate() {
                let same: Vec<usize> = (0..i)
                    .filter(|&j| p.inputs[j].shape == p.inputs[i].shape && p.inputs[j].dtype == p.inputs[i].dtype)
                    .collect();
                let source = match c.pick(8) {
                    0 | 1 if call > 0 && !was => Source::Again,
                    2 | 3 if call > 0 && output_fits(i) => Source::Fed,
                    4 if !same.is_empty() => Source::Alias(same[c.pick(same.len())]),
                    5 if call > 0 && !changed && c.pick(4) == 0 => {
                        changed = true;
                        Source::Changed
                    }
                    _ => Source::Fresh(c.pick(p.inputs[i].values.len().max(1))),
                };
                sources.push(source);
            }
            if !sources.contains(&Source::Changed) {
                for (i, was) in was_output.iter_mut().enumerate() {
                    *was = match sources[i] {
                        Source::Again => *was,
                        _ => is_fed(&sources, i),
                    };
                }
            }
            sources
        })
        .collect()
}

/// The program's function over tensors: its result (or assignment) as the one output.
fn function(p: &Program) -> impl Fn(&[Tensor]) -> Vec<Tensor> + '_ {
    move |inputs: &[Tensor]| vec![super::program_over(p, inputs).0]
}

/// A fresh input for slot `i`: its values rotated by `by`.
fn fresh(p: &Program, i: usize, by: usize, device: &str) -> Tensor {
    let input = &p.inputs[i];
    let mut values = input.values.clone();
    let by = by.min(values.len());
    values.rotate_left(by);
    Tensor::from_bytes(&super::value_bytes(input.dtype, &values), &input.shape, input.dtype, device).realize()
}

/// A tensor like slot `i`'s input, but of another shape (an extra axis) or dtype.
fn changed(p: &Program, i: usize, device: &str) -> Tensor {
    let input = &p.inputs[i];
    match input.dtype {
        DType::INT32 => Tensor::zeros(&input.shape).to(device),
        dtype => Tensor::zeros(&[input.shape.clone(), vec![2]].concat()).cast(dtype).to(device),
    }
    .realize()
}

/// A copy of `t` in its own buffer.
fn copy(t: &Tensor) -> Tensor {
    Tensor::from_bytes(&t.raw_bytes().expect("a realized input"), &t.shape(), t.dtype(), t.device()).realize()
}

/// Program `p` called through a JIT as `calls` says, on `device`; `Err` at the first call that
/// differs from eager (the changed inputs' calls are not run eagerly).
fn run(p: &Program, calls: &[Vec<Source>], device: &str) -> Result<(), String> {
    let _device = DefaultDevice::scoped(device);
    let f = function(p);
    let mut jit = Jit::new(&f);
    // the inputs of the last call, and its output, for the JIT and for eager
    let (mut last, mut last_eager): (Vec<Tensor>, Vec<Tensor>) = (vec![], vec![]);
    let (mut out, mut out_eager): (Option<Tensor>, Option<Tensor>) = (None, None);
    let mut succeeded = 0;
    for (call, sources) in calls.iter().enumerate() {
        let (mut inputs, mut eager): (Vec<Tensor>, Vec<Tensor>) = (vec![], vec![]);
        for (i, &source) in sources.iter().enumerate() {
            let (jit_input, eager_input) = match source {
                Source::Fresh(by) => {
                    let t = fresh(p, i, by, device);
                    (t.clone(), copy(&t))
                }
                Source::Again => (last[i].clone(), last_eager[i].clone()),
                Source::Fed => (out.clone().expect("a last call"), out_eager.clone().expect("a last call")),
                Source::Alias(j) => (inputs[j].clone(), eager[j].clone()),
                Source::Changed => {
                    let t = changed(p, i, device);
                    (t.clone(), t)
                }
            };
            inputs.push(jit_input);
            eager.push(eager_input);
        }
        let result = jit.call(&inputs);
        if sources.contains(&Source::Changed) {
            match result {
                Err(e) if e.to_string().contains("inputs changed") => {
                    CHANGED.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                other => {
                    return Err(format!("call {call}: an input changed shape or dtype, and the JIT gave {other:?}"))
                }
            }
        }
        let got = match result {
            // a function that runs no kernel has nothing to capture (tinygrad's rule too)
            Err(e) if succeeded == 1 && e.to_string().contains("nothing to capture") => return Ok(()),
            r => r.map_err(|e| format!("call {call}: {e}"))?.remove(0),
        };
        let want = f(&eager).remove(0);
        want.try_realize().map_err(|e| format!("call {call} eagerly: {e}"))?;
        let bytes = |t: &Tensor| t.raw_bytes().map_err(|e| format!("call {call}: {e}"));
        if bytes(&got)? != bytes(&want)? {
            return Err(format!("call {call}: the JIT's output differs from eager's"));
        }
        // an input fed back from the last call is the buffer this call writes its output to
        for (i, (a, b)) in inputs.iter().zip(&eager).enumerate().filter(|&(i, _)| !is_fed(sources, i)) {
            if bytes(a)? != bytes(b)? {
                return Err(format!("call {call}: input {i} after the JIT's call differs from eager's"));
            }
        }
        let counted = |source: fn(&Source) -> bool, counter: &AtomicUsize| {
            if sources.iter().any(source) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        };
        counted(|s| *s == Source::Fed, &FED);
        counted(|s| matches!(s, Source::Alias(_)), &ALIASED);
        (last, last_eager, out, out_eager) = (inputs, eager, Some(got), Some(want));
        succeeded += 1;
    }
    Ok(())
}

/// One sequence on every device.
pub fn check(list: &[u16]) -> Result<(), String> {
    let p = build(list);
    let calls = plan(&p, &mut Choices { list, at: list.len() / 2 });
    for device in driver::devices() {
        run(&p, &calls, device).map_err(|e| format!("{device}: {e}\ncalls: {calls:?}\nprogram: {p:#?}"))?;
    }
    Ok(())
}
