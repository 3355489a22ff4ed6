//! Gradients at kinks and special points: random float64 programs over vectors whose values
//! come from a small grid (0, -0, ±0.5, ±1, ±2, 3: ties and zeros everywhere) through relu,
//! abs, clamp, maximum and minimum (ties), where on a comparison (at equality), sqrt and a
//! final log (at 0), pow (at base 0 and exponent 0), max/min/sum/prod reductions (ties, zeros), cumsum and
//! cumprod (zeros), products and exp. The loss is `sum(out * upstream)`, and each input
//! element's gradient is checked against
//!  - float64 central differences of the host's forward evaluation where the program is smooth
//!    around that element (no kink or singular point it depends on is at its edge);
//!  - elsewhere, the host's reverse pass by PyTorch's rules (`derivatives.yaml`): relu's slope
//!    at 0 is 0, abs's 0 (`grad * sgn(x)`), clamp's 0 at its bounds (as hardtanh's: the
//!    torch_ref fixture's PyTorch 2.15 gives that for `torch.clamp`), maximum and minimum split
//!    ties evenly, max and min reductions share the gradient among tied elements, sqrt's and
//!    log's `grad / (2 sqrt x)` and `grad / x` at 0, pow's base gradient 0 where the exponent is
//!    0 and its exponent gradient 0 at base 0 for exponents >= 0.
//!
//! The host's reverse pass must also match the central differences wherever they apply, so
//! its rules are checked against the mathematics they stand for.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lazygrad::runtime::DefaultDevice;
use lazygrad::{DType, Tensor};

use super::driver;
use super::program::Choices;

/// CI's programs per run.
pub const PROGRAMS: usize = 200;

/// Choice lists that once failed, replayed first, both the host's bugs: a where on a cumsum at a
/// tie (the host's cumsum element depended only on its own input element, so the tie was not
/// seen as a kink), and a log of a product of a cumsum of -0 (the host's cumsum started from +0,
/// PyTorch's and lazygrad's from the first element).
pub const REGRESSIONS: &[&[u16]] = &[
    &[
        26479, 48706, 379, 37766, 31, 43432, 1350, 23281, 11168, 55678, 44260, 8336, 0, 0, 0, 24225, 0, 13782, 0, 0, 0,
        140, 0, 0, 0, 0, 27105, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ],
    &[
        3516, 6803, 1177, 46639, 1, 50808, 1975, 14525, 0, 10878, 0, 14076, 0, 0, 0, 1247, 19, 10869, 15780, 0, 1,
        9228, 1, 28908, 0, 23317, 42949, 0, 1521, 0, 0, 1, 2251, 0, 41175, 9, 0, 0, 27763, 58007, 1657, 32821, 41648,
        1331, 0, 25825, 28255, 1, 10991, 0, 16319, 0, 0, 493, 12497, 697, 23881, 640, 13796, 24625, 10778, 39579,
    ],
];

/// Input elements checked so far against PyTorch's rules (at a kink) and against central
/// differences.
pub static AT_KINKS: AtomicUsize = AtomicUsize::new(0);
pub static SMOOTH: AtomicUsize = AtomicUsize::new(0);

/// The values inputs are drawn from.
const GRID: [f64; 9] = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0];
/// Exponents of `pow`.
const EXPONENTS: [f64; 5] = [0.0, 1.0, 2.0, 0.5, 3.0];

#[derive(Debug)]
enum Op {
    Input(usize),
    Neg(Rc<Node>),
    Exp(Rc<Node>),
    Relu(Rc<Node>),
    Abs(Rc<Node>),
    Clamp(f64, f64, Rc<Node>),
    Sqrt(Rc<Node>),
    Log(Rc<Node>),
    Pow(Rc<Node>, Rc<Node>),
    Add(Rc<Node>, Rc<Node>),
    Mul(Rc<Node>, Rc<Node>),
    Maximum(Rc<Node>, Rc<Node>),
    Minimum(Rc<Node>, Rc<Node>),
    /// `where(a < b, c, d)`.
    WhereLess(Rc<Node>, Rc<Node>, Rc<Node>, Rc<Node>),
    Sum(Rc<Node>),
    Max(Rc<Node>),
    Min(Rc<Node>),
    Prod(Rc<Node>),
    Cumsum(Rc<Node>),
    Cumprod(Rc<Node>),
}

/// A node: its op, whether it is a scalar (else a vector of the program's length), whether its
/// values are exact (grid arithmetic: a kink's test on them is exact on every device) and
/// whether they are never negative.
#[derive(Debug)]
struct Node {
    op: Op,
    scalar: bool,
    exact: bool,
    nonneg: bool,
}

/// A program: its inputs' values (vectors of one length), its output and the upstream gradient.
#[derive(Debug)]
struct Program {
    inputs: Vec<Vec<f64>>,
    root: Rc<Node>,
    upstream: Vec<f64>,
}

struct Builder<'a, 'b> {
    c: &'a mut Choices<'b>,
    len: usize,
    inputs: Vec<Vec<f64>>,
}

impl Builder<'_, '_> {
    fn node(op: Op, scalar: bool, exact: bool, nonneg: bool) -> Rc<Node> {
        Rc::new(Node { op, scalar, exact, nonneg })
    }

    /// An input vector: grid values, or exponents, or non-negative ones.
    fn input(&mut self, values: &[f64]) -> Rc<Node> {
        let v: Vec<f64> = (0..self.len).map(|_| values[self.c.pick(values.len())]).collect();
        let nonneg = v.iter().all(|x| *x >= 0.0);
        self.inputs.push(v);
        Self::node(Op::Input(self.inputs.len() - 1), false, true, nonneg)
    }

    /// A new input of grid values.
    fn leaf(&mut self) -> Rc<Node> {
        self.input(&GRID)
    }

    /// A node with exact values (a kink's operand), at most `depth` ops deep.
    fn exact(&mut self, depth: usize) -> Rc<Node> {
        for _ in 0..8 {
            let n = self.gen(depth);
            if n.exact {
                return n;
            }
        }
        self.leaf()
    }

    fn gen(&mut self, depth: usize) -> Rc<Node> {
        if depth == 0 || self.c.pick(6) == 0 {
            return self.leaf();
        }
        let d = depth - 1;
        match self.c.pick(19) {
            0 => {
                let x = self.gen(d);
                Self::node(Op::Neg(x.clone()), x.scalar, x.exact, false)
            }
            1 => {
                let x = self.gen(d);
                Self::node(Op::Exp(x.clone()), x.scalar, false, true)
            }
            2 | 3 => {
                let x = self.exact(d);
                Self::node(Op::Relu(x.clone()), x.scalar, true, true)
            }
            4 => {
                let x = self.exact(d);
                Self::node(Op::Abs(x.clone()), x.scalar, true, true)
            }
            5 => {
                let x = self.exact(d);
                let lo = [-1.0, 0.0, 0.5][self.c.pick(3)];
                let hi = lo + [0.5, 1.0, 1.5][self.c.pick(3)];
                Self::node(Op::Clamp(lo, hi, x.clone()), x.scalar, true, lo >= 0.0)
            }
            6 | 7 => {
                // sqrt of something never negative, at 0 when it is 0
                let x =
                    (0..8).map(|_| self.exact(d)).find(|n| n.nonneg).unwrap_or_else(|| self.input(&[0.0, 1.0, 2.0]));
                Self::node(Op::Sqrt(x.clone()), x.scalar, false, true)
            }
            8 => {
                let base =
                    (0..8).map(|_| self.exact(d)).find(|n| n.nonneg).unwrap_or_else(|| self.input(&[0.0, 1.0, 2.0]));
                let exponent = self.input(&EXPONENTS);
                Self::node(Op::Pow(base, exponent), false, false, true)
            }
            9..=12 => {
                let kink = self.c.pick(4);
                let (a, b) = match kink {
                    0 | 1 => (self.exact(d), self.exact(d)),
                    _ => (self.gen(d), self.gen(d)),
                };
                // a tensor with itself now and then: x * x, maximum(x, x)
                let b = if self.c.pick(4) == 0 { a.clone() } else { b };
                let (scalar, exact) = (a.scalar && b.scalar, a.exact && b.exact);
                let op = match kink {
                    0 => Op::Maximum(a.clone(), b.clone()),
                    1 => Op::Minimum(a.clone(), b.clone()),
                    2 => Op::Add(a.clone(), b.clone()),
                    _ => Op::Mul(a.clone(), b.clone()),
                };
                let nonneg = match op {
                    Op::Maximum(..) => a.nonneg || b.nonneg,
                    Op::Mul(..) => (a.nonneg && b.nonneg) || Rc::ptr_eq(&a, &b),
                    _ => a.nonneg && b.nonneg,
                };
                Self::node(op, scalar, exact, nonneg)
            }
            13 => {
                let (a, b) = (self.exact(d), self.exact(d));
                let (x, y) = (self.gen(d), self.gen(d));
                let scalar = a.scalar && b.scalar && x.scalar && y.scalar;
                let (exact, nonneg) = (x.exact && y.exact, x.nonneg && y.nonneg);
                Self::node(Op::WhereLess(a, b, x, y), scalar, exact, nonneg)
            }
            14..=16 => {
                let x = self.vector(d);
                let (exact, nonneg) = (x.exact, x.nonneg);
                let op = match self.c.pick(4) {
                    0 => Op::Sum(x),
                    1 => Op::Prod(x),
                    2 if exact => Op::Max(x),
                    _ if exact => Op::Min(x),
                    _ => Op::Sum(x),
                };
                Self::node(op, true, exact, nonneg)
            }
            _ => {
                let x = self.vector(d);
                let (exact, nonneg) = (x.exact, x.nonneg);
                let op = if self.c.pick(2) == 0 { Op::Cumsum(x) } else { Op::Cumprod(x) };
                Self::node(op, false, exact, nonneg)
            }
        }
    }

    /// A vector node (a reduction's or cumulative op's operand).
    fn vector(&mut self, depth: usize) -> Rc<Node> {
        (0..8).map(|_| self.gen(depth)).find(|n| !n.scalar).unwrap_or_else(|| self.leaf())
    }
}

/// The program `list` describes.
fn build(list: &[u16]) -> Program {
    let mut c = Choices { list, at: 0 };
    let len = 1 + c.pick(4);
    let depth = 2 + c.pick(3);
    let mut b = Builder { c: &mut c, len, inputs: vec![] };
    let mut root = b.gen(depth);
    // log at the end only: log(0) is -inf, which other ops' gradients would turn into NaN by
    // formulas PyTorch does not share (cumprod divides by its input)
    if root.nonneg && b.c.pick(3) == 0 {
        let scalar = root.scalar;
        root = Builder::node(Op::Log(root), scalar, false, false);
    }
    let n = if root.scalar { 1 } else { len };
    let upstream = (0..n).map(|_| [1.0, 2.0, -1.0, 3.0, -2.0][b.c.pick(5)]).collect();
    Program { inputs: b.inputs, root, upstream }
}

/// A host value: one element per position (one for a scalar).
type Values = Vec<f64>;

/// Element `i` of `v`, a scalar broadcast.
fn at(v: &[f64], i: usize) -> f64 {
    v[if v.len() == 1 { 0 } else { i }]
}

fn zip(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Values {
    (0..a.len().max(b.len())).map(|i| f(at(a, i), at(b, i))).collect()
}

/// The forward evaluation of every node (memoized by node), and for each node which input
/// elements it depends on (bit `input * len + position`).
struct Forward<'a> {
    inputs: &'a [Vec<f64>],
    values: std::collections::HashMap<*const Node, (Values, Vec<u64>)>,
    /// The input elements some kink or singular point at its edge depends on.
    kinked: u64,
}

impl Forward<'_> {
    fn eval(&mut self, node: &Rc<Node>) -> (Values, Vec<u64>) {
        if let Some(v) = self.values.get(&Rc::as_ptr(node)) {
            return v.clone();
        }
        let len = self.inputs[0].len();
        let (values, deps): (Values, Vec<u64>) = match &node.op {
            Op::Input(k) => (self.inputs[*k].clone(), (0..len).map(|i| 1u64 << (k * len + i)).collect()),
            Op::Neg(x) => self.map(x, |v| -v, |_| false),
            Op::Exp(x) => self.map(x, f64::exp, |_| false),
            Op::Relu(x) => self.map(x, |v| if v > 0.0 { v } else { 0.0 }, |v| v == 0.0),
            Op::Abs(x) => self.map(x, f64::abs, |v| v == 0.0),
            Op::Clamp(lo, hi, x) => {
                let (lo, hi) = (*lo, *hi);
                self.map(x, move |v| v.max(lo).min(hi), move |v| v == lo || v == hi)
            }
            Op::Sqrt(x) => self.map(x, f64::sqrt, |v| v == 0.0),
            Op::Log(x) => self.map(x, f64::ln, |v| v == 0.0),
            Op::Pow(a, b) => self.zip(a, b, f64::powf, |a, _| a == 0.0),
            Op::Add(a, b) => self.zip(a, b, |x, y| x + y, |_, _| false),
            Op::Mul(a, b) => self.zip(a, b, |x, y| x * y, |_, _| false),
            Op::Maximum(a, b) => self.zip(a, b, f64::max, |x, y| x == y),
            Op::Minimum(a, b) => self.zip(a, b, f64::min, |x, y| x == y),
            Op::WhereLess(a, b, x, y) => {
                let (cond, cond_deps) = self.zip(a, b, |u, v| (u < v) as u8 as f64, |u, v| u == v);
                let ((xv, xd), (yv, yd)) = (self.eval(x), self.eval(y));
                let n = cond.len().max(xv.len()).max(yv.len());
                let pick = |i: usize| at(&cond, i) != 0.0;
                let values = (0..n).map(|i| if pick(i) { at(&xv, i) } else { at(&yv, i) }).collect();
                let dep = |d: &[u64], i: usize| d[if d.len() == 1 { 0 } else { i }];
                let deps = (0..n).map(|i| dep(&cond_deps, i) | dep(&xd, i) | dep(&yd, i)).collect();
                (values, deps)
            }
            Op::Sum(x) | Op::Prod(x) | Op::Max(x) | Op::Min(x) => {
                let (v, d) = self.eval(x);
                let all = d.iter().fold(0, |a, b| a | b);
                let value = match &node.op {
                    // from +0, the identity (a sum of -0 alone is +0, as tinygrad's)
                    Op::Sum(_) => v.iter().fold(0.0, |a, b| a + b),
                    Op::Prod(_) => v.iter().product(),
                    Op::Max(_) => v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                    _ => v.iter().cloned().fold(f64::INFINITY, f64::min),
                };
                if matches!(node.op, Op::Max(_) | Op::Min(_)) && v.iter().filter(|&&e| e == value).count() > 1 {
                    self.kinked |= v.iter().zip(&d).filter(|(e, _)| **e == value).fold(0, |a, (_, d)| a | d);
                }
                (vec![value], vec![all])
            }
            Op::Cumsum(x) | Op::Cumprod(x) => {
                let (v, d) = self.eval(x);
                let sum = matches!(node.op, Op::Cumsum(_));
                // from the first element, as PyTorch's (a cumsum of -0 starts at -0)
                let mut values = v.clone();
                for i in 1..values.len() {
                    values[i] = if sum { values[i - 1] + v[i] } else { values[i - 1] * v[i] };
                }
                let deps = d
                    .iter()
                    .scan(0, |acc, &e| {
                        *acc |= e;
                        Some(*acc)
                    })
                    .collect();
                (values, deps)
            }
        };
        self.values.insert(Rc::as_ptr(node), (values.clone(), deps.clone()));
        (values, deps)
    }

    /// An elementwise op on `x`, whose element is at a kink where `kink` says.
    fn map(&mut self, x: &Rc<Node>, f: impl Fn(f64) -> f64, kink: impl Fn(f64) -> bool) -> (Values, Vec<u64>) {
        let (v, d) = self.eval(x);
        for (e, dep) in v.iter().zip(&d) {
            if kink(*e) {
                self.kinked |= dep;
            }
        }
        (v.iter().map(|&e| f(e)).collect(), d)
    }

    /// An elementwise op on `a` and `b` (a scalar broadcast), at a kink where `kink` says.
    fn zip(
        &mut self,
        a: &Rc<Node>,
        b: &Rc<Node>,
        f: impl Fn(f64, f64) -> f64,
        kink: impl Fn(f64, f64) -> bool,
    ) -> (Values, Vec<u64>) {
        let ((av, ad), (bv, bd)) = (self.eval(a), self.eval(b));
        let n = av.len().max(bv.len());
        let dep = |d: &[u64], i: usize| d[if d.len() == 1 { 0 } else { i }];
        let deps: Vec<u64> = (0..n).map(|i| dep(&ad, i) | dep(&bd, i)).collect();
        for (i, d) in deps.iter().enumerate() {
            if kink(at(&av, i), at(&bv, i)) {
                self.kinked |= d;
            }
        }
        (zip(&av, &bv, f), deps)
    }
}

/// The forward pass at `inputs`: the output, each node's values and the kinked input elements.
fn forward<'a>(p: &Program, inputs: &'a [Vec<f64>]) -> (Values, Forward<'a>) {
    let mut f = Forward { inputs, values: Default::default(), kinked: 0 };
    let (out, _) = f.eval(&p.root);
    (out, f)
}

/// The loss `sum(out * upstream)` at `inputs`.
fn loss(p: &Program, inputs: &[Vec<f64>]) -> f64 {
    forward(p, inputs).0.iter().zip(&p.upstream).map(|(o, u)| o * u).sum()
}

/// The nodes under `root`, each once, every node after its sources.
fn topological(root: &Rc<Node>) -> Vec<Rc<Node>> {
    fn visit(n: &Rc<Node>, seen: &mut std::collections::HashSet<*const Node>, out: &mut Vec<Rc<Node>>) {
        if !seen.insert(Rc::as_ptr(n)) {
            return;
        }
        for s in sources(n) {
            visit(s, seen, out);
        }
        out.push(n.clone());
    }
    let mut out = vec![];
    visit(root, &mut Default::default(), &mut out);
    out
}

fn sources(n: &Node) -> Vec<&Rc<Node>> {
    match &n.op {
        Op::Input(_) => vec![],
        Op::Neg(x) | Op::Exp(x) | Op::Relu(x) | Op::Abs(x) | Op::Clamp(_, _, x) | Op::Sqrt(x) | Op::Log(x) => vec![x],
        Op::Sum(x) | Op::Max(x) | Op::Min(x) | Op::Prod(x) | Op::Cumsum(x) | Op::Cumprod(x) => vec![x],
        Op::Pow(a, b) | Op::Add(a, b) | Op::Mul(a, b) | Op::Maximum(a, b) | Op::Minimum(a, b) => vec![a, b],
        Op::WhereLess(a, b, x, y) => vec![a, b, x, y],
    }
}

/// The gradient of the loss for every input element, by PyTorch's rules, from the forward pass.
fn backward(p: &Program, f: &Forward) -> Vec<Vec<f64>> {
    let len = p.inputs[0].len();
    let value = |n: &Rc<Node>| f.values[&Rc::as_ptr(n)].0.clone();
    let mut grads: std::collections::HashMap<*const Node, Values> = Default::default();
    grads.insert(Rc::as_ptr(&p.root), p.upstream.clone());
    let mut out = vec![vec![0.0; len]; p.inputs.len()];
    for node in topological(&p.root).iter().rev() {
        let Some(g) = grads.remove(&Rc::as_ptr(node)) else { continue };
        let mut give = |to: &Rc<Node>, d: Values| {
            // a scalar operand of a vector op sums its broadcast gradient
            let d = if to.scalar && d.len() > 1 { vec![d.iter().sum()] } else { d };
            let acc = grads.entry(Rc::as_ptr(to)).or_insert_with(|| vec![0.0; d.len()]);
            acc.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        };
        let each = |x: &Rc<Node>, rule: &dyn Fn(f64, f64) -> f64| -> Values {
            let xv = value(x);
            (0..g.len().max(xv.len())).map(|i| rule(at(&g, i), at(&xv, i))).collect()
        };
        match &node.op {
            Op::Input(k) => out[*k].iter_mut().zip(&g).for_each(|(o, d)| *o += d),
            Op::Neg(x) => give(x, each(x, &|g, _| -g)),
            Op::Exp(x) => give(x, each(x, &|g, v| g * v.exp())),
            Op::Relu(x) => give(x, each(x, &|g, v| if v > 0.0 { g } else { 0.0 })),
            Op::Abs(x) => give(
                x,
                each(x, &|g, v| {
                    g * if v > 0.0 {
                        1.0
                    } else if v < 0.0 {
                        -1.0
                    } else {
                        0.0
                    }
                }),
            ),
            Op::Clamp(lo, hi, x) => give(x, each(x, &|g, v| if v > *lo && v < *hi { g } else { 0.0 })),
            Op::Sqrt(x) => give(x, each(x, &|g, v| g / (2.0 * v.sqrt()))),
            Op::Log(x) => give(x, each(x, &|g, v| g / v)),
            Op::Pow(a, b) => {
                let (av, bv) = (value(a), value(b));
                let n = g.len().max(av.len()).max(bv.len());
                let (ga, gb) = (0..n)
                    .map(|i| {
                        let (g, a, b) = (at(&g, i), at(&av, i), at(&bv, i));
                        let da = if b == 0.0 { 0.0 } else { g * b * a.powf(b - 1.0) };
                        let db = if a == 0.0 && b >= 0.0 { 0.0 } else { g * a.powf(b) * a.ln() };
                        (da, db)
                    })
                    .unzip();
                give(a, ga);
                give(b, gb);
            }
            Op::Add(a, b) => {
                give(a, g.clone());
                give(b, g.clone());
            }
            Op::Mul(a, b) => {
                give(a, zip(&g, &value(b), |g, y| g * y));
                give(b, zip(&g, &value(a), |g, x| g * x));
            }
            Op::Maximum(a, b) | Op::Minimum(a, b) => {
                // the larger (smaller) operand takes the gradient, a tie splits it evenly
                let sign = if matches!(node.op, Op::Maximum(..)) { 1.0 } else { -1.0 };
                let (av, bv) = (value(a), value(b));
                let share = |x: f64, y: f64, g: f64| match (sign * (x - y)).partial_cmp(&0.0) {
                    Some(std::cmp::Ordering::Greater) => g,
                    Some(std::cmp::Ordering::Equal) => g / 2.0,
                    _ => 0.0,
                };
                let n = g.len().max(av.len()).max(bv.len());
                give(a, (0..n).map(|i| share(at(&av, i), at(&bv, i), at(&g, i))).collect());
                give(b, (0..n).map(|i| share(at(&bv, i), at(&av, i), at(&g, i))).collect());
            }
            Op::WhereLess(a, b, x, y) => {
                let cond = zip(&value(a), &value(b), |u, v| (u < v) as u8 as f64);
                let n = g.len().max(cond.len());
                give(x, (0..n).map(|i| if at(&cond, i) != 0.0 { at(&g, i) } else { 0.0 }).collect());
                give(y, (0..n).map(|i| if at(&cond, i) != 0.0 { 0.0 } else { at(&g, i) }).collect());
            }
            Op::Sum(x) => give(x, vec![g[0]; value(x).len()]),
            Op::Max(x) | Op::Min(x) => {
                let (xv, top) = (value(x), value(node)[0]);
                let ties = xv.iter().filter(|&&v| v == top).count() as f64;
                give(x, xv.iter().map(|&v| if v == top { g[0] / ties } else { 0.0 }).collect());
            }
            Op::Prod(x) => {
                let xv = value(x);
                let others = |i: usize| xv.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, v)| v).product::<f64>();
                give(x, (0..xv.len()).map(|i| g[0] * others(i)).collect());
            }
            Op::Cumsum(x) => give(x, (0..g.len()).map(|i| g[i..].iter().sum()).collect()),
            Op::Cumprod(x) => {
                let xv = value(x);
                let term = |i: usize, k: usize| (0..=k).filter(|&j| j != i).map(|j| xv[j]).product::<f64>();
                give(x, (0..xv.len()).map(|i| (i..xv.len()).map(|k| g[k] * term(i, k)).sum()).collect());
            }
        }
    }
    out
}

/// The program's loss on `device` and its gradient for every input.
fn lazygrad_gradients(p: &Program, device: &str) -> Result<(f64, Vec<Vec<f64>>), String> {
    let _device = DefaultDevice::scoped(device);
    let inputs: Vec<Tensor> = p.inputs.iter().map(|v| Tensor::from_slice(v, &[v.len()]).realize()).collect();
    let mut memo: std::collections::HashMap<*const Node, Tensor> = Default::default();
    let out = lazy(&p.root, &inputs, &mut memo);
    let loss = (&out * &Tensor::from_slice(&p.upstream, &out.shape())).sum(None, false);
    let targets: Vec<&Tensor> = inputs.iter().collect();
    let grads = loss.gradient_with(&targets, None).map_err(|e| e.to_string())?;
    let value = loss.try_to_vec::<f64>().map_err(|e| e.to_string())?[0];
    let grads = grads.iter().map(|g| g.try_to_vec::<f64>().map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    Ok((value, grads))
}

fn lazy(node: &Rc<Node>, inputs: &[Tensor], memo: &mut std::collections::HashMap<*const Node, Tensor>) -> Tensor {
    if let Some(t) = memo.get(&Rc::as_ptr(node)) {
        return t.clone();
    }
    let mut ev = |n: &Rc<Node>| lazy(n, inputs, memo);
    let t = match &node.op {
        Op::Input(k) => inputs[*k].clone(),
        Op::Neg(x) => ev(x).neg(),
        Op::Exp(x) => ev(x).exp(),
        Op::Relu(x) => ev(x).relu(),
        Op::Abs(x) => ev(x).abs(),
        Op::Clamp(lo, hi, x) => ev(x).clamp(Some(*lo), Some(*hi)),
        Op::Sqrt(x) => ev(x).sqrt(),
        Op::Log(x) => ev(x).log(),
        Op::Pow(a, b) => ev(a).pow(ev(b)),
        Op::Add(a, b) => &ev(a) + &ev(b),
        Op::Mul(a, b) => &ev(a) * &ev(b),
        Op::Maximum(a, b) => ev(a).maximum(ev(b)),
        Op::Minimum(a, b) => ev(a).minimum(ev(b)),
        Op::WhereLess(a, b, x, y) => {
            let cond = ev(a).lt(ev(b));
            cond.where_(ev(x), ev(y))
        }
        Op::Sum(x) => ev(x).sum(0, false),
        Op::Max(x) => ev(x).max(0, false),
        Op::Min(x) => ev(x).min(0, false),
        Op::Prod(x) => ev(x).prod(0, false),
        Op::Cumsum(x) => ev(x).cumsum(0),
        Op::Cumprod(x) => ev(x).cumprod(0),
    };
    memo.insert(Rc::as_ptr(node), t.clone());
    t
}

/// `got` equals `want`: NaN only NaN, an infinity only itself, a finite value within `tol`
/// relative to the larger of 1 and `|want|`.
fn agrees(got: f64, want: f64, tol: f64) -> bool {
    match () {
        _ if want.is_nan() => got.is_nan(),
        _ if want.is_infinite() => got == want,
        _ => (got - want).abs() <= tol * want.abs().max(1.0),
    }
}

/// Central differences of the host's loss for input element `(k, i)` at step `h`, where the
/// loss is finite on both sides.
fn central_difference(p: &Program, k: usize, i: usize, h: f64) -> Option<f64> {
    let moved = |by: f64| {
        let mut inputs = p.inputs.clone();
        inputs[k][i] += by;
        Some(loss(p, &inputs)).filter(|l| l.is_finite())
    };
    Some((moved(h)? - moved(-h)?) / (2.0 * h))
}

/// One program on every device: each gradient against central differences where the program is
/// smooth around the element, else against PyTorch's rules; the host's rules against the
/// differences wherever those apply.
pub fn check(list: &[u16]) -> Result<(), String> {
    let p = build(list);
    let (out, f) = forward(&p, &p.inputs);
    let want_loss: f64 = out.iter().zip(&p.upstream).map(|(o, u)| o * u).sum();
    let rules = backward(&p, &f);
    let len = p.inputs[0].len();
    let unkinked = |k: usize, i: usize| f.kinked & (1 << (k * len + i)) == 0;
    let mut want = rules.clone();
    let mut smooth = vec![vec![false; len]; rules.len()];
    for (k, input) in rules.iter().enumerate() {
        for (i, &rule) in input.iter().enumerate().filter(|&(i, _)| unkinked(k, i)) {
            let Some(fd) = central_difference(&p, k, i, 1e-6) else { continue };
            smooth[k][i] = true;
            if !agrees(rule, fd, 1e-5) {
                return Err(format!(
                    "the host's rule gives {rule} for input {k}[{i}], central differences {fd}\n{p:?}"
                ));
            }
            want[k][i] = fd;
        }
    }
    let by_fd = smooth.iter().flatten().filter(|&&s| s).count();
    SMOOTH.fetch_add(by_fd, Ordering::Relaxed);
    AT_KINKS.fetch_add(rules.len() * len - by_fd, Ordering::Relaxed);
    let devices = driver::devices().into_iter().filter(|d| super::common::supports(d, DType::FLOAT64));
    for device in devices {
        let (got_loss, got) = lazygrad_gradients(&p, device).map_err(|e| format!("{device}: {e}\n{p:?}"))?;
        if !agrees(got_loss, want_loss, 1e-9) {
            return Err(format!("{device}: the loss is {got_loss}, the host's {want_loss}\n{p:?}"));
        }
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let tol = |i: usize| if smooth[k][i] { 1e-5 } else { 1e-9 };
            if let Some(i) = (0..len).find(|&i| !agrees(g[i], w[i], tol(i))) {
                let by = if smooth[k][i] { "central differences" } else { "PyTorch's rules" };
                return Err(format!("{device}: d loss / d input {k} is {g:?}, {by} say {w:?} (element {i})\n{p:?}"));
            }
        }
    }
    Ok(())
}
