//! Variables bound at their extremes: a realized matrix is cut to a variable number of columns
//! (`shrink_sym`, a Variable with a range from 0 or 1 to the width), then goes through random
//! elementwise ops (with itself, and with a broadcast column), reductions over the variable axis
//! and another, new axes of size 1, permutes, and shrinks and flips of the other axes. Each
//! program runs with the variable bound at its minimum, its maximum and between, and equals,
//! value for value, the same program at the concrete width, run directly and replayed by a JIT
//! that takes the variable as an input; a max over an axis bound to 0 must refuse as the
//! concrete max over an empty axis does.

use lazygrad::runtime::DefaultDevice;
use lazygrad::{Jit, Sint, Tensor, Variable};

use super::driver;
use super::program::Choices;

/// CI's programs per run (each at three bindings, and through a JIT at each twice).
pub const PROGRAMS: usize = 60;

#[derive(Clone, Copy, Debug)]
enum Step {
    Neg,
    Relu,
    /// `x * x`.
    Square,
    /// `maximum(x, -x)`.
    MaxOfNegation,
    /// `x + column`, a concrete tensor with size 1 on the variable axis.
    AddColumn,
    SumVariable(bool),
    MaxVariable(bool),
    SumOther,
    /// A new leading axis of size 1.
    UnitAxis,
    /// The axes reversed.
    Permute,
    ShrinkOther(usize),
    FlipOther,
}

#[derive(Debug)]
struct Case {
    rows: usize,
    cols: usize,
    min: usize,
    data: Vec<f32>,
    steps: Vec<Step>,
}

/// The case `list` describes.
fn build(list: &[u16]) -> Case {
    let mut c = Choices { list, at: 0 };
    let (rows, cols) = (1 + c.pick(4), 1 + c.pick(6));
    let min = c.pick(2).min(cols);
    let data = (0..rows * cols).map(|_| c.pick(9) as f32 - 4.0).collect();
    // the shape as the steps go: each axis' size, the variable one as None
    let mut shape: Vec<Option<usize>> = vec![Some(rows), None];
    let mut steps = vec![];
    for _ in 0..1 + c.pick(4) {
        let var = shape.iter().position(Option::is_none);
        let other = shape.iter().position(Option::is_some);
        let step = match c.pick(12) {
            0 => Step::Neg,
            1 => Step::Relu,
            2 => Step::Square,
            3 => Step::MaxOfNegation,
            4 if var.is_some() => Step::AddColumn,
            5 if var.is_some() => Step::SumVariable(c.pick(2) == 0),
            6 if var.is_some() => Step::MaxVariable(c.pick(2) == 0),
            7 if other.is_some() => Step::SumOther,
            8 if shape.len() >= 2 => Step::Permute,
            11 if shape.len() < 3 => Step::UnitAxis,
            9 if other.is_some() => Step::ShrinkOther(c.pick(shape[other.unwrap()].unwrap() + 1)),
            10 if other.is_some() => Step::FlipOther,
            _ => continue,
        };
        match step {
            Step::SumVariable(keep) | Step::MaxVariable(keep) => match keep {
                true => shape[var.unwrap()] = Some(1),
                false => drop(shape.remove(var.unwrap())),
            },
            Step::SumOther => drop(shape.remove(other.unwrap())),
            Step::Permute => shape.reverse(),
            Step::UnitAxis => shape.insert(0, Some(1)),
            Step::ShrinkOther(end) => shape[other.unwrap()] = Some(end),
            _ => {}
        }
        steps.push(step);
    }
    Case { rows, cols, min, data, steps }
}

/// The case's program with `width` columns (a bound variable, or a number).
fn program(case: &Case, base: &Tensor, width: Sint) -> Tensor {
    let mut x = base.shrink_sym(&[(Sint::Int(0), Sint::Int(case.rows)), (Sint::Int(0), width)]);
    // the variable axis, while there is one, and the concrete one
    let mut var: Option<usize> = Some(1);
    for step in &case.steps {
        let other = (0..x.ndim()).find(|&a| Some(a) != var);
        x = match *step {
            Step::Neg => x.neg(),
            Step::Relu => x.relu(),
            Step::Square => &x * &x,
            Step::MaxOfNegation => x.maximum(x.neg()),
            Step::AddColumn => {
                let mut shape = x.shape();
                shape[var.expect("a variable axis")] = 1;
                let n = shape.iter().product::<usize>();
                &x + Tensor::from_vec((0..n).map(|i| i as f32 * 0.5).collect(), &shape)
            }
            Step::SumVariable(keep) | Step::MaxVariable(keep) => {
                let axis = var.expect("a variable axis") as isize;
                let reduced = match step {
                    Step::SumVariable(_) => x.sum(axis, keep),
                    _ => x.max(axis, keep),
                };
                var = None;
                reduced
            }
            Step::SumOther => {
                let axis = other.expect("a concrete axis");
                var = var.map(|v| if v > axis { v - 1 } else { v });
                x.sum(axis as isize, false)
            }
            Step::Permute => {
                let last = x.ndim() - 1;
                var = var.map(|v| last - v);
                x.permute(&(0..=last as isize).rev().collect::<Vec<_>>())
            }
            Step::UnitAxis => {
                var = var.map(|v| v + 1);
                x.unsqueeze(0)
            }
            Step::ShrinkOther(end) => {
                let bounds: Vec<(Sint, Sint)> = x
                    .dims()
                    .iter()
                    .enumerate()
                    .map(|(a, d)| match Some(a) == other {
                        true => (Sint::Int(0), Sint::Int(end)),
                        false => (Sint::Int(0), d.clone()),
                    })
                    .collect();
                x.shrink_sym(&bounds)
            }
            Step::FlipOther => x.flip(&[other.expect("a concrete axis") as isize]),
        };
    }
    x
}

/// One case at each binding on every device: the symbolic program equals the concrete one, run
/// directly and replayed by a JIT that takes the variable as an input.
pub fn check(list: &[u16]) -> Result<(), String> {
    let case = build(list);
    let n = Variable::new("cols", case.min, case.cols);
    for device in driver::devices() {
        let _device = DefaultDevice::scoped(device);
        let base = Tensor::from_slice(&case.data, &[case.rows, case.cols]).realize();
        let mut jit = Jit::new(|inputs: &[Tensor]| {
            vec![program(&case, &inputs[0], Sint::from(&inputs[1].as_var().expect("a bound variable")))]
        });
        let bindings = [case.min, case.cols, (case.min + case.cols) / 2];
        let mut jitted = true;
        for width in bindings.into_iter().chain(bindings) {
            let run = |w: Sint| {
                driver::caught(|| {
                    let out = program(&case, &base, w);
                    (out.shape(), out.to_vec::<f32>())
                })
            };
            let symbolic = run(Sint::from(&n.bind(width)));
            let concrete = run(Sint::Int(width));
            let same = match (&symbolic, &concrete) {
                (Ok((_, a)), Ok((_, b))) => a == b,
                (Err(a), Err(b)) => a.contains("size 0") && b.contains("size 0") || a == b,
                _ => false,
            };
            if !same {
                return Err(format!(
                    "{device}, cols = {width}: symbolic {symbolic:?}, concrete {concrete:?}\n{case:?}"
                ));
            }
            if let (Ok((_, want)), true) = (concrete, jitted) {
                let replayed = jit.call(&[base.clone(), Tensor::from_var(&n.bind(width))]);
                let got = replayed.and_then(|mut out| out.remove(0).try_to_vec::<f32>()).map_err(|e| e.to_string());
                // a function that runs no kernel (a view of the input) has nothing to capture
                if got.as_ref().is_err_and(|e| e.contains("nothing to capture")) {
                    jitted = false;
                } else if got.as_ref() != Ok(&want) {
                    return Err(format!(
                        "{device}, cols = {width}: the JIT gives {got:?}, concrete {want:?}\n{case:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}
