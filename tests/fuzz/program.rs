//! The fuzzer's programs: built from a list of choices (proptest shrinks the list), each node
//! with its shape, dtype and the range of its values, all small integers.

use std::rc::Rc;

use lazygrad::DType;

/// The largest tensor a program builds.
pub const MAX_NUMEL: usize = 720;

/// The choices a program is built from: each decision takes the next one (0 once they run out,
/// which always picks the simplest option), so a shorter, smaller list is a simpler program.
pub struct Choices<'a> {
    pub list: &'a [u16],
    pub at: usize,
}

impl Choices<'_> {
    /// A choice in `0..n`.
    pub fn pick(&mut self, n: usize) -> usize {
        let c = self.list.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        c as usize % n.max(1)
    }
    fn coin(&mut self) -> bool {
        self.pick(2) == 1
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Un {
    Neg,
    Abs,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bin {
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
pub enum Tail {
    Sqrt,
    Exp,
    Sin,
    Div,
}

/// A node of a program: what it computes, and its shape, dtype and value range.
#[derive(Debug)]
pub struct Node {
    pub expr: Expr,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub lo: i64,
    pub hi: i64,
}

#[derive(Debug)]
pub enum Expr {
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
pub struct Input {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub values: Vec<i64>,
}

/// A program: its inputs, its result, and optionally an assignment of the result through a view
/// of one input (`target.view(...).assign(result)`), after which that input is the output.
#[derive(Debug)]
pub struct Program {
    pub inputs: Vec<Input>,
    pub root: Rc<Node>,
    pub assign: Option<(usize, Vec<View>)>,
}

/// One step of an assignment's view of its target.
#[derive(Clone, Debug)]
pub enum View {
    Permute(Vec<usize>),
    Shrink(Vec<(usize, usize)>),
    Reshape(Vec<usize>),
}

pub const DTYPES: [DType; 12] = [
    DType::FLOAT32,
    DType::FLOAT16,
    DType::BFLOAT16,
    DType::INT32,
    DType::INT8,
    DType::UINT8,
    DType::FLOAT64,
    DType::INT16,
    DType::INT64,
    DType::UINT16,
    DType::UINT32,
    DType::UINT64,
];
pub const DIMS: [usize; 9] = [1, 2, 3, 5, 7, 1, 11, 13, 31];

/// The integers `dtype` holds exactly.
pub fn exact_range(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::FLOAT32 => (-(1 << 24), 1 << 24),
        DType::FLOAT16 => (-2048, 2048),
        DType::BFLOAT16 => (-256, 256),
        DType::FLOAT64 => (-(1 << 40), 1 << 40),
        DType::BOOL => (0, 1),
        // 64-bit integers to 2^40: the host computes in float64, and the ranges' products in i64
        d => {
            let (lo, hi) = d.int_range();
            (lo.max(-(1 << 40)) as i64, hi.min(1 << 40) as i64)
        }
    }
}

pub fn fits(dtype: DType, lo: i64, hi: i64) -> bool {
    let (a, b) = exact_range(dtype);
    a <= lo && hi <= b
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The prime factors of `n`, smallest first.
pub fn factors(mut n: usize) -> Vec<usize> {
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

pub struct Builder<'a, 'b> {
    pub c: &'a mut Choices<'b>,
    pub inputs: Vec<Input>,
}

impl Builder<'_, '_> {
    fn node(&self, expr: Expr, shape: Vec<usize>, dtype: DType, lo: i64, hi: i64) -> Rc<Node> {
        Rc::new(Node { expr, shape, dtype, lo, hi })
    }

    fn leaf(&mut self, shape: &[usize], dtype: DType) -> Rc<Node> {
        let (lo, hi) = match dtype {
            DType::BOOL => (0, 1),
            d if d.is_unsigned() => (0, [1, 3, 9][self.c.pick(3)]),
            _ => {
                let k = [1, 3, 6][self.c.pick(3)];
                (-k, k)
            }
        };
        // the values come from a generator the list seeds: they would use up the choices
        let span = (hi - lo + 1) as u64;
        let mut random = super::common::xorshift(self.c.pick(1 << 16) as u64);
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
            (d, _) if d.is_unsigned() => return None,
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
        let products = [
            a.lo.saturating_mul(b.lo),
            a.lo.saturating_mul(b.hi),
            a.hi.saturating_mul(b.lo),
            a.hi.saturating_mul(b.hi),
        ];
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
        let unsigned_ok = !dtype.is_unsigned() || lo >= 0;
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
            DType::INT32 => [DType::INT32, DType::INT8, DType::BOOL, DType::INT16][self.c.pick(4)],
            DType::UINT32 => [DType::UINT32, DType::UINT8, DType::UINT16][self.c.pick(3)],
            DType::FLOAT32 | DType::FLOAT16 | DType::BFLOAT16 | DType::FLOAT64 | DType::INT64 | DType::UINT64 => dtype,
            _ => return None,
        };
        let x = self.gen(depth - 1, &child, from);
        let (lo, hi) = (x.lo * size as i64, x.hi * size as i64);
        fits(dtype, lo, hi).then(|| self.node(Expr::Sum(axis, keepdim, x), shape.to_vec(), dtype, lo, hi))
    }

    fn matmul(&mut self, depth: usize, shape: &[usize], dtype: DType) -> Option<Rc<Node>> {
        let wide = [DType::FLOAT32, DType::INT32, DType::FLOAT16, DType::FLOAT64, DType::INT64];
        if shape.len() < 2 || !wide.contains(&dtype) {
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
            let pp = p.saturating_mul(p).saturating_mul(k as i64);
            let (lo, hi) = (-pp, pp);
            (Expr::Gram(g), lo, hi)
        } else {
            let mut a_shape = shape.to_vec();
            a_shape[r - 1] = k;
            if numel(&a_shape) > MAX_NUMEL {
                return None;
            }
            let a = self.gen(depth - 1, &a_shape, dtype);
            let b = self.gen(depth - 1, &[k, n], dtype);
            let p = a.lo.abs().max(a.hi.abs()).saturating_mul(b.lo.abs().max(b.hi.abs())).saturating_mul(k as i64);
            (Expr::Matmul(a, b), -p, p)
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
pub fn build(list: &[u16]) -> Program {
    let mut c = Choices { list, at: 0 };
    let rank = c.pick(5);
    let mut shape: Vec<usize> = (0..rank).map(|_| DIMS[c.pick(DIMS.len())]).collect();
    while numel(&shape) > MAX_NUMEL / 4 {
        shape.pop();
    }
    let assign = rank > 0 && c.pick(4) == 0;
    let dtype = if assign {
        DTYPES[c.pick(DTYPES.len())]
    } else {
        [DTYPES.as_slice(), &[DType::BOOL]].concat()[c.pick(DTYPES.len() + 1)]
    };
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
