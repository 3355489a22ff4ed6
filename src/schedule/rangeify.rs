//! Rangeify: how one kernel's value is expressed as index arithmetic over RANGE loops (which
//! nodes become kernels is `realize.rs`'s).
//!
//! Building a kernel walks the tensor graph consumer-first, carrying the index (one UOp per axis)
//! at which the consumer needs a value. Movement ops only transform that index: SHRINK adds an
//! offset, PERMUTE reorders, FLIP is `n-1-i`, EXPAND drops it, PAD adds a validity condition and
//! RESHAPE flattens and unflattens with `*`, `//` and `%`, which the symbolic rules fold back.

use std::collections::HashMap;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::Buffer;
use crate::uop::spec::{self, Stage};
use crate::uop::symbolic::simplify;
use crate::uop::{Arg, AxisKind, ConstValue, Ops, UOp};

/// A BUFFER, possibly reshaped: already contiguous data, nothing to compute.
pub fn is_buffer_view(u: &UOp) -> bool {
    match u.op() {
        Ops::Buffer => true,
        Ops::Reshape => u.src()[0].op() == Ops::Buffer,
        _ => false,
    }
}

/// A reduce over constants only (an arange): codegen folds it into index arithmetic.
pub(super) fn is_arange(u: &UOp) -> bool {
    u.op() == Ops::ReduceAxis && !reads_memory(u)
}

/// Whether computing `u` loads from any buffer.
pub(super) fn reads_memory(u: &UOp) -> bool {
    u.toposort().iter().any(|n| matches!(n.op(), Ops::Buffer | Ops::Copy | Ops::Contiguous | Ops::Assign))
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// `Σ idx_i * stride_i` for a row-major `shape`, simplified.
pub fn flat_index(idx: &[UOp], shape: &[usize]) -> UOp {
    let mut flat = UOp::index_const(0);
    for (i, st) in idx.iter().zip(strides(shape)) {
        flat = flat.alu(Ops::Add, &[&i.alu(Ops::Mul, &[&UOp::index_const(st as i64)])]);
    }
    simplify(&flat)
}

/// The order in which a stored node's axes lie in memory, outermost first: row-major unless
/// `order` says otherwise (`[0, 2, 3, 1]`: an NCHW value stored channels last).
pub fn storage_index(idx: &[UOp], shape: &[usize], order: Option<&[usize]>) -> UOp {
    match order {
        Some(order) => flat_index(
            &order.iter().map(|&a| idx[a].clone()).collect::<Vec<_>>(),
            &order.iter().map(|&a| shape[a]).collect::<Vec<_>>(),
        ),
        None => flat_index(idx, shape),
    }
}

/// A storage order for an intermediate elementwise value `root` whose kernel `ast` (built
/// row-major, reading `bufs`) transposes: when its largest input walks memory along an axis
/// other than the innermost, that axis is stored innermost instead, so the kernel streams and
/// its consumers read the layout its producer wrote (a convolution's channels-last output through
/// a bias and a ReLU stays channels last).
pub fn storage_order(root: &UOp, ast: &UOp, bufs: &[Arc<Buffer>]) -> Option<Vec<usize>> {
    let elementwise = root.op().is_alu() || root.op() == Ops::Cast;
    let shape = root.sh();
    let size: usize = shape.iter().product();
    if !elementwise || bufs.iter().skip(1).all(|b| b.size() < size) {
        return None;
    }
    let (_, largest) = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Ops::Load)
        .filter_map(|l| {
            let index = &l.src()[0];
            let Arg::Int(slot) = index.src()[0].arg() else { return None };
            Some((bufs[*slot as usize].size(), index.src()[1].clone()))
        })
        .max_by_key(|(n, _)| *n)?;
    // the output loops, in the order `build` numbered them; the one that input walks with stride 1
    let axes: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] != 1).collect();
    let contiguous =
        crate::uop::symbolic::Lin::of(&largest).terms.iter().find_map(|(t, c)| match (t.op(), t.arg()) {
            (Ops::Range, Arg::Range(id, AxisKind::Loop)) if *c == 1 => axes.get(*id).copied(),
            _ => None,
        })?;
    let innermost = *axes.last()?;
    (contiguous != innermost).then(|| (0..shape.len()).filter(|&a| a != contiguous).chain([contiguous]).collect())
}

/// Builds one kernel's AST: the buffers it reads become PARAMs, everything else index math.
pub struct KernelBuilder<'a> {
    /// What each realized tensor node was stored into.
    realized: &'a HashMap<UOp, Arc<Buffer>>,
    /// The storage order of realized nodes not stored row-major.
    orders: &'a HashMap<UOp, Vec<usize>>,
    /// The kernel's buffers in PARAM order (the output is slot 0).
    pub bufs: Vec<Arc<Buffer>>,
    params: HashMap<u64, UOp>,
    memo: HashMap<Site, UOp>,
    next_range: usize,
}

impl<'a> KernelBuilder<'a> {
    pub fn new(realized: &'a HashMap<UOp, Arc<Buffer>>, orders: &'a HashMap<UOp, Vec<usize>>) -> KernelBuilder<'a> {
        KernelBuilder { realized, orders, bufs: vec![], params: HashMap::new(), memo: HashMap::new(), next_range: 0 }
    }

    /// The AST computing `root` into `out`: `SINK(STORE(INDEX(PARAM0, idx), value))`, stored in
    /// `order` (row-major without one); the loops nest in storage order.
    /// With spec checks on, the AST and the passes that simplified its indices are checked
    /// against the kernel spec (`uop/spec.rs`).
    pub fn build(self, root: &UOp, out: &Arc<Buffer>, order: Option<&[usize]>) -> Result<(UOp, Vec<Arc<Buffer>>)> {
        let Some(check) = spec::check_stage(Stage::Kernel) else { return Ok(self.build_unchecked(root, out, order)) };
        let (ast, bufs) = self.build_unchecked(root, out, order);
        check.finish()?;
        spec::verify(&ast, Stage::Kernel, "rangeify")?;
        Ok((ast, bufs))
    }

    fn build_unchecked(mut self, root: &UOp, out: &Arc<Buffer>, order: Option<&[usize]>) -> (UOp, Vec<Arc<Buffer>>) {
        let out_param = self.param(out);
        let shape = root.sh().to_vec();
        let mut idx = vec![UOp::index_const(0); shape.len()];
        let nesting: Vec<usize> = order.map_or_else(|| (0..shape.len()).collect(), <[usize]>::to_vec);
        for a in nesting {
            idx[a] = self.range(shape[a], sym_dim(root, a), AxisKind::Loop);
        }
        let src = match root.op() {
            Ops::Contiguous => &root.src()[0],
            Ops::Assign => &root.src()[1],
            _ => root,
        };
        let value = self.value(src, &idx, src == root);
        let index = match root.op() {
            Ops::Assign if !is_buffer_view(&root.src()[0]) => view_store_index(&root.src()[0], &idx),
            _ => storage_index(&idx, &shape, order),
        };
        let target = UOp::new(Ops::Index, out_param.dtype(), vec![out_param, index], Arg::None);
        let store = UOp::new(Ops::Store, DType::VOID, vec![target, value], Arg::None);
        let ast = UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None);
        crate::viz::record_transform("rangeify", root, &ast);
        (ast, self.bufs)
    }

    fn param(&mut self, buf: &Arc<Buffer>) -> UOp {
        if let Some(p) = self.params.get(&buf.id()) {
            return p.clone();
        }
        let p = UOp::new(
            Ops::Param,
            buf.dtype().ptr(crate::dtype::AddrSpace::Global),
            vec![],
            Arg::Int(self.bufs.len() as i64),
        );
        self.bufs.push(buf.clone());
        self.params.insert(buf.id(), p.clone());
        p
    }

    /// A loop over `size`, or over the symbolic size `sym` when the axis has one (the constant 0
    /// for a size-1 axis).
    fn range(&mut self, size: usize, sym: Option<UOp>, kind: AxisKind) -> UOp {
        if size == 1 && sym.is_none() {
            return UOp::index_const(0);
        }
        self.next_range += 1;
        let end = sym.unwrap_or_else(|| UOp::index_const(size as i64));
        UOp::new(Ops::Range, DType::INDEX, vec![end], Arg::Range(self.next_range - 1, kind))
    }

    fn load(&mut self, buf: &Arc<Buffer>, index: UOp, gate: Option<UOp>, dtype: DType) -> UOp {
        let p = self.param(buf);
        let mut src = vec![p.clone(), index];
        src.extend(gate);
        UOp::new(Ops::Load, dtype, vec![UOp::new(Ops::Index, p.dtype(), src, Arg::None)], Arg::None)
    }

    /// The value of tensor node `u` at index `idx` (`is_root`: `u` is what the kernel stores, so
    /// it is computed even if realized). The walk keeps its own stack: a chain of tens of
    /// thousands of lazy ops is deeper than the thread's.
    fn value(&mut self, u: &UOp, idx: &[UOp], is_root: bool) -> UOp {
        let top: Site = (u.clone(), idx.to_vec(), None);
        let mut stack: Vec<(Site, Option<Needs>)> = vec![(top.clone(), None)];
        let mut root = is_root;
        while let Some((site, planned)) = stack.pop() {
            match planned {
                None if self.memo.contains_key(&site) => {}
                None => match self.plan(&site, std::mem::take(&mut root)) {
                    Plan::Done(v) => {
                        self.memo.insert(site, v);
                    }
                    Plan::Needs(needs) => {
                        // the first source is planned first: range ids grow in the order the
                        // recursive definition visits them, consumer and first operand first
                        let todo: Vec<Site> =
                            needs.sites.iter().rev().filter(|n| !self.memo.contains_key(*n)).cloned().collect();
                        stack.push((site, Some(needs)));
                        stack.extend(todo.into_iter().map(|n| (n, None)));
                    }
                },
                Some(needs) => {
                    let values: Vec<UOp> = needs.sites.iter().map(|n| self.memo[n].clone()).collect();
                    let v = needs.finish.apply(&site.0, values);
                    self.memo.insert(site, v);
                }
            }
        }
        self.memo[&top].clone()
    }

    /// How the value of `site` is computed: directly (a load, a constant), or from the values of
    /// the sites below it.
    fn plan(&mut self, (u, idx, gate): &Site, is_root: bool) -> Plan {
        let gate = gate.clone();
        if !is_root {
            if let Some(buf) = self.realized.get(u).cloned() {
                let index = storage_index(idx, u.sh(), self.orders.get(u).map(Vec::as_slice));
                return Plan::Done(self.load(&buf, index, gate, u.dtype()));
            }
        }
        let src_shape = || u.src()[0].sh().to_vec();
        let moved =
            |new_idx: Vec<UOp>, gate: Option<UOp>| Plan::needs(vec![(u.src()[0].clone(), new_idx, gate)], Finish::Same);
        match (u.op(), u.arg()) {
            (Ops::Buffer, Arg::Buffer(_)) => {
                let b = Buffer::of(u).expect("a BUFFER node holds a runtime buffer");
                Plan::Done(self.load(&b, flat_index(idx, &[b.size()]), gate, u.dtype()))
            }
            (Ops::Const, Arg::Const(c)) => Plan::Done(UOp::constant(u.dtype(), *c)),
            (Ops::DefineVar, _) => Plan::Done(u.clone()),
            (op, _) if op.is_movement() => match moved_index(u, idx) {
                (new_idx, None) => moved(new_idx, gate),
                (new_idx, Some(valid)) => {
                    let inner_gate = match &gate {
                        Some(g) => simplify(&g.alu(Ops::And, &[&valid])),
                        None => valid.clone(),
                    };
                    Plan::needs(vec![(u.src()[0].clone(), new_idx, Some(inner_gate))], Finish::Pad(valid))
                }
            },
            (Ops::ReduceAxis, Arg::ReduceAxis(op, axes)) => {
                let old = src_shape();
                if axes.iter().any(|&a| old[a] == 0) {
                    return Plan::Done(UOp::constant(u.dtype(), crate::codegen::lower::identity(*op, u.dtype())));
                }
                let mut ranges = vec![];
                let new_idx: Vec<UOp> = (0..old.len())
                    .map(|i| {
                        if !axes.contains(&i) {
                            return idx[i].clone();
                        }
                        let r = self.range(old[i], sym_dim(&u.src()[0], i), AxisKind::Reduce);
                        if r.op() == Ops::Range {
                            ranges.push(r.clone());
                        }
                        r
                    })
                    .collect();
                let finish = if ranges.is_empty() { Finish::Same } else { Finish::Reduce(ranges) };
                Plan::needs(vec![(u.src()[0].clone(), new_idx, gate)], finish)
            }
            (Ops::Contiguous | Ops::Detach, _) => moved(idx.to_vec(), gate),
            (op, _) if op.is_alu() || op == Ops::Cast || op == Ops::Bitcast => Plan::Needs(Needs {
                sites: u.src().iter().map(|s| (s.clone(), idx.to_vec(), gate.clone())).collect(),
                finish: Finish::Alu,
            }),
            (op, _) => panic!("rangeify: {} cannot be part of a kernel", op.name()),
        }
    }
}

/// The symbolic size of axis `a` of tensor node `u`, if it has one.
fn sym_dim(u: &UOp, a: usize) -> Option<UOp> {
    u.sym_dims().and_then(|s| s[a].clone())
}

/// The index into the source of movement op `u` that its index `idx` reads, and for a PAD the
/// condition under which that index lies inside the source (`None`: always).
fn moved_index(u: &UOp, idx: &[UOp]) -> (Vec<UOp>, Option<UOp>) {
    let old = u.src()[0].sh();
    let ic = |v: usize| UOp::index_const(v as i64);
    let new_idx = match (u.op(), u.arg()) {
        (Ops::Reshape, _) => {
            let flat = flat_index(idx, u.sh());
            let at = |(&d, st): (&usize, usize)| simplify(&flat.alu(Ops::IDiv, &[&ic(st)]).alu(Ops::Mod, &[&ic(d)]));
            old.iter().zip(strides(old)).map(at).collect()
        }
        (Ops::Permute, Arg::Axes(order)) => {
            let mut new_idx = vec![UOp::index_const(0); order.len()];
            for (i, &o) in order.iter().enumerate() {
                new_idx[o] = idx[i].clone();
            }
            new_idx
        }
        (Ops::Expand, _) => idx.iter().zip(old).map(|(i, &d)| if d == 1 { ic(0) } else { i.clone() }).collect(),
        // a symbolic shrink's starts are its sources 1, 3, 5...
        (Ops::Shrink, Arg::Pairs(bounds)) => {
            let starts: Vec<UOp> = match u.src().len() {
                1 => bounds.iter().map(|(s, _)| ic(*s)).collect(),
                _ => u.src()[1..].iter().step_by(2).cloned().collect(),
            };
            idx.iter().zip(starts).map(|(i, s)| simplify(&i.alu(Ops::Add, &[&s]))).collect()
        }
        (Ops::Flip, Arg::Axes(axes)) => (0..idx.len())
            .map(|i| match axes.contains(&i) {
                true => simplify(&ic(old[i] - 1).alu(Ops::Add, &[&idx[i].alu(Ops::Neg, &[])])),
                false => idx[i].clone(),
            })
            .collect(),
        (Ops::Pad, Arg::Pairs(pads)) => {
            let mut valid: Option<UOp> = None;
            let mut new_idx = vec![];
            for ((i, &(before, _)), &d) in idx.iter().zip(pads).zip(old) {
                new_idx.push(simplify(&i.alu(Ops::Add, &[&UOp::index_const(-(before as i64))])));
                let lo = UOp::index_const(before as i64 - 1).alu(Ops::CmpLt, &[i]);
                let hi = i.alu(Ops::CmpLt, &[&ic(before + d)]);
                for c in [lo, hi] {
                    let c = simplify(&c);
                    if c.const_value().is_some_and(|v| v.as_bool()) {
                        continue;
                    }
                    valid = Some(match valid {
                        Some(v) => simplify(&v.alu(Ops::And, &[&c])),
                        None => c,
                    });
                }
            }
            return (new_idx, valid);
        }
        (op, arg) => unreachable!("{} {arg:?} is not a movement op", op.name()),
    };
    (new_idx, None)
}

/// The flat index into the buffer under the view `target` (RESHAPE, PERMUTE and SHRINK of a
/// BUFFER) at which the view's index `idx` lies: where an assignment through the view stores.
fn view_store_index(target: &UOp, idx: &[UOp]) -> UOp {
    let (mut u, mut idx) = (target, idx.to_vec());
    while u.op() != Ops::Buffer {
        let (new_idx, valid) = moved_index(u, &idx);
        assert!(valid.is_none() && u.op() != Ops::Expand, "assign: {} in the target view", u.op().name());
        (u, idx) = (&u.src()[0], new_idx);
    }
    flat_index(&idx, u.sh())
}

/// A tensor node, the index at which its value is wanted, and whether that index is valid.
type Site = (UOp, Vec<UOp>, Option<UOp>);

/// How `KernelBuilder` computes a site's value.
enum Plan {
    Done(UOp),
    Needs(Needs),
}

/// The sites whose values a site's value is computed from, and how.
struct Needs {
    sites: Vec<Site>,
    finish: Finish,
}

impl Plan {
    fn needs(sites: Vec<Site>, finish: Finish) -> Plan {
        Plan::Needs(Needs { sites, finish })
    }
}

/// How the values of a node's sources combine into its own.
enum Finish {
    /// A movement op: its source's value at the moved index.
    Same,
    /// The source's value where `valid` holds, else 0.
    Pad(UOp),
    /// A reduce over these loops.
    Reduce(Vec<UOp>),
    /// The node itself over the values of its sources.
    Alu,
}

impl Finish {
    fn apply(self, u: &UOp, mut values: Vec<UOp>) -> UOp {
        match (self, u.arg()) {
            (Finish::Same, _) => values.swap_remove(0),
            (Finish::Pad(valid), _) => UOp::where_(&valid, &values[0], &UOp::constant(u.dtype(), ConstValue::Int(0))),
            (Finish::Reduce(ranges), Arg::ReduceAxis(op, _)) => {
                values.extend(ranges);
                UOp::new(Ops::Reduce, u.dtype(), values, Arg::Reduce(*op))
            }
            (Finish::Reduce(_), _) => unreachable!("only a REDUCE_AXIS reduces"),
            (Finish::Alu, _) => u.replace_src(values),
        }
    }
}
