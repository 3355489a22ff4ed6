//! Differential fuzzing. proptest draws random tensor programs: elementwise ops of six dtypes,
//! every movement op, sum and max reduces, matmuls (a tensor with its own transpose among them),
//! casts, integer division and remainder, and in-place assignment through views, up to 8 ops
//! deep over shapes of 1s and primes. Every value is a small integer, so every order of
//! summation gives the same float: results are compared bit for bit. Each program runs
//!  - end to end on INTERP and on the CPU, against an exact evaluation on the host;
//!  - kernel by kernel on the CPU with the heuristics' opts, with none (NOOPT) and with random
//!    legal opts, each against INTERP's run of the same kernel on the same inputs.
//!
//! Some programs end in a float op (`sqrt`, `exp`, `sin`, a division): their host value is
//! float64, compared within a tolerance. A failing program shrinks (proptest shrinks its choice
//! list) and is printed as that list: add it to `REGRESSIONS`, which run first.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use lazygrad::codegen::opt::{apply_opt, kernel_ranges, Opt};
use lazygrad::codegen::{get_program, get_program_opts, optimizable, ProgramSpec};
use lazygrad::renderer::c::CRenderer;
use lazygrad::runtime::{get_device, Buffer, DefaultDevice};
use lazygrad::schedule::ScheduleItem;
use lazygrad::uop::{AxisKind, UOp};
use lazygrad::{Context, DType, Tensor};
use proptest::prelude::*;

mod common;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Programs per `cargo test` run.
const PROGRAMS: usize = 2000;
/// Programs whose kernels are compiled together (one compiler run per batch and core).
const BATCH: usize = 100;
/// The largest tensor a program builds.
const MAX_NUMEL: usize = 720;
/// Choice lists of programs that once failed, replayed before the random ones.
const REGRESSIONS: &[&[u16]] = &[
    &[45474, 0, 6877, 297, 2515, 1877, 18641, 0, 24890, 10396, 4464, 183, 4579, 29776, 0, 500, 4864],
    &[
        14028, 4415, 41187, 19230, 5, 27923, 46695, 34147, 1, 32975, 0, 0, 0, 769, 12663, 30221, 52968, 6321, 27536, 0,
        1, 60721, 1, 24513, 0, 1689, 27060, 0, 17197, 0, 0, 0, 0, 0, 1, 21305, 0, 0, 0, 0, 0, 0, 14537, 45364, 0, 8497,
        33103, 40457, 0, 13, 31041, 58250, 25827, 42930, 11553, 47634, 58999, 45284, 29240, 23143, 53406, 61898, 50953,
        41539, 34620, 23011, 9650, 43322, 24275, 26619, 20681, 15524, 47309, 7805, 59942, 8827, 4431, 1787, 14977,
        29694, 57900, 45158, 10406, 13862, 61056, 54506, 40599, 54768, 9625, 43855, 2583, 15825, 62851, 29100, 14004,
        24503, 39288, 41040, 37634, 32558, 43071, 11228, 49105, 35182, 49516, 40075, 4350, 22601, 4802, 53116,
    ],
];

// ---------------------------------------------------------------------------------------------
// Programs

/// The choices a program is built from: each decision takes the next one (0 once they run out,
/// which always picks the simplest option), so a shorter, smaller list is a simpler program.
struct Choices<'a> {
    list: &'a [u16],
    at: usize,
}

impl Choices<'_> {
    /// A choice in `0..n`.
    fn pick(&mut self, n: usize) -> usize {
        let c = self.list.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        c as usize % n.max(1)
    }
    fn coin(&mut self) -> bool {
        self.pick(2) == 1
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Un {
    Neg,
    Abs,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Max,
    Min,
    Lt,
    Ne,
    Eq,
    And,
    Or,
    Xor,
    IDiv,
    Mod,
    FMod,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tail {
    Sqrt,
    Exp,
    Sin,
    Div,
}

/// A node of a program: what it computes, and its shape, dtype and value range.
#[derive(Debug)]
struct Node {
    expr: Expr,
    shape: Vec<usize>,
    dtype: DType,
    lo: i64,
    hi: i64,
}

#[derive(Debug)]
enum Expr {
    Input(usize),
    Unary(Un, Rc<Node>),
    Binary(Bin, Rc<Node>, Rc<Node>),
    Where(Rc<Node>, Rc<Node>, Rc<Node>),
    Cast(Rc<Node>),
    Reshape(Rc<Node>),
    Permute(Vec<usize>, Rc<Node>),
    Expand(Rc<Node>),
    Pad(Vec<(usize, usize)>, Rc<Node>),
    Shrink(Vec<(usize, usize)>, Rc<Node>),
    Flip(Vec<usize>, Rc<Node>),
    Sum(usize, bool, Rc<Node>),
    Max(usize, bool, Rc<Node>),
    Matmul(Rc<Node>, Rc<Node>),
    /// `g.T @ g` (over the last two axes): one tensor on both sides.
    Gram(Rc<Node>),
    Contiguous(Rc<Node>),
    /// A float op on an exact value (and a second one for a division).
    Tail(Tail, Rc<Node>, Option<Rc<Node>>),
}

/// An input tensor's dtype, shape and values.
#[derive(Debug)]
struct Input {
    dtype: DType,
    shape: Vec<usize>,
    values: Vec<i64>,
}

/// A program: its inputs, its result, and optionally an assignment of the result through a view
/// of one input (`target.view(...).assign(result)`), after which that input is the output.
#[derive(Debug)]
struct Program {
    inputs: Vec<Input>,
    root: Rc<Node>,
    assign: Option<(usize, Vec<View>)>,
}

/// One step of an assignment's view of its target.
#[derive(Clone, Debug)]
enum View {
    Permute(Vec<usize>),
    Shrink(Vec<(usize, usize)>),
    Reshape(Vec<usize>),
}

const DTYPES: [DType; 6] = [DType::FLOAT32, DType::FLOAT16, DType::BFLOAT16, DType::INT32, DType::INT8, DType::UINT8];
const DIMS: [usize; 9] = [1, 2, 3, 5, 7, 1, 11, 13, 31];

/// The integers `dtype` holds exactly.
fn exact_range(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::FLOAT32 => (-(1 << 24), 1 << 24),
        DType::FLOAT16 => (-2048, 2048),
        DType::BFLOAT16 => (-256, 256),
        DType::BOOL => (0, 1),
        d => {
            let (lo, hi) = d.int_range();
            (lo as i64, hi as i64)
        }
    }
}

fn fits(dtype: DType, lo: i64, hi: i64) -> bool {
    let (a, b) = exact_range(dtype);
    a <= lo && hi <= b
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The prime factors of `n`, smallest first.
fn factors(mut n: usize) -> Vec<usize> {
    let mut out = vec![];
    let mut p = 2;
    while n > 1 {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    out
}

struct Builder<'a, 'b> {
    c: &'a mut Choices<'b>,
    inputs: Vec<Input>,
}

impl Builder<'_, '_> {
    fn node(&self, expr: Expr, shape: Vec<usize>, dtype: DType, lo: i64, hi: i64) -> Rc<Node> {
        Rc::new(Node { expr, shape, dtype, lo, hi })
    }

    fn leaf(&mut self, shape: &[usize], dtype: DType) -> Rc<Node> {
        let (lo, hi) = match dtype {
            DType::BOOL => (0, 1),
            DType::UINT8 => (0, [1, 3, 9][self.c.pick(3)]),
            _ => {
                let k = [1, 3, 6][self.c.pick(3)];
                (-k, k)
            }
        };
        // the values come from a generator the list seeds: they would use up the choices
        let span = (hi - lo + 1) as u64;
        let mut random = common::xorshift(self.c.pick(1 << 16) as u64);
        let values = (0..numel(shape)).map(|_| lo + (random.next().unwrap() % span) as i64).collect();
        self.inputs.push(Input { dtype, shape: shape.to_vec(), values });
        self.node(Expr::Input(self.inputs.len() - 1), shape.to_vec(), dtype, lo, hi)
    }

    /// A node of exactly `shape` and `dtype`, at most `depth` ops deep.
    fn gen(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Rc<Node> {
        if depth == 0 || self.c.pick(8) == 0 {
            return self.leaf(shape, dtype);
        }
        self.op_node(depth, shape, dtype)
    }

    /// An op node (a leaf only when no op fits).
    fn op_node(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Rc<Node> {
        // an op that does not fit (its values would leave the dtype) gives way to another
        for _ in 0..6 {
            if let Some(node) = self.op(depth, shape, dtype) {
                return node;
            }
        }
        self.leaf(shape, dtype)
    }

    fn op(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        match self.c.pick(14) {
            0 => self.unary(depth, shape, dtype),
            1 | 2 => self.binary(depth, shape, dtype),
            3 => self.where_(depth, shape, dtype),
            4 => self.cast(depth, shape, dtype),
            5 => self.permute(depth, shape, dtype),
            6 => self.reshape(depth, shape, dtype),
            7 => self.expand(depth, shape, dtype),
            8 => self.pad(depth, shape, dtype),
            9 => self.shrink(depth, shape, dtype),
            10 => self.flip(depth, shape, dtype),
            11 => self.reduce(depth, shape, dtype),
            12 => self.matmul(depth, shape, dtype),
            _ => {
                let x = self.gen(depth - 1, shape, dtype);
                Some(self.node(Expr::Contiguous(x.clone()), shape.to_vec(), dtype, x.lo, x.hi))
            }
        }
    }

    fn unary(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let x = self.gen(depth - 1, shape, dtype);
        let (op, lo, hi) = match (dtype, self.c.coin()) {
            (DType::BOOL, _) => (Un::Not, 0, 1),
            (DType::UINT8, _) => return None,
            (_, false) => (Un::Neg, -x.hi, -x.lo),
            (_, true) => (Un::Abs, if x.lo >= 0 { x.lo } else { 0.max(x.lo.max(-x.hi)) }, x.hi.max(-x.lo)),
        };
        fits(dtype, lo, hi).then(|| self.node(Expr::Unary(op, x), shape.to_vec(), dtype, lo, hi))
    }

    /// A shape that broadcasts to `shape` (some of its dims 1).
    fn broadcastable(&mut self, shape: &[usize]) -> Vec<usize> {
        shape.iter().map(|&d| if self.c.pick(4) == 0 { 1 } else { d }).collect()
    }

    fn binary(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        if dtype == DType::BOOL {
            // comparisons of numbers, or logic of bools
            let logic = self.c.coin();
            let operand = if logic { DType::BOOL } else { DTYPES[self.c.pick(DTYPES.len())] };
            let a = self.gen(depth - 1, shape, operand);
            let b_shape = self.broadcastable(shape);
            let b = self.gen(depth - 1, &b_shape, operand);
            let ops = if logic { [Bin::And, Bin::Or, Bin::Xor] } else { [Bin::Lt, Bin::Ne, Bin::Eq] };
            let op = ops[self.c.pick(3)];
            return Some(self.node(Expr::Binary(op, a, b), shape.to_vec(), dtype, 0, 1));
        }
        let a = self.gen(depth - 1, shape, dtype);
        let b_shape = self.broadcastable(shape);
        let b = self.gen(depth - 1, &b_shape, dtype);
        let int = !dtype.is_float();
        let op = match self.c.pick(if int { 8 } else { 5 }) {
            0 => Bin::Add,
            1 => Bin::Sub,
            2 => Bin::Mul,
            3 => Bin::Max,
            4 => Bin::Min,
            5 => Bin::IDiv,
            6 => Bin::Mod,
            _ => Bin::FMod,
        };
        let products = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
        let m = a.lo.abs().max(a.hi.abs());
        let bm = b.lo.abs().max(b.hi.abs());
        let (lo, hi) = match op {
            Bin::Add => (a.lo + b.lo, a.hi + b.hi),
            Bin::Sub => (a.lo - b.hi, a.hi - b.lo),
            Bin::Mul => (*products.iter().min().unwrap(), *products.iter().max().unwrap()),
            Bin::Max => (a.lo.max(b.lo), a.hi.max(b.hi)),
            Bin::Min => (a.lo.min(b.lo), a.hi.min(b.hi)),
            Bin::IDiv => (-m, m),
            _ => (-(bm - 1).max(0), (bm - 1).max(0)),
        };
        let unsigned_ok = dtype != DType::UINT8 || lo >= 0;
        (fits(dtype, lo, hi) && unsigned_ok).then(|| self.node(Expr::Binary(op, a, b), shape.to_vec(), dtype, lo, hi))
    }

    fn where_(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let cond = self.gen(depth - 1, shape, DType::BOOL);
        let a = self.gen(depth - 1, shape, dtype);
        let b_shape = self.broadcastable(shape);
        let b = self.gen(depth - 1, &b_shape, dtype);
        let (lo, hi) = (a.lo.min(b.lo), a.hi.max(b.hi));
        Some(self.node(Expr::Where(cond, a, b), shape.to_vec(), dtype, lo, hi))
    }

    fn cast(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let from = if self.c.pick(6) == 0 { DType::BOOL } else { DTYPES[self.c.pick(DTYPES.len())] };
        let x = self.gen(depth - 1, shape, from);
        let (lo, hi) = if dtype == DType::BOOL { (0, 1) } else { (x.lo, x.hi) };
        fits(dtype, lo, hi).then(|| self.node(Expr::Cast(x), shape.to_vec(), dtype, lo, hi))
    }

    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut rest: Vec<usize> = (0..n).collect();
        (0..n).map(|_| rest.remove(self.c.pick(rest.len()))).collect()
    }

    fn permute(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let perm = self.permutation(shape.len());
        let mut child = vec![0; shape.len()];
        for (i, &p) in perm.iter().enumerate() {
            child[p] = shape[i];
        }
        let x = self.gen(depth - 1, &child, dtype);
        let (lo, hi) = (x.lo, x.hi);
        Some(self.node(Expr::Permute(perm, x), shape.to_vec(), dtype, lo, hi))
    }

    /// Another shape of `n` elements: its prime factors dealt to up to 4 dims.
    fn factorization(&mut self, n: usize) -> Vec<usize> {
        let mut dims = vec![1; 1 + self.c.pick(4)];
        for p in factors(n) {
            let at = self.c.pick(dims.len());
            dims[at] *= p;
        }
        dims
    }

    fn reshape(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let child = self.factorization(numel(shape));
        let x = self.gen(depth - 1, &child, dtype);
        let (lo, hi) = (x.lo, x.hi);
        Some(self.node(Expr::Reshape(x), shape.to_vec(), dtype, lo, hi))
    }

    fn expand(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let child: Vec<usize> = shape.iter().map(|&d| if d > 1 && self.c.coin() { 1 } else { d }).collect();
        if child == shape {
            return None;
        }
        let x = self.gen(depth - 1, &child, dtype);
        let (lo, hi) = (x.lo, x.hi);
        Some(self.node(Expr::Expand(x), shape.to_vec(), dtype, lo, hi))
    }

    fn pad(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let pads: Vec<(usize, usize)> = shape
            .iter()
            .map(|&d| match d {
                1 => (0, 0),
                _ => {
                    let before = self.c.pick(d.min(3));
                    (before, self.c.pick((d - before).min(3)))
                }
            })
            .collect();
        let child: Vec<usize> = shape.iter().zip(&pads).map(|(d, (a, b))| d - a - b).collect();
        let x = self.gen(depth - 1, &child, dtype);
        let (lo, hi) = (x.lo.min(0), x.hi.max(0));
        Some(self.node(Expr::Pad(pads, x), shape.to_vec(), dtype, lo, hi))
    }

    fn shrink(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let extra: Vec<usize> = shape.iter().map(|_| self.c.pick(4)).collect();
        let child: Vec<usize> = shape.iter().zip(&extra).map(|(d, e)| d + e).collect();
        if numel(&child) > MAX_NUMEL {
            return None;
        }
        let bounds: Vec<(usize, usize)> = shape
            .iter()
            .zip(&extra)
            .map(|(&d, &e)| {
                let start = self.c.pick(e + 1);
                (start, start + d)
            })
            .collect();
        let x = self.gen(depth - 1, &child, dtype);
        let (lo, hi) = (x.lo, x.hi);
        Some(self.node(Expr::Shrink(bounds, x), shape.to_vec(), dtype, lo, hi))
    }

    fn flip(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let axes: Vec<usize> = (0..shape.len()).filter(|_| self.c.coin()).collect();
        let x = self.gen(depth - 1, shape, dtype);
        let (lo, hi) = (x.lo, x.hi);
        Some(self.node(Expr::Flip(axes, x), shape.to_vec(), dtype, lo, hi))
    }

    /// A sum or max over one axis: dropped (inserted into the child's shape), or kept (a dim of 1
    /// that is longer in the child).
    fn reduce(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let size = [2, 3, 5, 7, 13, 31][self.c.pick(6)];
        let ones: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] == 1).collect();
        let keepdim = !ones.is_empty() && self.c.coin();
        let (axis, child) = match keepdim {
            true => {
                let a = ones[self.c.pick(ones.len())];
                let mut c = shape.to_vec();
                c[a] = size;
                (a, c)
            }
            false => {
                let a = self.c.pick(shape.len() + 1);
                let mut c = shape.to_vec();
                c.insert(a, size);
                (a, c)
            }
        };
        if numel(&child) > MAX_NUMEL || dtype == DType::BOOL {
            return None;
        }
        if self.c.coin() {
            let x = self.gen(depth - 1, &child, dtype);
            let (lo, hi) = (x.lo, x.hi);
            return Some(self.node(Expr::Max(axis, keepdim, x), shape.to_vec(), dtype, lo, hi));
        }
        // a sum of int8 and bools is int32, of float16 float16 (accumulated in float32)
        let from = match dtype {
            DType::INT32 => [DType::INT32, DType::INT8, DType::BOOL][self.c.pick(3)],
            DType::FLOAT32 | DType::FLOAT16 | DType::BFLOAT16 => dtype,
            _ => return None,
        };
        let x = self.gen(depth - 1, &child, from);
        let (lo, hi) = (x.lo * size as i64, x.hi * size as i64);
        fits(dtype, lo, hi).then(|| self.node(Expr::Sum(axis, keepdim, x), shape.to_vec(), dtype, lo, hi))
    }

    fn matmul(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        if shape.len() < 2 || !matches!(dtype, DType::FLOAT32 | DType::INT32 | DType::FLOAT16) {
            return None;
        }
        let (r, m, n) = (shape.len(), shape[shape.len() - 2], shape[shape.len() - 1]);
        let k = [1, 2, 3, 5, 17][self.c.pick(5)];
        let (node, lo, hi) = if m == n && self.c.coin() {
            let mut g_shape = shape.to_vec();
            g_shape[r - 2] = k;
            if numel(&g_shape) > MAX_NUMEL {
                return None;
            }
            let g = self.gen(depth - 1, &g_shape, dtype);
            let p = g.lo.abs().max(g.hi.abs());
            let (lo, hi) = (-(p * p) * k as i64, p * p * k as i64);
            (Expr::Gram(g), lo, hi)
        } else {
            let mut a_shape = shape.to_vec();
            a_shape[r - 1] = k;
            if numel(&a_shape) > MAX_NUMEL {
                return None;
            }
            let a = self.gen(depth - 1, &a_shape, dtype);
            let b = self.gen(depth - 1, &[k, n], dtype);
            let p = a.lo.abs().max(a.hi.abs()) * b.lo.abs().max(b.hi.abs());
            (Expr::Matmul(a, b), -p * k as i64, p * k as i64)
        };
        fits(dtype, lo, hi).then(|| self.node(node, shape.to_vec(), dtype, lo, hi))
    }

    /// A float tail on an exact float32 value.
    fn tail(&mut self, x: Rc<Node>) -> Rc<Node> {
        let op = [Tail::Sqrt, Tail::Exp, Tail::Sin, Tail::Div][self.c.pick(4)];
        let shape = x.shape.clone();
        let divisor = (op == Tail::Div).then(|| {
            let b_shape = self.broadcastable(&shape);
            self.gen(2, &b_shape, DType::FLOAT32)
        });
        self.node(Expr::Tail(op, x, divisor), shape, DType::FLOAT32, 0, 0)
    }
}

/// The program `choices` describe.
fn build(list: &[u16]) -> Program {
    let mut c = Choices { list, at: 0 };
    let rank = c.pick(5);
    let mut shape: Vec<usize> = (0..rank).map(|_| DIMS[c.pick(DIMS.len())]).collect();
    while numel(&shape) > MAX_NUMEL / 4 {
        shape.pop();
    }
    let assign = rank > 0 && c.pick(4) == 0;
    let dtype =
        if assign { DTYPES[c.pick(DTYPES.len())] } else { [DTYPES.as_slice(), &[DType::BOOL]].concat()[c.pick(7)] };
    let depth = 3 + c.pick(6);
    let mut b = Builder { c: &mut c, inputs: vec![] };
    if !assign {
        let mut root = b.op_node(depth, &shape, dtype);
        if dtype == DType::FLOAT32 && b.c.pick(3) == 0 {
            root = b.tail(root);
        }
        return Program { inputs: b.inputs, root, assign: None };
    }
    // target.view.assign(value): the view is a permute, then a shrink, then a reshape
    let target = b.leaf(&shape, dtype);
    let Expr::Input(target) = target.expr else { unreachable!("a leaf is an input") };
    let perm = b.permutation(shape.len());
    let permuted: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let bounds: Vec<(usize, usize)> = permuted
        .iter()
        .map(|&d| {
            let start = b.c.pick(d);
            (start, start + 1 + b.c.pick(d - start))
        })
        .collect();
    let shrunk: Vec<usize> = bounds.iter().map(|(s, e)| e - s).collect();
    let view_shape = b.factorization(numel(&shrunk));
    let views = vec![View::Permute(perm), View::Shrink(bounds), View::Reshape(view_shape.clone())];
    let root = b.op_node(depth, &view_shape, dtype);
    Program { inputs: b.inputs, root, assign: Some((target, views)) }
}

// ---------------------------------------------------------------------------------------------
// The host evaluation

/// A host array: a shape and row-major values (exact integers, or float64 after a float tail).
#[derive(Clone, Debug)]
struct Host {
    shape: Vec<usize>,
    values: Vec<f64>,
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// The multi-index of flat position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = flat % shape[a];
        flat /= shape[a];
    }
    idx
}

impl Host {
    /// The array of `shape` whose element at each index is `f(index)`.
    fn from_fn(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Host {
        Host { shape: shape.to_vec(), values: (0..numel(shape)).map(|i| f(&unravel(i, shape))).collect() }
    }
    fn at(&self, idx: &[usize]) -> f64 {
        self.values[idx.iter().zip(strides(&self.shape)).map(|(i, s)| i * s).sum::<usize>()]
    }
    /// This array broadcast to `shape` (its dims of 1 repeated).
    fn broadcast(&self, shape: &[usize]) -> Host {
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
    fn permute(&self, perm: &[usize]) -> Host {
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        Host::from_fn(&shape, |idx| {
            let mut src = vec![0; idx.len()];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = idx[i];
            }
            self.at(&src)
        })
    }
    fn reshape(&self, shape: &[usize]) -> Host {
        Host { shape: shape.to_vec(), values: self.values.clone() }
    }
    fn shrink(&self, bounds: &[(usize, usize)]) -> Host {
        let shape: Vec<usize> = bounds.iter().map(|(s, e)| e - s).collect();
        Host::from_fn(&shape, |idx| self.at(&idx.iter().zip(bounds).map(|(i, (s, _))| i + s).collect::<Vec<_>>()))
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
fn int_mod(a: f64, b: f64, python: bool) -> f64 {
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

fn host_eval(node: &Node, inputs: &[Host]) -> Host {
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
        Expr::Pad(pads, x) => {
            let x = ev(x);
            Host::from_fn(&node.shape, |idx| {
                let inside = idx.iter().zip(pads).zip(&x.shape).all(|((&i, &(b, _)), &d)| i >= b && i < b + d);
                match inside {
                    true => x.at(&idx.iter().zip(pads).map(|(i, (b, _))| i - b).collect::<Vec<_>>()),
                    false => 0.0,
                }
            })
        }
        Expr::Shrink(bounds, x) => ev(x).shrink(bounds),
        Expr::Flip(axes, x) => {
            let x = ev(x);
            Host::from_fn(&node.shape, |idx| {
                let src: Vec<usize> =
                    (0..idx.len()).map(|a| if axes.contains(&a) { x.shape[a] - 1 - idx[a] } else { idx[a] }).collect();
                x.at(&src)
            })
        }
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
fn host_run(p: &Program) -> Host {
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

// ---------------------------------------------------------------------------------------------
// Running on lazygrad

fn input_bytes(input: &Input) -> Vec<u8> {
    let mut out = vec![];
    for &v in &input.values {
        match input.dtype {
            DType::FLOAT32 => out.extend((v as f32).to_le_bytes()),
            DType::FLOAT16 => out.extend(half::f16::from_f64(v as f64).to_le_bytes()),
            DType::BFLOAT16 => out.extend(half::bf16::from_f64(v as f64).to_le_bytes()),
            DType::INT32 => out.extend((v as i32).to_le_bytes()),
            DType::INT8 => out.extend((v as i8).to_le_bytes()),
            DType::UINT8 | DType::BOOL => out.push(v as u8),
            other => unreachable!("no inputs of {other:?}"),
        }
    }
    out
}

/// The program as lazygrad tensors on `device`: what to realize (the result, or the assignment)
/// and the output to read after it (the result, or the assigned input).
fn lazy(p: &Program, device: &str) -> (Tensor, Tensor) {
    let inputs: Vec<Tensor> =
        p.inputs.iter().map(|i| Tensor::from_bytes(&input_bytes(i), &i.shape, i.dtype, device)).collect();
    let mut memo: HashMap<*const Node, Tensor> = HashMap::new();
    let value = lazy_node(&p.root, &inputs, &mut memo);
    let Some((target, views)) = &p.assign else { return (value.clone(), value) };
    let mut view = inputs[*target].clone();
    for v in views {
        view = match v {
            View::Permute(perm) => view.permute(&perm.iter().map(|&a| a as isize).collect::<Vec<_>>()),
            View::Shrink(bounds) => view.shrink(bounds),
            View::Reshape(shape) => view.reshape(shape),
        };
    }
    (view.assign(&value), inputs[*target].clone())
}

fn lazy_node(node: &Rc<Node>, inputs: &[Tensor], memo: &mut HashMap<*const Node, Tensor>) -> Tensor {
    if let Some(t) = memo.get(&Rc::as_ptr(node)) {
        return t.clone();
    }
    let mut ev = |n: &Rc<Node>| lazy_node(n, inputs, memo);
    let axes = |a: &[usize]| a.iter().map(|&x| x as isize).collect::<Vec<_>>();
    let t = match &node.expr {
        Expr::Input(i) => inputs[*i].clone(),
        Expr::Unary(Un::Neg, x) => ev(x).neg(),
        Expr::Unary(Un::Abs, x) => ev(x).abs(),
        Expr::Unary(Un::Not, x) => ev(x).logical_not(),
        Expr::Binary(op, a, b) => {
            let (a, b) = (ev(a), ev(b));
            match op {
                Bin::Add => &a + &b,
                Bin::Sub => &a - &b,
                Bin::Mul => &a * &b,
                Bin::Max => a.maximum(&b),
                Bin::Min => a.minimum(&b),
                Bin::Lt => a.lt(&b),
                Bin::Ne => a.ne(&b),
                Bin::Eq => a.eq(&b),
                Bin::And => a.bitwise_and(&b),
                Bin::Or => a.bitwise_or(&b),
                Bin::Xor => a.bitwise_xor(&b),
                Bin::IDiv => a.idiv(&b),
                Bin::Mod => a.mod_(&b),
                Bin::FMod => a.fmod(&b),
            }
        }
        Expr::Where(c, a, b) => {
            let (c, a, b) = (ev(c), ev(a), ev(b));
            c.where_(&a, &b)
        }
        Expr::Cast(x) => ev(x).cast(node.dtype),
        Expr::Contiguous(x) => ev(x).contiguous(),
        Expr::Reshape(x) => ev(x).reshape(&node.shape),
        Expr::Permute(perm, x) => ev(x).permute(&axes(perm)),
        Expr::Expand(x) => ev(x).expand(&node.shape),
        Expr::Pad(pads, x) => ev(x).pad(pads),
        Expr::Shrink(bounds, x) => ev(x).shrink(bounds),
        Expr::Flip(flips, x) => ev(x).flip(&axes(flips)),
        Expr::Sum(axis, keepdim, x) => ev(x).sum(*axis as isize, *keepdim),
        Expr::Max(axis, keepdim, x) => ev(x).max(*axis as isize, *keepdim),
        Expr::Matmul(a, b) => {
            let (a, b) = (ev(a), ev(b));
            a.matmul(&b)
        }
        Expr::Gram(g) => {
            let g = ev(g);
            g.transpose(-1, -2).matmul(&g)
        }
        Expr::Tail(op, x, divisor) => {
            let x = ev(x);
            match (op, divisor) {
                (Tail::Sqrt, _) => x.abs().sqrt(),
                (Tail::Exp, _) => x.mul(1e-3).exp(),
                (Tail::Sin, _) => x.sin(),
                (Tail::Div, Some(d)) => x.div(ev(d).abs().add(1.0)),
                (Tail::Div, None) => unreachable!("a division has a divisor"),
            }
        }
    };
    assert_eq!(t.shape(), node.shape, "fuzz: built {:?}, meant {:?}", t.shape(), node.shape);
    assert_eq!(t.dtype(), node.dtype, "fuzz: built {:?} of {:?}", t.dtype(), node.expr);
    memo.insert(Rc::as_ptr(node), t.clone());
    t
}

/// Whether the program ends in a float op (compared within a tolerance, not exactly).
fn inexact(p: &Program) -> bool {
    matches!(p.root.expr, Expr::Tail(..))
}

/// `Err` describing the first value of `got` that differs from the host's `want`.
fn compare(what: &str, got: &[f64], want: &Host, tolerant: bool) -> Result<(), String> {
    if got.len() != want.values.len() {
        return Err(format!("{what}: {} values, the host has {}", got.len(), want.values.len()));
    }
    for (i, (&g, &w)) in got.iter().zip(&want.values).enumerate() {
        let ok = match tolerant {
            true => (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            false => g == w,
        };
        if !ok {
            return Err(format!("{what}: element {i} is {g}, the host says {w}"));
        }
    }
    Ok(())
}

/// The program's end-to-end result on `device`, as f64.
fn run_on(p: &Program, device: &str) -> Result<Vec<f64>, String> {
    let _device = DefaultDevice::scoped(device);
    let (result, out) = lazy(p, device);
    result.try_realize().map_err(|e| format!("{device}: {e}"))?;
    out.cast(DType::FLOAT64).try_to_vec::<f64>().map_err(|e| format!("{device}: {e}"))
}

/// Random legal opts for the CPU (no workgroups) on the optimizable form of kernel `ast`.
fn random_opts(ast: &UOp, c: &mut Choices) -> Vec<Opt> {
    let mut current = optimizable(ast);
    let mut opts = vec![];
    for _ in 0..1 + c.pick(5) {
        let ranges = kernel_ranges(&current);
        if ranges.is_empty() {
            break;
        }
        let (id, _, _) = ranges[c.pick(ranges.len())];
        let amount = [2, 3, 4, 5, 7, 8, 16][c.pick(7)];
        let loops: Vec<usize> = ranges.iter().filter(|r| r.1 == AxisKind::Loop).map(|r| r.0).collect();
        let opt = match c.pick(5) {
            0 => Opt::Upcast { range: id, amount },
            1 => Opt::Unroll { range: id, amount },
            2 => Opt::Padto { range: id, amount },
            3 => Opt::Thread(amount.min(4)),
            _ => Opt::Swap { range: id, with: loops.get(c.pick(loops.len().max(1))).copied().unwrap_or(id) },
        };
        if let Some(next) = apply_opt(&current, opt) {
            current = next;
            opts.push(opt);
        }
    }
    opts
}

/// One kernel of a program's CPU schedule: its AST and buffers, and its variants (the
/// heuristics' opts, none, random ones), each as a name and the programs for the CPU and INTERP.
struct KernelCase {
    ast: UOp,
    bufs: Vec<Arc<Buffer>>,
    variants: Vec<(String, ProgramSpec, ProgramSpec)>,
}

/// A program prepared for its runs: the host result, its kernels and the VECTOR_BYTES they were
/// generated for.
struct Prepared {
    host: Host,
    kernels: Vec<KernelCase>,
    vector_bytes: i64,
}

/// Schedule `p` on the CPU and generate every variant of its kernels (nothing runs yet).
fn prepare(p: &Program, list: &[u16]) -> Result<Prepared, String> {
    let host = host_run(p);
    // the opts' choices come from the end of the list, so that they do not shift the program's
    let mut c = Choices { list, at: list.len() / 2 };
    let vector_bytes = [16, 32, 64][c.pick(3)];
    let _width = Context::new(&[("VECTOR_BYTES", vector_bytes)]);
    let (result, _) = {
        let _device = DefaultDevice::scoped("CPU");
        lazy(p, "CPU")
    };
    let mut kernels = vec![];
    for item in Tensor::schedule(std::slice::from_ref(&result)) {
        let ScheduleItem::Kernel { ast, bufs } = item else { continue };
        let generate = |opts: Option<&[Opt]>, renderer: Option<&CRenderer>| {
            let r = renderer.map(|r| r as &dyn lazygrad::renderer::Renderer);
            match opts {
                None => get_program(&ast, r),
                Some(o) => get_program_opts(&ast, r, o, ""),
            }
            .map_err(|e| format!("codegen: {e}"))
        };
        let random = random_opts(&ast, &mut c);
        let mut variants = vec![];
        for (name, opts) in [
            ("heuristics".to_string(), None),
            ("NOOPT".to_string(), Some(vec![])),
            (format!("opts {random:?}"), Some(random)),
        ] {
            let (cpu, interp) = (generate(opts.as_deref(), Some(&CRenderer))?, generate(opts.as_deref(), None)?);
            variants.push((name, cpu, interp));
        }
        kernels.push(KernelCase { ast: ast.clone(), bufs, variants });
    }
    Ok(Prepared { host, kernels, vector_bytes })
}

/// Run a prepared program's kernels, each variant from the same inputs: the CPU's result equals
/// INTERP's for the same variant bit for bit, and every variant's the heuristics' (as values: a
/// zero's sign depends on the order of a sum; within a tolerance in a float tail). The
/// heuristics' result goes on to the next kernel.
fn run_kernels(prepared: &Prepared, tolerant: bool) -> Result<(), String> {
    let device = |name: &str| get_device(name).map_err(|e| e.to_string());
    let (cpu, interp) = (device("CPU")?, device("INTERP")?);
    for k in &prepared.kernels {
        let out = &k.bufs[0];
        let before = out.copyout().map_err(|e| e.to_string())?;
        let mut first: Option<Vec<u8>> = None;
        for (name, cpu_spec, interp_spec) in &k.variants {
            let run = |dev: &Arc<dyn lazygrad::runtime::Device>, spec: &ProgramSpec| {
                out.copyin(&before).map_err(|e| e.to_string())?;
                let err = |e: lazygrad::Error| format!("{} {name}: {e}\n{:?}", dev.name(), k.ast);
                dev.compile(spec).and_then(|prog| prog.run(&k.bufs)).map_err(err)?;
                out.copyout().map_err(|e| e.to_string())
            };
            let (on_interp, on_cpu) = (run(&interp, interp_spec)?, run(&cpu, cpu_spec)?);
            let reference = first.get_or_insert_with(|| on_interp.clone());
            let failure = match () {
                _ if on_cpu != on_interp => "the CPU differs from INTERP",
                _ if !same_values(&on_interp, reference, out.dtype(), tolerant) => {
                    "INTERP differs from the heuristics' result"
                }
                _ => continue,
            };
            let size = out.dtype().itemsize();
            let at = (0..on_cpu.len()).find(|&i| on_cpu[i] != on_interp[i]).map_or(0, |i| i / size);
            let bytes = |b: &[u8]| b[at * size..(at + 1) * size].to_vec();
            return Err(format!(
                "kernel {} with {name}: {failure}: element {at} is {:?} on the CPU, {:?} on INTERP\n{:?}\n{}",
                cpu_spec.name,
                bytes(&on_cpu),
                bytes(&on_interp),
                k.ast,
                cpu_spec.src
            ));
        }
        out.copyin(first.as_deref().unwrap_or(&before)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Two buffers of `dtype` hold the same values (floats compared as numbers, within the float
/// tail's tolerance when `tolerant`; other dtypes bit for bit).
fn same_values(a: &[u8], b: &[u8], dtype: DType, tolerant: bool) -> bool {
    let floats = |bytes: &[u8]| -> Vec<f64> {
        match dtype {
            DType::FLOAT32 => bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
            DType::FLOAT16 => bytes.chunks(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
            DType::BFLOAT16 => bytes.chunks(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
            _ => unreachable!("only floats"),
        }
    };
    if !dtype.is_float() {
        return a == b;
    }
    floats(a).iter().zip(floats(b)).all(|(&x, y)| x == y || tolerant && (x - y).abs() <= 1e-6 + 1e-5 * y.abs())
}

/// Every check of one program, after its kernels were compiled.
fn check_prepared(p: &Program, prepared: &Prepared) -> Result<(), String> {
    let tolerant = inexact(p);
    run_kernels(prepared, tolerant)?;
    let _width = Context::new(&[("VECTOR_BYTES", prepared.vector_bytes)]);
    for device in ["INTERP", "CPU"] {
        compare(device, &run_on(p, device)?, &prepared.host, tolerant)?;
    }
    Ok(())
}

/// A program's checks, as one `Result` (a panic inside lazygrad is a failure too).
fn check(list: &[u16]) -> Result<(), String> {
    let p = build(list);
    let run = || {
        let prepared = prepare(&p, list)?;
        compile(&prepared.kernels)?;
        check_prepared(&p, &prepared)
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .unwrap_or_else(|e| Err(format!("panic: {}", e.downcast_ref::<String>().cloned().unwrap_or_default())))
        .map_err(|e| format!("{e}\nprogram: {p:#?}"))
}

/// Compile every CPU variant of `kernels` (one compiler run per batch of new ones).
fn compile(kernels: &[KernelCase]) -> Result<(), String> {
    let specs: Vec<&ProgramSpec> = kernels.iter().flat_map(|k| k.variants.iter().map(|(_, s, _)| s)).collect();
    get_device("CPU").and_then(|cpu| cpu.compile_all(&specs)).map(|_| ()).map_err(|e| format!("compile: {e}"))
}

#[test]
fn random_programs_agree_with_interp_and_the_host() {
    for list in REGRESSIONS {
        check(list).unwrap_or_else(|e| panic!("regression {list:?}:\n{e}"));
    }
    let config = Config { failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[20; 32]));
    let strategy = prop::collection::vec(any::<u16>(), 16..160);
    let mut trees = (0..PROGRAMS).map(|_| strategy.new_tree(&mut runner).expect("a program")).collect::<Vec<_>>();
    let (mut programs, mut kernels) = (0, 0);
    for batch in trees.chunks_mut(BATCH) {
        let lists: Vec<Vec<u16>> = batch.iter().map(|t| t.current()).collect();
        let built: Vec<Program> = lists.iter().map(|l| build(l)).collect();
        // generate every kernel of the batch, compile them together, then run each program
        let prepared: Vec<Result<Prepared, String>> = built
            .iter()
            .zip(&lists)
            .map(|(p, l)| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(p, l)))
                    .unwrap_or_else(|_| Err("panic".into()))
            })
            .collect();
        let cases: Vec<&KernelCase> = prepared.iter().flatten().flat_map(|p| &p.kernels).collect();
        let specs: Vec<&ProgramSpec> = cases.iter().flat_map(|k| k.variants.iter().map(|(_, s, _)| s)).collect();
        get_device("CPU").and_then(|cpu| cpu.compile_all(&specs)).expect("the batch compiles");
        kernels += cases.len();
        for (i, (p, prep)) in built.iter().zip(&prepared).enumerate() {
            programs += 1;
            let ok = match prep {
                Ok(prep) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_prepared(p, prep)))
                    .unwrap_or_else(|_| Err("panic".into())),
                Err(e) => Err(e.clone()),
            };
            if ok.is_err() {
                // shrink as proptest does: simpler choice lists while they fail, back a step when not
                let tree = &mut batch[i];
                let mut failing = tree.current();
                let mut more = tree.simplify();
                for _ in 0..1000 {
                    if !more {
                        break;
                    }
                    more = match check(&tree.current()).is_err() {
                        true => {
                            failing = tree.current();
                            tree.simplify()
                        }
                        false => tree.complicate(),
                    };
                }
                let err = check(&failing).expect_err("the shrunk program still fails");
                panic!("a fuzzed program fails; add its choices to REGRESSIONS:\n{failing:?}\n{err}");
            }
        }
    }
    println!("fuzzed {programs} programs ({kernels} kernels, 3 CPU variants each) with no mismatch");
    assert!(kernels >= programs, "the programs are too simple: {kernels} kernels for {programs} programs");
}
