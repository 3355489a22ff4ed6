//! Rangeify: how one kernel's value is expressed as index arithmetic over RANGE loops (which
//! nodes become kernels is `realize.rs`'s).
//!
//! Building a kernel is one rule-table pass, `push indices`, one rule per kind of node: the
//! stored value's *site* (the node and the index, one UOp per axis, at which it is wanted) is
//! pushed down the tensor graph, consumer first. Movement ops only transform the index: SHRINK adds an offset, PERMUTE
//! reorders, FLIP is `n-1-i`, EXPAND drops it, PAD adds a validity condition and RESHAPE
//! flattens and unflattens with `*`, `//` and `%`, which the symbolic rules fold back. The
//! engine keeps its own stack, so a graph deeper than the thread's stack builds too.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::item::Slot;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::rule;
use crate::uop::symbolic::simplify;
use crate::uop::{graph_rewrite, Arg, AxisKind, ConstValue, Kernel, Ops, PatternMatcher, Rule, UOp, UOpMap, UPat};

/// A reduce over constants only (an arange): codegen folds it into index arithmetic.
pub(super) fn is_arange(u: &UOp) -> bool {
    u.op() == Ops::ReduceAxis && !reads_memory(u)
}

/// Whether computing `u` loads from any buffer.
pub(super) fn reads_memory(u: &UOp) -> bool {
    u.toposort()
        .iter()
        .any(|n| matches!(n.op(), Ops::Buffer | Ops::Copy | Ops::AllReduce | Ops::Contiguous | Ops::Assign))
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
        flat = &flat + &(i * st as i64);
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
/// row-major, reading `bufs`, their sizes in PARAM order) transposes: when its largest input walks
/// memory along an axis other than the innermost, that axis is stored innermost instead, so the
/// kernel streams and its consumers read the layout its producer wrote (a convolution's
/// channels-last output through a bias and a ReLU stays channels last). An input counts the
/// elements the kernel reads of it, not its buffer's: a row of a table (rotary embeddings'
/// angles at one position) is small however large the table. A zero-padded copy (a convolution's
/// padded input) counts as elementwise, its input by its unpadded size: the padded output
/// gradient of a channels-last convolution is stored channels last, a straight vector copy.
pub fn storage_order(root: &UOp, ast: &UOp, bufs: &[usize]) -> Option<Vec<usize>> {
    let padded_copy = root.op() == Ops::Contiguous && root.src()[0].op() == Ops::Pad;
    let elementwise = root.op().is_alu() || root.op() == Ops::Cast || padded_copy;
    let shape = root.sh();
    let read = match padded_copy {
        true => root.src()[0].src()[0].sh(),
        false => shape,
    };
    let size: usize = read.iter().product();
    if !elementwise || bufs.iter().skip(1).all(|&b| b < size) {
        return None;
    }
    let (_, largest) = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Ops::Load)
        .filter_map(|l| {
            let index = &l.src()[0];
            let Arg::Int(slot) = index.src()[0].arg() else { return None };
            Some((bufs[*slot as usize].min(elements_walked(&index.src()[1])), index.src()[1].clone()))
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

/// How many index values `index` takes over the loops it depends on (their sizes multiplied; a
/// loop of symbolic size counts its largest).
fn elements_walked(index: &UOp) -> usize {
    let loops = index.toposort().into_iter().filter(|u| u.op() == Ops::Range);
    loops.fold(1usize, |n, r| n.saturating_mul(r.src()[0].vmax().max(1) as usize))
}

/// The buffers a schedule names (its slots), and the nodes stored so far (the slot each was
/// stored into, and the storage order of those not stored row-major), from which each next
/// kernel's AST is built.
#[derive(Default)]
pub struct Realized {
    pub slots: Vec<Slot>,
    pub buffers: HashMap<UOp, usize>,
    pub orders: HashMap<UOp, Vec<usize>>,
    /// The graph's input BUFFER nodes (`Slot::Input` positions), the position of each, and the
    /// slot of each one used.
    inputs: Vec<UOp>,
    positions: UOpMap<usize>,
    input_slots: HashMap<usize, usize>,
}

impl Realized {
    /// The slots of a graph whose input BUFFERs are `inputs` (in `Slot::Input` position order).
    pub fn new(inputs: &[UOp]) -> Realized {
        let positions = inputs.iter().enumerate().map(|(i, u)| (u.clone(), i)).collect();
        Realized { inputs: inputs.to_vec(), positions, ..Realized::default() }
    }
    /// The BUFFER node standing for `slot` in the kernel graph: an input's own, or a new slot's
    /// (its argument the slot).
    pub fn slot_node(&self, slot: usize) -> UOp {
        match &self.slots[slot] {
            Slot::Input { position, .. } => self.inputs[*position].clone(),
            Slot::New { dtype, .. } => UOp::new(Ops::Buffer, *dtype, vec![], Arg::Int(slot as i64)),
        }
    }
    /// The slot of input BUFFER node `buffer`.
    pub fn input(&mut self, buffer: &UOp) -> usize {
        let position = *self.positions.get(buffer).expect("every BUFFER of the graph is an input");
        let slots = &mut self.slots;
        *self.input_slots.entry(position).or_insert_with(|| {
            slots.push(Slot::Input { position, size: buffer_size(buffer), dtype: buffer.dtype() });
            slots.len() - 1
        })
    }
    /// A new slot of `size` elements of `dtype` on `device`.
    pub fn new_slot(&mut self, device: String, size: usize, dtype: DType) -> usize {
        self.slots.push(Slot::New { device, size, dtype });
        self.slots.len() - 1
    }
}

/// The number of elements of the buffer a BUFFER node holds.
fn buffer_size(buffer: &UOp) -> usize {
    buffer.device_buffer().expect("a BUFFER holds its buffer").numel()
}

/// The context of `push indices` while it builds one kernel: the stored nodes, the kernel's
/// slots in PARAM order (the output is PARAM 0), and its loops so far.
struct KernelCtx {
    realized: Realized,
    bufs: Vec<usize>,
    params: HashMap<usize, UOp>,
    next_range: usize,
    /// The site of the value the kernel stores: computed even if its node was stored before.
    root: Option<UOp>,
}

/// A tensor node's value at an index (one index UOp per axis), valid where `gate` holds: what
/// `push indices` rewrites into loads and index math. A tensor-level INDEX: its argument counts
/// the axes, the tensor node is its first source and a gate its last.
fn site(u: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
    let mut src = vec![u.clone()];
    src.extend(idx.iter().cloned());
    src.extend(gate);
    UOp::new(Ops::Index, u.dtype(), src, Arg::Int(idx.len() as i64))
}

/// A site over a node `node` matches (captured as "u"; the site as "site").
fn site_over(node: UPat, site: &'static str) -> UPat {
    UPat::ops(&[Ops::Index]).first_src(node).named(site)
}

/// A site's node, its index (one UOp per axis) and its gate; None for a kernel-level INDEX.
fn parts(site: &UOp) -> Option<(&UOp, &[UOp], Option<UOp>)> {
    let Arg::Int(n) = site.arg() else { return None };
    let n = *n as usize;
    Some((&site.src()[0], &site.src()[1..=n], site.src().get(n + 1).cloned()))
}

/// The rule pushing a site over a node `node` matches: `push` is given the kernel being built,
/// the node, its index and its gate.
#[track_caller]
fn push_rule(
    name: &'static str,
    node: UPat,
    push: fn(&mut KernelCtx, &UOp, &[UOp], Option<UOp>) -> Option<UOp>,
) -> Rule<KernelCtx> {
    rule!(name, |site; k: &mut KernelCtx| site_over(node, site) => {
        let (u, idx, gate) = parts(site)?;
        push(k, u, idx, gate)
    })
}

/// Index pushing, one rule per kind of node a site is over: a node stored before (but the one
/// this kernel stores) or a buffer becomes a LOAD, a constant itself, a movement op a site over
/// its source at the moved index (a PAD's also gated, and selected by its valid condition), a
/// reduce a REDUCE over new loops, an ALU op the op over its sources' sites. Applied bottom-up
/// (each site before what it becomes), so the loops are numbered in the order a recursive walk
/// would visit them: consumer, then first operand first.
static PM_PUSH_INDEX: LazyLock<PatternMatcher<KernelCtx>> = LazyLock::new(|| {
    let alu: Vec<Ops> = [Ops::UNARY, Ops::BINARY, Ops::TERNARY, &[Ops::Cast, Ops::Bitcast]].concat();
    let mut rules = vec![
        rule!("load a realized node", |site; k: &mut KernelCtx| site_over(UPat::any(), site) => {
            let (u, idx, gate) = parts(site)?;
            let slot = *k.realized.buffers.get(u).filter(|_| k.root.as_ref() != Some(site))?;
            let index = match u.op() {
                // an assignment through a view is read where it stored, in the buffer under it
                Ops::Assign if !u.src()[0].is_buffer_view() => view_store_index(&u.src()[0], idx)
                    .expect("an assignment's target view was checked when its kernel was built"),
                _ => storage_index(idx, u.sh(), k.realized.orders.get(u).map(Vec::as_slice)),
            };
            Some(k.load(slot, index, gate, u.dtype()))
        }),
        push_rule("load a buffer", UPat::ops(&[Ops::Buffer]), |k, u, idx, gate| {
            let slot = k.realized.input(u);
            Some(k.load(slot, flat_index(idx, &[buffer_size(u)]), gate, u.dtype()))
        }),
        push_rule("a constant", UPat::ops(&[Ops::Const]), |_, u, _, _| match u.arg() {
            Arg::Const(c) => Some(UOp::constant(u.dtype(), *c)),
            _ => None,
        }),
        // a scalar parameter's DEVICE stays in the tensor graph
        push_rule("a scalar parameter", UPat::ops(&[Ops::DefineVar]), |_, u, _, _| {
            Some(UOp::new(Ops::DefineVar, u.dtype(), vec![], u.arg().clone()))
        }),
        push_rule("a reduce's loops", UPat::ops(&[Ops::ReduceAxis]), KernelCtx::reduce),
        push_rule("through a copy", UPat::ops(&[Ops::Contiguous, Ops::Detach]), |_, u, idx, gate| {
            Some(site(&u.src()[0], idx, gate))
        }),
        push_rule("into an alu's sources", UPat::ops(&alu), |_, u, idx, gate| {
            Some(u.replace_src(u.src().iter().map(|s| site(s, idx, gate.clone())).collect()))
        }),
    ];
    rules.extend(Ops::MOVEMENT.iter().map(|&op| push_rule("through a movement", UPat::ops(&[op]), moved_site)));
    rules.push(push_rule("nothing else", UPat::any(), |_, u, _, _| {
        panic!("rangeify: {} cannot be part of a kernel", u.op().name())
    }));
    PatternMatcher::new(rules)
});

/// The site over movement op `u`'s source that its site at `idx` (valid where `gate` holds)
/// reads: for a PAD, gated by where the index lies inside the source and selected by it.
fn moved_site(_: &mut KernelCtx, u: &UOp, idx: &[UOp], gate: Option<UOp>) -> Option<UOp> {
    Some(match moved_index(u, idx) {
        (new_idx, None) => site(&u.src()[0], &new_idx, gate),
        (new_idx, Some(valid)) => {
            let inner_gate = match &gate {
                Some(g) => simplify(&g.and(&valid)),
                None => valid.clone(),
            };
            let inner = site(&u.src()[0], &new_idx, Some(inner_gate));
            UOp::where_(&valid, &inner, &UOp::constant(u.dtype(), ConstValue::Int(0)))
        }
    })
}

impl Realized {
    /// The AST computing `root` into slot `out`: `SINK(STORE(INDEX(PARAM0, idx), value))`, stored
    /// in `order` (row-major without one), and the slots of its PARAMs; the loops nest in storage
    /// order. With `SPEC` on, a malformed kernel is the error.
    pub fn build(&mut self, root: &UOp, out: usize, order: Option<&[usize]>) -> Result<(Kernel, Vec<usize>)> {
        let mut k = KernelCtx {
            realized: std::mem::take(self),
            bufs: vec![],
            params: HashMap::new(),
            next_range: 0,
            root: None,
        };
        let ast = k.build(root, out, order);
        *self = std::mem::take(&mut k.realized);
        Ok((Kernel::new(ast?, "rangeify")?, k.bufs))
    }
}

impl KernelCtx {
    fn build(&mut self, root: &UOp, out: usize, order: Option<&[usize]>) -> Result<UOp> {
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
        let top = site(src, &idx, None);
        self.root = (src == root).then(|| top.clone());
        let value = graph_rewrite(&top, &PM_PUSH_INDEX, self, "push indices", true);
        let index = match root.op() {
            Ops::Assign if !root.src()[0].is_buffer_view() => view_store_index(&root.src()[0], &idx)?,
            _ => storage_index(&idx, &shape, order),
        };
        Ok(UOp::sink(vec![out_param.index(&index).store(&value)]))
    }

    fn param(&mut self, slot: usize) -> UOp {
        if let Some(p) = self.params.get(&slot) {
            return p.clone();
        }
        let dtype = self.realized.slots[slot].dtype().ptr(crate::dtype::AddrSpace::Global);
        let size = UOp::index_const(self.realized.slots[slot].size() as i64);
        let p = UOp::new(Ops::Param, dtype, vec![size], Arg::Int(self.bufs.len() as i64));
        self.bufs.push(slot);
        self.params.insert(slot, p.clone());
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

    fn load(&mut self, slot: usize, index: UOp, gate: Option<UOp>, dtype: DType) -> UOp {
        let p = self.param(slot);
        match gate {
            Some(g) => p.index_gated(&index, &g).load(dtype),
            None => p.index(&index).load(dtype),
        }
    }

    /// The value of reduce `u` at `idx` (valid where `gate` holds): a REDUCE over a new loop per
    /// reduced axis (its identity where an axis is empty).
    fn reduce(&mut self, u: &UOp, idx: &[UOp], gate: Option<UOp>) -> Option<UOp> {
        let Arg::ReduceAxis(op, axes) = u.arg() else { return None };
        let old = u.src()[0].sh().to_vec();
        if axes.iter().any(|&a| old[a] == 0) {
            return Some(UOp::constant(u.dtype(), crate::codegen::lower::identity(*op, u.dtype())));
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
        let inner = site(&u.src()[0], &new_idx, gate);
        Some(match ranges.is_empty() {
            true => inner,
            false => UOp::new(Ops::Reduce, u.dtype(), [vec![inner], ranges].concat(), Arg::Reduce(*op)),
        })
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
            let at = |(&d, st): (&usize, usize)| simplify(&(&flat.idiv(st as i64) % d as i64));
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
            idx.iter().zip(starts).map(|(i, s)| simplify(&(i + &s))).collect()
        }
        (Ops::Flip, Arg::Axes(axes)) => (0..idx.len())
            .map(|i| match axes.contains(&i) {
                true => simplify(&(&UOp::index_const(old[i] as i64 - 1) + &-&idx[i])),
                false => idx[i].clone(),
            })
            .collect(),
        (Ops::Pad, Arg::Pairs(pads)) => {
            let mut valid: Option<UOp> = None;
            let mut new_idx = vec![];
            for ((i, &(before, _)), &d) in idx.iter().zip(pads).zip(old) {
                new_idx.push(simplify(&(i + -(before as i64))));
                let lo = UOp::index_const(before as i64 - 1).lt(i);
                let hi = i.lt(&ic(before + d));
                for c in [lo, hi] {
                    let c = simplify(&c);
                    if c.const_value().is_some_and(|v| v.as_bool()) {
                        continue;
                    }
                    valid = Some(match valid {
                        Some(v) => simplify(&v.and(&c)),
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

/// The flat index into the buffer under the view `target` (RESHAPE, PERMUTE, SHRINK, FLIP and
/// PAD of a BUFFER) at which the view's index `idx` lies: where an assignment through the view
/// stores. A view reaching into a PAD's padding (elements that are no memory) is an error: step
/// slicing pads, but only to a whole number of steps its view never reaches.
fn view_store_index(target: &UOp, idx: &[UOp]) -> Result<UOp> {
    let (mut u, mut idx) = (target, idx.to_vec());
    while u.op() != Ops::Buffer {
        let (new_idx, valid) = moved_index(u, &idx);
        assert!(u.op() != Ops::Expand, "assign: EXPAND in the target view");
        if valid.is_some() {
            return Err(Error::shape(
                "assign",
                &[target.sh(), u.sh()],
                "the target view reaches into the padding of a PAD, which is no memory",
            ));
        }
        (u, idx) = (&u.src()[0], new_idx);
    }
    Ok(flat_index(&idx, u.sh()))
}
