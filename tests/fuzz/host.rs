//! The host evaluation of a fuzzed program: exact, since its values are small integers (float64
//! after a float tail).

use std::rc::Rc;

use lazygrad::DType;

use super::program::{numel, Bin, Expr, Node, Program, Tail, Un, View};

/// A host array: a shape and row-major values (exact integers, or float64 after a float tail).
#[derive(Clone, Debug)]
pub struct Host {
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
}

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// The multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = flat % shape[a];
        flat /= shape[a];
    }
    idx
}

impl Host {
    /// The array of `shape` whose element at each index is `f(index)`.
    pub fn from_fn(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Host {
        Host { shape: shape.to_vec(), values: (0..numel(shape)).map(|i| f(&unravel(i, shape))).collect() }
    }
    pub fn at(&self, idx: &[usize]) -> f64 {
        self.values[idx.iter().zip(strides(&self.shape)).map(|(i, s)| i * s).sum::<usize>()]
    }
    /// This array broadcast to `shape` (its dims of 1 repeated).
    pub fn broadcast(&self, shape: &[usize]) -> Host {
        Host::from_fn(shape, |idx| {
            let mine: Vec<usize> = idx.iter().zip(&self.shape).map(|(&i, &d)| if d == 1 { 0 } else { i }).collect();
            self.at(&mine)
        })
    }
    fn map(&self, f: impl Fn(f64) -> f64) -> Host {
        Host { shape: self.shape.clone(), values: self.values.iter().map(|&v| f(v)).collect() }
    }
    fn zip(&self, other: &Host, f: impl Fn(f64, f64) -> f64) -> Host {
        let b = other.broadcast(&self.shape);
        Host { shape: self.shape.clone(), values: self.values.iter().zip(&b.values).map(|(&x, &y)| f(x, y)).collect() }
    }
    pub fn permute(&self, perm: &[usize]) -> Host {
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        Host::from_fn(&shape, |idx| {
            let mut src = vec![0; idx.len()];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = idx[i];
            }
            self.at(&src)
        })
    }
    pub fn reshape(&self, shape: &[usize]) -> Host {
        Host { shape: shape.to_vec(), values: self.values.clone() }
    }
    pub fn shrink(&self, bounds: &[(usize, usize)]) -> Host {
        let shape: Vec<usize> = bounds.iter().map(|(s, e)| e - s).collect();
        Host::from_fn(&shape, |idx| self.at(&idx.iter().zip(bounds).map(|(i, (s, _))| i + s).collect::<Vec<_>>()))
    }
    /// This array with `(before, after)` elements of `fill` around each axis.
    pub fn pad(&self, pads: &[(usize, usize)], fill: f64) -> Host {
        let shape: Vec<usize> = self.shape.iter().zip(pads).map(|(d, (b, a))| b + d + a).collect();
        Host::from_fn(&shape, |idx| {
            let inside = idx.iter().zip(pads).zip(&self.shape).all(|((&i, &(b, _)), &d)| i >= b && i < b + d);
            match inside {
                true => self.at(&idx.iter().zip(pads).map(|(i, (b, _))| i - b).collect::<Vec<_>>()),
                false => fill,
            }
        })
    }
    /// This array with `axes` reversed.
    pub fn flip(&self, axes: &[usize]) -> Host {
        Host::from_fn(&self.shape, |idx| {
            let src: Vec<usize> =
                (0..idx.len()).map(|a| if axes.contains(&a) { self.shape[a] - 1 - idx[a] } else { idx[a] }).collect();
            self.at(&src)
        })
    }
    fn reduce(&self, axis: usize, keepdim: bool, out_shape: &[usize], f: fn(f64, f64) -> f64) -> Host {
        Host::from_fn(out_shape, |idx| {
            let mut src = idx.to_vec();
            if !keepdim {
                src.insert(axis, 0);
            }
            (0..self.shape[axis])
                .map(|k| {
                    src[axis] = k;
                    self.at(&src)
                })
                .reduce(f)
                .expect("reduced axes are not empty")
        })
    }
}

/// Python's remainder (the divisor's sign) and C's (the dividend's); by 0 both are 0.
pub fn int_mod(a: f64, b: f64, python: bool) -> f64 {
    if b == 0.0 {
        return 0.0;
    }
    let r = a % b;
    if python && r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

pub fn host_eval(node: &Node, inputs: &[Host]) -> Host {
    let ev = |n: &Rc<Node>| host_eval(n, inputs);
    let bool_of = |v: bool| v as u8 as f64;
    match &node.expr {
        Expr::Input(i) => inputs[*i].clone(),
        Expr::Unary(op, x) => ev(x).map(match op {
            Un::Neg => |v: f64| -v,
            Un::Abs => f64::abs,
            Un::Not => |v: f64| (v == 0.0) as u8 as f64,
        }),
        Expr::Binary(op, a, b) => {
            let op = *op;
            ev(a).zip(&ev(b), move |x, y| match op {
                Bin::Add => x + y,
                Bin::Sub => x - y,
                Bin::Mul => x * y,
                Bin::Max => x.max(y),
                Bin::Min => x.min(y),
                Bin::Lt => bool_of(x < y),
                Bin::Ne => bool_of(x != y),
                Bin::Eq => bool_of(x == y),
                Bin::And => bool_of(x != 0.0 && y != 0.0),
                Bin::Or => bool_of(x != 0.0 || y != 0.0),
                Bin::Xor => bool_of((x != 0.0) != (y != 0.0)),
                Bin::IDiv if y == 0.0 => 0.0,
                Bin::IDiv => (x / y).trunc(),
                Bin::Mod => int_mod(x, y, true),
                Bin::FMod => int_mod(x, y, false),
            })
        }
        Expr::Where(c, a, b) => {
            let (c, a, b) = (ev(c), ev(a), ev(b).broadcast(&node.shape));
            Host::from_fn(&node.shape, |idx| if c.at(idx) != 0.0 { a.at(idx) } else { b.at(idx) })
        }
        Expr::Cast(x) if node.dtype == DType::BOOL => ev(x).map(|v| (v != 0.0) as u8 as f64),
        Expr::Cast(x) | Expr::Contiguous(x) => ev(x),
        Expr::Reshape(x) => ev(x).reshape(&node.shape),
        Expr::Permute(perm, x) => ev(x).permute(perm),
        Expr::Expand(x) => ev(x).broadcast(&node.shape),
        Expr::Pad(pads, x) => ev(x).pad(pads, 0.0),
        Expr::Shrink(bounds, x) => ev(x).shrink(bounds),
        Expr::Flip(axes, x) => ev(x).flip(axes),
        Expr::Sum(axis, keepdim, x) => ev(x).reduce(*axis, *keepdim, &node.shape, |a, b| a + b),
        Expr::Max(axis, keepdim, x) => ev(x).reduce(*axis, *keepdim, &node.shape, f64::max),
        Expr::Matmul(a, b) => {
            let (a, b) = (ev(a), ev(b));
            let (k, r) = (b.shape[0], node.shape.len());
            Host::from_fn(&node.shape, |idx| {
                let mut ai = idx.to_vec();
                (0..k)
                    .map(|p| {
                        ai[r - 1] = p;
                        a.at(&ai) * b.at(&[p, idx[r - 1]])
                    })
                    .sum()
            })
        }
        Expr::Gram(g) => {
            let g = ev(g);
            let (r, k) = (node.shape.len(), g.shape[node.shape.len() - 2]);
            Host::from_fn(&node.shape, |idx| {
                let (mut left, mut right) = (idx.to_vec(), idx.to_vec());
                (0..k)
                    .map(|p| {
                        (left[r - 2], left[r - 1]) = (p, idx[r - 2]);
                        (right[r - 2], right[r - 1]) = (p, idx[r - 1]);
                        g.at(&left) * g.at(&right)
                    })
                    .sum()
            })
        }
        Expr::Tail(op, x, divisor) => {
            let x = ev(x);
            match (op, divisor) {
                (Tail::Sqrt, _) => x.map(|v| v.abs().sqrt()),
                (Tail::Exp, _) => x.map(|v| (v * 1e-3).exp()),
                (Tail::Sin, _) => x.map(f64::sin),
                (Tail::Div, Some(d)) => x.zip(&ev(d), |a, b| a / (b.abs() + 1.0)),
                (Tail::Div, None) => unreachable!("a division has a divisor"),
            }
        }
    }
}

/// The host value of the program's output.
pub fn host_run(p: &Program) -> Host {
    let inputs: Vec<Host> = p
        .inputs
        .iter()
        .map(|i| Host { shape: i.shape.clone(), values: i.values.iter().map(|&v| v as f64).collect() })
        .collect();
    let value = host_eval(&p.root, &inputs);
    let Some((target, views)) = &p.assign else { return value };
    // the target's flat positions, moved through the view like the data
    let mut positions = Host::from_fn(&inputs[*target].shape, |_| 0.0);
    positions.values = (0..positions.values.len()).map(|i| i as f64).collect();
    for v in views {
        positions = match v {
            View::Permute(perm) => positions.permute(perm),
            View::Shrink(bounds) => positions.shrink(bounds),
            View::Reshape(shape) => positions.reshape(shape),
        };
    }
    let mut out = inputs[*target].clone();
    for (pos, v) in positions.values.iter().zip(&value.values) {
        out.values[*pos as usize] = *v;
    }
    out
}
