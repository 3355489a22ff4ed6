//! Assignment through random views: a chain of shrinks, flips, pads, numpy indexing (steps,
//! negative bounds, integer indices, new axes), permutes, reshapes and expands of a realized
//! tensor is assigned a value, fresh or read from the view itself, and the whole tensor is
//! compared with a host model that moves each element's flat position through the same chain.
//! A view that shows padding, or repeats an element (an expand), has no memory to write: the
//! assignment must refuse (a panic at `assign` for an expand, an error at the realize for
//! padding) and leave the tensor as it was.

use std::sync::atomic::{AtomicUsize, Ordering};

use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::Idx;
use lazygrad::{DType, Tensor};

use super::common::{Array, Values};
use super::driver;
use super::host::Host;
use super::program::{factors, numel, Choices};

/// CI's programs per run.
pub const PROGRAMS: usize = 150;

/// Choice lists that once failed, replayed first (each bug also has a named test): an empty
/// view through padding (tests/edges.rs assigning_through_a_view_of_no_elements_writes_nothing).
pub const REGRESSIONS: &[&[u16]] =
    &[&[0, 47880, 1573, 0, 0, 7418, 13489, 0, 32803, 26408, 30464, 8143, 15434, 5217, 0, 205]];

/// Cases checked so far whose view the host says can be written, and that must refuse.
pub static WRITTEN: AtomicUsize = AtomicUsize::new(0);
pub static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// One step of a view chain.
#[derive(Clone, Debug)]
enum Step {
    Shrink(Vec<(usize, usize)>),
    Flip(Vec<usize>),
    Pad(Vec<(usize, usize)>),
    Index(Vec<Idx>),
    Permute(Vec<usize>),
    Reshape(Vec<usize>),
    Expand(Vec<usize>),
}

/// What is assigned: fresh values, or the view's own values reversed on every axis plus one (the
/// value reads the memory the assignment writes).
#[derive(Debug)]
enum Value {
    Fresh(Vec<i64>),
    OwnReversed,
}

/// A target tensor, the chain viewing it and the value assigned through it.
#[derive(Debug)]
struct Case {
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<i64>,
    steps: Vec<Step>,
    value: Value,
}

const DTYPES: [DType; 5] = [DType::FLOAT32, DType::INT32, DType::UINT8, DType::FLOAT16, DType::INT64];
const DIMS: [usize; 6] = [1, 2, 3, 4, 5, 7];

/// Python's `range(start, stop, step)` after `slice(start, stop, step).indices(n)`: the
/// positions a slice visits.
fn python_slice(start: Option<isize>, stop: Option<isize>, step: isize, n: usize) -> Vec<usize> {
    let n = n as isize;
    let (lower, upper) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let clamp = |v: isize| if v < 0 { (v + n).max(lower) } else { v.min(upper) };
    let mut at = start.map_or(if step > 0 { lower } else { upper }, clamp);
    let stop = stop.map_or(if step > 0 { upper } else { lower }, clamp);
    let mut out = vec![];
    while (step > 0 && at < stop) || (step < 0 && at > stop) {
        out.push(at as usize);
        at += step;
    }
    out
}

/// `positions` (flat positions of the target, -1 for padding) moved through one step.
fn host_step(positions: &Host, step: &Step) -> Host {
    match step {
        Step::Shrink(bounds) => positions.shrink(bounds),
        Step::Flip(axes) => positions.flip(axes),
        Step::Pad(pads) => positions.pad(pads, -1.0),
        Step::Permute(perm) => positions.permute(perm),
        Step::Reshape(shape) => positions.reshape(shape),
        Step::Expand(shape) => positions.broadcast(shape),
        Step::Index(idx) => {
            // each output axis: a source axis and the positions it visits, or a new axis
            let mut axes: Vec<Option<(usize, Vec<usize>)>> = vec![];
            let mut fixed = vec![0; positions.shape.len()];
            let mut dim = 0;
            for i in idx {
                match *i {
                    Idx::NewAxis => axes.push(None),
                    Idx::I(k) => {
                        let n = positions.shape[dim] as isize;
                        fixed[dim] = if k < 0 { k + n } else { k } as usize;
                        dim += 1;
                    }
                    Idx::R(start, stop, step) => {
                        axes.push(Some((dim, python_slice(start, stop, step, positions.shape[dim]))));
                        dim += 1;
                    }
                    _ => unreachable!("the cases index with ranges, integers and new axes"),
                }
            }
            let shape: Vec<usize> = axes.iter().map(|a| a.as_ref().map_or(1, |(_, v)| v.len())).collect();
            Host::from_fn(&shape, |out| {
                let mut src = fixed.clone();
                for (a, &o) in axes.iter().zip(out) {
                    if let Some((d, visits)) = a {
                        src[*d] = visits[o];
                    }
                }
                positions.at(&src)
            })
        }
    }
}

/// A random step for a view of `positions`, or `None` where the drawn kind does not apply.
fn draw_step(c: &mut Choices, positions: &Host) -> Option<Step> {
    let shape = &positions.shape;
    let rank = shape.len();
    let step = match c.pick(13) {
        0 | 1 => {
            // half of the shrinks cut the view down to where it is not padding
            let real: Vec<(usize, usize)> = (0..rank)
                .map(|a| {
                    let mut lo_hi = (usize::MAX, 0);
                    for (i, &p) in positions.values.iter().enumerate() {
                        if p >= 0.0 {
                            let at = super::host::unravel(i, shape)[a];
                            lo_hi = (lo_hi.0.min(at), lo_hi.1.max(at + 1));
                        }
                    }
                    lo_hi
                })
                .collect();
            let bounds = shape
                .iter()
                .zip(&real)
                .map(|(&d, &(lo, hi))| match c.pick(2) == 0 && lo < hi {
                    true => (lo, hi),
                    false => {
                        let start = c.pick(d + 1);
                        (start, start + c.pick(d - start + 1))
                    }
                })
                .collect();
            Step::Shrink(bounds)
        }
        2 | 3 => Step::Flip((0..rank).filter(|_| c.pick(2) == 1).collect()),
        4 => Step::Pad(shape.iter().map(|_| (c.pick(3), c.pick(3))).collect()),
        5..=7 => {
            let mut idx: Vec<Idx> = shape
                .iter()
                .map(|&d| {
                    let n = d as isize;
                    let bound = |c: &mut Choices| match c.pick(4) {
                        0 => None,
                        _ => Some(c.pick(2 * d + 3) as isize - n - 1),
                    };
                    match c.pick(6) {
                        0 if d > 0 => Idx::I(c.pick(2 * d) as isize - n),
                        1 => Idx::R(None, None, 1),
                        _ => {
                            let (start, stop) = (bound(c), bound(c));
                            Idx::R(start, stop, [1, 2, 3, -1, -2, -3][c.pick(6)])
                        }
                    }
                })
                .collect();
            if c.pick(4) == 0 {
                idx.insert(c.pick(rank + 1), Idx::NewAxis);
            }
            Step::Index(idx)
        }
        8 | 9 => {
            let mut rest: Vec<usize> = (0..rank).collect();
            Step::Permute((0..rank).map(|_| rest.remove(c.pick(rest.len()))).collect())
        }
        10 | 11 => {
            let n = numel(shape);
            if n == 0 {
                return None;
            }
            let mut dims = vec![1; 1 + c.pick(3)];
            for p in factors(n) {
                let at = c.pick(dims.len());
                dims[at] *= p;
            }
            Step::Reshape(dims)
        }
        _ => {
            let ones: Vec<usize> = (0..rank).filter(|&a| shape[a] == 1).collect();
            if ones.is_empty() {
                return None;
            }
            let mut to = shape.clone();
            to[ones[c.pick(ones.len())]] = 2 + c.pick(2);
            Step::Expand(to)
        }
    };
    Some(step)
}

/// The case `list` describes.
fn build(list: &[u16]) -> Case {
    let mut c = Choices { list, at: 0 };
    let dtype = DTYPES[c.pick(DTYPES.len())];
    let shape: Vec<usize> = (0..1 + c.pick(3)).map(|_| DIMS[c.pick(DIMS.len())]).collect();
    let top = if dtype.is_unsigned() { 10 } else { 20 };
    let data: Vec<i64> = (0..numel(&shape)).map(|_| c.pick(top) as i64 - if top == 20 { 10 } else { 0 }).collect();
    let mut positions = Host { shape: shape.clone(), values: (0..numel(&shape)).map(|i| i as f64).collect() };
    let mut steps = vec![];
    for _ in 0..1 + c.pick(4) {
        if let Some(step) = draw_step(&mut c, &positions) {
            positions = host_step(&positions, &step);
            steps.push(step);
        }
    }
    let value = match c.pick(3) {
        0 => Value::OwnReversed,
        _ => Value::Fresh((0..numel(&positions.shape)).map(|_| 100 + c.pick(50) as i64).collect()),
    };
    Case { dtype, shape, data, steps, value }
}

/// The tensor's values as f64 (every dtype of the cases holds them exactly).
fn read(t: &Tensor) -> Vec<f64> {
    match Array::from_tensor(t).values() {
        Values::Float(v) => v,
        Values::Int(v) => v.into_iter().map(|x| x as f64).collect(),
        Values::Bool(v) => v.into_iter().map(|x| x as u8 as f64).collect(),
    }
}

/// The target after the assignment, or where the view cannot be written, a word its refusal
/// must name.
fn host_result(case: &Case) -> Result<Vec<f64>, &'static str> {
    let mut positions = Host { shape: case.shape.clone(), values: (0..case.data.len()).map(|i| i as f64).collect() };
    for step in &case.steps {
        positions = host_step(&positions, step);
    }
    if case.steps.iter().any(|s| matches!(s, Step::Expand(_))) {
        return Err("expands");
    }
    if positions.values.iter().any(|&p| p < 0.0) {
        return Err("padding");
    }
    let values: Vec<f64> = match &case.value {
        Value::Fresh(v) => v.iter().map(|&x| x as f64).collect(),
        Value::OwnReversed => {
            let own = Host { shape: positions.shape.clone(), values: positions.values.clone() };
            let all: Vec<usize> = (0..own.shape.len()).collect();
            own.flip(&all).values.iter().map(|&p| case.data[p as usize] as f64 + 1.0).collect()
        }
    };
    let mut out: Vec<f64> = case.data.iter().map(|&x| x as f64).collect();
    for (p, v) in positions.values.iter().zip(values) {
        out[*p as usize] = v;
    }
    Ok(out)
}

/// Run the case on `device`: the target's values after the assignment, or the refusal's message.
fn run(case: &Case, device: &str) -> Result<Vec<f64>, String> {
    let _device = DefaultDevice::scoped(device);
    let target =
        Tensor::from_bytes(&super::value_bytes(case.dtype, &case.data), &case.shape, case.dtype, device).realize();
    let mut view = target.clone();
    for step in &case.steps {
        view = match step {
            Step::Shrink(bounds) => view.shrink(bounds),
            Step::Flip(axes) => view.flip(&axes.iter().map(|&a| a as isize).collect::<Vec<_>>()),
            Step::Pad(pads) => view.pad(pads),
            Step::Index(idx) => view.index(idx),
            Step::Permute(perm) => view.permute(&perm.iter().map(|&a| a as isize).collect::<Vec<_>>()),
            Step::Reshape(shape) => view.reshape(shape),
            Step::Expand(shape) => view.expand(shape),
        };
    }
    let value = match &case.value {
        Value::Fresh(v) => Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), &view.shape()),
        Value::OwnReversed => (&view.flip(&(0..view.ndim() as isize).collect::<Vec<_>>()) + 1.0).cast(case.dtype),
    };
    let refusal = match driver::caught(|| view.assign(&value)) {
        Err(panic) => Some(panic),
        Ok(assigned) => assigned.try_realize().err().map(|e| e.to_string()),
    };
    match refusal {
        Some(message) => Err(format!("{message}; the target holds {:?}", read(&target))),
        None => Ok(read(&target)),
    }
}

/// One case on every device: written as the host says, or refused with the target unchanged.
pub fn check(list: &[u16]) -> Result<(), String> {
    let case = build(list);
    let want = host_result(&case);
    match want {
        Ok(_) => WRITTEN.fetch_add(1, Ordering::Relaxed),
        Err(_) => REFUSED.fetch_add(1, Ordering::Relaxed),
    };
    let original: Vec<f64> = case.data.iter().map(|&x| x as f64).collect();
    for device in driver::devices() {
        match (run(&case, device), &want) {
            (Ok(got), Ok(want)) if got == *want => {}
            (Err(refusal), Err(word))
                if refusal.contains(word) && refusal.ends_with(&format!("the target holds {original:?}")) => {}
            (got, want) => return Err(format!("{device}: got {got:?}, the host says {want:?}\n{case:?}")),
        }
    }
    Ok(())
}
