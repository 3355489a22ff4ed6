//! The lazy `Tensor`: a handle to a UOp graph that computes only when data is asked for.

mod conv;
mod creation;
mod elementwise;
pub mod function;
mod functional;
mod gradient;
mod indexing;
mod jit;
mod join;
mod movement;
mod multi;
mod operators;
mod origin;
mod processing;
mod random;
mod ranks;
mod reduce;
mod transcendental;

use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

pub use self::{elementwise::RoundingMode, functional::Reduction};
pub use conv::{ConvOpts, Padding, PoolOpts, Spatial};
pub use creation::TensorData;
pub use elementwise::{Operand, Scalar};
pub use indexing::{Idx, PadMode, ScatterReduce, SplitSizes};
pub use jit::Jit;

use crate::dtype::{DType, Element};
use crate::engine::run_schedule;
use crate::engine::ScheduleItem;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::runtime::{buffer_view, view_buffer};
use crate::runtime::{default_device, Buffer};
use crate::schedule::{create_schedule, graph_device, lower_multi, rebind, unbind_graph, Devices, VarVals};
use crate::uop::{substitute_outside, BoundVar, Ops, UOp};

struct TensorInner {
    uop: RwLock<UOp>,
    /// Where the tensor lives; `to_` and `shard_` move it in place. `None`: where its graph
    /// says, and nowhere for a graph of constants only (`Tensor::from_graph`).
    device: RwLock<Option<&'static str>>,
    /// `None`: gradients flow if it has storage; `Some(false)`: never; `Some(true)`: always.
    requires_grad: RwLock<Option<bool>>,
    grad: RwLock<Option<Tensor>>,
}

/// A tensor's values nested by dimension (`tolist`).
#[derive(Clone, Debug, PartialEq)]
pub enum Nested<T> {
    Scalar(T),
    List(Vec<Nested<T>>),
}

impl TensorInner {
    /// Point the tensor at `new` if it still stands for `old` (another thread may have moved
    /// it on since `old` was read).
    fn replace_uop(&self, old: &UOp, new: UOp) {
        let mut slot = self.uop.write().unwrap_or_else(|e| e.into_inner());
        if *slot == *old {
            *slot = new;
        }
    }
}

/// A tensor-level constant on `device`: a CONST whose source names the device, so that equal
/// constants on two devices are two nodes (realizing one never hands the other its buffer).
/// On a tuple of devices, one such constant per device, replicated.
pub(crate) fn device_const(dtype: DType, value: crate::uop::ConstValue, device: &str) -> UOp {
    let on = |d: &str| {
        let device = UOp::new(Ops::Device, DType::VOID, vec![], crate::uop::Arg::Str(d.to_string()));
        UOp::new(Ops::Const, dtype, vec![device], crate::uop::Arg::Const(value))
    };
    match crate::runtime::device_list(device)[..] {
        [one] => on(one),
        ref many => crate::schedule::multi(many.iter().map(|d| on(d)).collect(), None),
    }
}

/// A lazy n-dimensional array. Cloning shares the tensor: realizing one clone realizes all.
#[derive(Clone)]
pub struct Tensor(Arc<TensorInner>);

/// `Err` (naming `op`) unless a tensor can hold `dtype`: one of `DType::ALL`, not VOID, INDEX,
/// a vector or a pointer type (those exist inside kernels only).
pub(crate) fn check_dtype(op: &'static str, dtype: DType) -> Result<()> {
    ensure(DType::ALL.contains(&dtype), || Error::DTypes {
        op,
        dtypes: vec![dtype],
        reason: "not a tensor dtype (bool, an int or a float)".into(),
    })
}

/// The element count of `shape`, or an error (naming `op`) if its `dtype` bytes overflow `usize`:
/// no buffer could hold them, and a wrapped size would be a buffer too small for its kernels.
pub(crate) fn checked_numel(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    n.filter(|n| n.checked_mul(dtype.itemsize()).is_some())
        .ok_or_else(|| Error::shape(op, &[shape], format!("{dtype:?} elements of this shape overflow usize bytes")))
}

/// `Err` (naming `op`) unless all `tensors` are on one device.
pub(crate) fn check_devices(op: &'static str, tensors: &[&Tensor]) -> Result<()> {
    let first = tensors.first().map(|t| t.device());
    ensure(tensors.iter().all(|t| Some(t.device()) == first), || Error::Devices {
        op,
        devices: tensors.iter().map(|t| t.device().to_string()).collect(),
    })
}

fn live_tensors() -> &'static Mutex<Vec<Weak<TensorInner>>> {
    static LIVE: OnceLock<Mutex<Vec<Weak<TensorInner>>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

impl Tensor {
    /// A tensor over the graph `uop` on `device`.
    pub fn from_uop(uop: UOp, device: &str) -> Tensor {
        Tensor::on_interned(uop, Some(crate::runtime::intern_device(device)))
    }
    /// A tensor over the graph `uop` on the device the graph names (tinygrad's `Tensor(uop)`):
    /// a buffer's, a copy's, a device constant's. A graph of constants only names none: the
    /// tensor is deviceless (`placed_device` is `None`), `realize` leaves it as it is, and reading
    /// it or building on it computes on the default device.
    pub fn from_graph(uop: UOp) -> Tensor {
        let device = graph_device(&uop).map(|d| crate::runtime::intern_device(&d));
        Tensor::on_interned(uop, device)
    }
    fn on_interned(uop: UOp, device: Option<&'static str>) -> Tensor {
        assert!(uop.shape().is_some(), "Tensor::from_uop: {} has no shape", uop.op().name());
        let inner = Arc::new(TensorInner {
            uop: RwLock::new(uop),
            device: RwLock::new(device),
            requires_grad: RwLock::new(None),
            grad: RwLock::new(None),
        });
        let mut live = live_tensors().lock().unwrap_or_else(|e| e.into_inner());
        if live.len() > 64 && live.len().is_power_of_two() {
            live.retain(|w| w.strong_count() > 0);
        }
        live.push(Arc::downgrade(&inner));
        Tensor(inner)
    }
    /// A 0-d tensor standing for bound variable `v`: a JIT input whose value changes from call
    /// to call without recompiling (`as_var` gives the variable back to build shapes with).
    pub fn from_var(v: &BoundVar) -> Tensor {
        Tensor::from_uop(v.uop().clone(), &default_device())
    }
    /// The bound variable this tensor stands for, if it is one (`from_var`).
    pub fn as_var(&self) -> Option<BoundVar> {
        BoundVar::from_uop(&self.uop())
    }
    /// The graph this tensor currently stands for.
    pub fn uop(&self) -> UOp {
        self.0.uop.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// `f` of the tensor's graph, read in place: the node is not cloned (an atomic increment and
    /// decrement, on every shape or dtype an op asks for).
    fn with_uop<R>(&self, f: impl FnOnce(&UOp) -> R) -> R {
        f(&self.0.uop.read().unwrap_or_else(|e| e.into_inner()))
    }
    /// A new tensor on the same device.
    pub(crate) fn lift(&self, uop: UOp) -> Tensor {
        Tensor::on_interned(uop, Some(self.device()))
    }
    pub fn shape(&self) -> Vec<usize> {
        self.with_uop(|u| u.sh().to_vec())
    }
    /// The sizes of the axes, symbolic where a `Variable` sets them (`shape` holds their upper
    /// bounds).
    pub fn dims(&self) -> Vec<crate::uop::Sint> {
        crate::uop::variable::dims_of(&self.uop())
    }
    /// The sizes of the axes with each variable at the value it is bound to (its largest where it
    /// is unbound): the shape of what `to_vec` and `tolist` read.
    pub fn bound_shape(&self) -> Vec<usize> {
        self.dims().iter().map(crate::uop::Sint::value).collect()
    }
    pub fn ndim(&self) -> usize {
        self.uop().sh().len()
    }
    pub fn numel(&self) -> usize {
        self.uop().sh().iter().product()
    }
    /// The device buffer holding this tensor's values when its graph is one (a buffer or a
    /// reshape of it: tinygrad's `has_buffer_identity`); `None` for values not stored as they are.
    pub fn buffer(&self) -> Option<Arc<Buffer>> {
        view_buffer(&self.uop())
    }
    pub fn dtype(&self) -> DType {
        self.with_uop(UOp::dtype)
    }
    /// Where the tensor lives: the device it was put on or its graph names, else (a deviceless
    /// tensor, `from_graph`) the default device, where it is computed.
    pub fn device(&self) -> &'static str {
        self.placed_device().unwrap_or_else(|| crate::runtime::intern_device(&default_device()))
    }
    /// The device the tensor was put on, or the one its graph names now (an assignment gives a
    /// deviceless tensor storage); `None` for a deviceless tensor (tinygrad's `device` of None).
    pub fn placed_device(&self) -> Option<&'static str> {
        let placed = *self.0.device.read().unwrap_or_else(|e| e.into_inner());
        placed.or_else(|| self.with_uop(graph_device).map(|d| crate::runtime::intern_device(&d)))
    }

    /// Compute this tensor now (and every tensor built on what it computes).
    pub fn realize(&self) -> Tensor {
        self.try_realize().unwrap_or_else(|e| panic!("realize failed: {e}"))
    }
    /// `realize`, reporting compiler and device failures as an error.
    pub fn try_realize(&self) -> Result<Tensor> {
        Tensor::realize_all(std::slice::from_ref(self))?;
        Ok(self.clone())
    }
    /// The kernels and copies that would compute these tensors (nothing runs; for inspection).
    /// Panics where `try_schedule` errs.
    pub fn schedule(tensors: &[Tensor]) -> Vec<ScheduleItem> {
        Tensor::try_schedule(tensors).or_panic()
    }
    /// `schedule`, with a malformed graph (spec checks, `uop/spec.rs`) as the error.
    pub fn try_schedule(tensors: &[Tensor]) -> Result<Vec<ScheduleItem>> {
        let bound: Vec<UOp> = tensors.iter().map(Tensor::uop).collect();
        Ok(Tensor::create_schedule(tensors, &bound, &UOp::toposort_all(&bound))?.0)
    }

    /// The schedule of `tensors` (whose nodes are `bound`, every node under them `graph`, sources
    /// first: one walk serves unbinding and the schedule cache's key), what each became, and the
    /// values of the variables bound in their graph (which the schedule holds as variables).
    fn create_schedule(
        tensors: &[Tensor],
        bound: &[UOp],
        graph: &[UOp],
    ) -> Result<(Vec<ScheduleItem>, crate::uop::UOpMap<UOp>, VarVals)> {
        let (unbound, vals) = unbind_graph(bound, graph);
        // a graph with no MULTI (the walk tells) has nothing to lower
        let lowered = match graph.iter().any(|u| u.op() == Ops::Multi) {
            true => lower_multi(&unbound)?,
            false => unbound.clone(),
        };
        // what the scheduler computes: each output, or each shard of an output on several
        // devices, with its device
        let mut devices: Vec<(UOp, &'static str)> = vec![];
        for (o, t) in lowered.iter().zip(tensors) {
            match o.op() {
                Ops::Multi => devices.extend(o.src().iter().cloned().zip(crate::runtime::device_list(t.device()))),
                _ => devices.push((o.clone(), t.device())),
            }
        }
        let (outputs, devices): (Vec<UOp>, Vec<&'static str>) = devices.into_iter().unzip();
        // the walk of `bound` serves unless unbinding or lowering changed the graph
        let walked = (outputs != bound).then(|| UOp::toposort_all(&outputs));
        let runtime =
            Devices { target_of: |d| crate::runtime::get_device(d).ok().map(|d| d.target()), default: default_device };
        let (schedule, inputs) = create_schedule(&outputs, &devices, walked.as_deref().unwrap_or(graph), runtime)?;
        let (items, stored) = crate::engine::bind(&schedule, &inputs, &outputs);
        // each tensor's graph becomes what its output (or each of its shards) was stored as
        let became = |o: &UOp| match o.op() {
            Ops::Multi => {
                let shards: Option<Vec<UOp>> = o.src().iter().map(|s| stored.get(s).cloned()).collect();
                shards.map(|s| crate::schedule::multi(s, crate::schedule::multi_axis(o)))
            }
            _ => stored.get(o).cloned(),
        };
        let becomes = bound
            .iter()
            .zip(&unbound)
            .zip(&lowered)
            .filter_map(|((b, u), l)| match vals.is_empty() {
                true => became(l).map(|v| (u.clone(), v)),
                false => became(l).map(|v| (b.clone(), rebind(&v, &vals))),
            })
            .collect();
        Ok((items, becomes, vals))
    }

    /// Whether `graph` has a tensor of at least `THREAD_MIN_WORK` elements.
    fn threadable(graph: &[UOp]) -> bool {
        let min_work = crate::codegen::opt::heuristic::THREAD_MIN_WORK;
        graph.iter().any(|u| u.shape().is_some_and(|s| s.iter().product::<usize>() >= min_work))
    }

    /// Compute several tensors in one schedule. A deviceless tensor (`from_graph` of constants)
    /// has nowhere to be stored and stays as it is (tinygrad's virtual tensors).
    pub fn realize_all(tensors: &[Tensor]) -> Result<()> {
        let placed: Vec<Tensor> = tensors.iter().filter(|t| t.placed_device().is_some()).cloned().collect();
        let tensors = &placed[..];
        let outputs: Vec<UOp> = tensors.iter().map(Tensor::uop).collect();
        let graph = UOp::toposort_all(&outputs);
        // only graphs with a tensor large enough to be split over the threads: a worker woken
        // for every small eager op would spin between them for good
        if Tensor::threadable(&graph) {
            crate::runtime::pool::wake_workers();
        }
        let (tensors, outputs) = Tensor::with_contiguous_inside(tensors, outputs, &graph);
        let (items, becomes, vals) = Tensor::create_schedule(&tensors, &outputs, &graph)?;
        // nothing to run only where nothing was scheduled: an output the cache lost the buffer of
        // was once skipped, its kernel never run
        if items.is_empty() && becomes.is_empty() {
            return Ok(());
        }
        let result = run_schedule(items, &vals);
        origin::record(&becomes);
        let _viz = crate::viz::group(|| "realized buffers into tensors".into());
        Tensor::apply_becomes(becomes);
        result
    }

    /// tinygrad's `linear_with_vars`: the kernels and copies that compute `tensors`, in order, and
    /// the values of the variables bound in their graphs. The tensors (and every live tensor that
    /// shares what is stored) point at the buffers these items fill from now on, so running them
    /// (`run_linear`) realizes the tensors.
    pub fn linear_with_vars(tensors: &[Tensor]) -> Result<(Vec<ScheduleItem>, VarVals)> {
        let outputs: Vec<UOp> = tensors.iter().map(Tensor::uop).collect();
        let graph = UOp::toposort_all(&outputs);
        let (tensors, outputs) = Tensor::with_contiguous_inside(tensors, outputs, &graph);
        let (items, becomes, vals) = Tensor::create_schedule(&tensors, &outputs, &graph)?;
        origin::record(&becomes);
        Tensor::apply_becomes(becomes);
        Ok((items, vals))
    }
    /// Run the items `linear_with_vars` gave, with the variables at `vals` (tinygrad's
    /// `run_linear`).
    pub fn run_linear(items: Vec<ScheduleItem>, vals: &VarVals) -> Result<()> {
        run_schedule(items, vals)
    }

    /// `tensors` and every other live tensor that is a CONTIGUOUS or an ASSIGN inside their
    /// graphs: a point the schedule stores anyway, so that tensor keeps what was stored (as
    /// tinygrad maps every realized node back to its tensors) instead of computing it again when
    /// it is used next (an assignment run again would write twice). `outputs` are the tensors'
    /// nodes, `graph` every node under them; returns the tensors and their nodes. Only a graph
    /// with such a node looks at the live tensors (an eager op has none; there may be many).
    fn with_contiguous_inside(tensors: &[Tensor], mut outputs: Vec<UOp>, graph: &[UOp]) -> (Vec<Tensor>, Vec<UOp>) {
        let inside: crate::uop::uop::UOpSet = graph
            .iter()
            .filter(|u| matches!(u.op(), Ops::Contiguous | Ops::Assign) && !outputs.contains(u))
            .cloned()
            .collect();
        let mut all = tensors.to_vec();
        if inside.is_empty() {
            return (all, outputs);
        }
        let live = live_tensors().lock().unwrap_or_else(|e| e.into_inner());
        for t in live.iter().filter_map(Weak::upgrade).map(Tensor) {
            let u = t.uop();
            if inside.contains(&u) {
                all.push(t);
                outputs.push(u);
            }
        }
        (all, outputs)
    }

    /// Replace realized subgraphs by their buffers in every live tensor: a tensor that is itself
    /// a realized node takes its buffer directly (an eager op's output: nothing to walk), the
    /// others go through one substitution over all their graphs together (a subgraph they share
    /// is walked once) that skips every node older than the oldest realized one (it cannot hold
    /// one; a gradient accumulated over many steps is a long chain of them).
    fn apply_becomes(mut map: crate::uop::UOpMap<UOp>) {
        let oldest = map.keys().map(UOp::serial).min().unwrap_or(0);
        let young = |u: &UOp| u.serial() >= oldest;
        let mut live: Vec<(Arc<TensorInner>, UOp)> = vec![];
        live_tensors().lock().unwrap_or_else(|e| e.into_inner()).retain(|w| {
            let Some(t) = w.upgrade() else { return false };
            // read in place: most live tensors are older than what was realized (weights, inputs),
            // and a clone of each was an atomic increment and decrement per tensor per realize
            let u = {
                let u = t.uop.read().unwrap_or_else(|e| e.into_inner());
                young(&u).then(|| u.clone())
            };
            if let Some(u) = u {
                match map.get(&u) {
                    Some(realized) => t.replace_uop(&u, realized.clone()),
                    None => live.push((t, u)),
                }
            }
            true
        });
        if live.is_empty() {
            return;
        }
        let all =
            UOp::new(Ops::Sink, DType::VOID, live.iter().map(|(_, u)| u.clone()).collect(), crate::uop::Arg::None);
        let replaced = substitute_outside(&all, &mut map, "becomes", &|u| !young(u));
        for ((t, old), new) in live.iter().zip(replaced.src()) {
            t.replace_uop(old, new.clone());
        }
    }

    /// This tensor on `device` (a lazy copy; the same tensor if already there). A tuple of
    /// devices (`"CPU:0,CPU:1"`) gets a whole copy on each (tinygrad's `to` a tuple); a tensor on
    /// several devices copied to one is gathered there.
    pub fn to(&self, device: &str) -> Tensor {
        let device = crate::runtime::canonical_device(device);
        if device == self.device() {
            return self.clone();
        }
        if device.contains(',') && !self.device().contains(',') {
            return self.shard(&crate::runtime::device_list(&device), None);
        }
        let u = self.uop();
        let copy = UOp::new(Ops::Copy, u.dtype(), vec![u], crate::uop::Arg::Str(device.clone()));
        Tensor::from_uop(copy, &device)
    }

    /// `to` in place (tinygrad's `to_`): this tensor, and its gradient, move to `device`; returns it.
    pub fn to_(&self, device: &str) -> Tensor {
        self.become_(&self.to(device), |g| g.to(device))
    }
    /// Point this tensor at `moved` (its graph and device) and its gradient at `grad` of it.
    fn become_(&self, moved: &Tensor, grad: impl Fn(&Tensor) -> Tensor) -> Tensor {
        if let Some(g) = self.grad() {
            self.set_grad(Some(grad(&g)));
        }
        *self.0.uop.write().unwrap_or_else(|e| e.into_inner()) = moved.uop();
        *self.0.device.write().unwrap_or_else(|e| e.into_inner()) = Some(moved.device());
        self.clone()
    }

    /// Opt this tensor in (`true`) or out (`false`) of gradient computation; returns it.
    pub fn requires_grad(&self, flag: bool) -> Tensor {
        *self.0.requires_grad.write().unwrap_or_else(|e| e.into_inner()) = Some(flag);
        if flag {
            origin::want(&self.grad_key());
        }
        self.clone()
    }
    /// `Some(false)` if opted out of gradients, `Some(true)` if opted in, `None` by default.
    pub fn requires_grad_flag(&self) -> Option<bool> {
        *self.0.requires_grad.read().unwrap_or_else(|e| e.into_inner())
    }
    /// The gradient `backward` accumulated, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Replace (or clear, with `None`) the accumulated gradient.
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *self.0.grad.write().unwrap_or_else(|e| e.into_inner()) = grad;
    }
    /// The same values, cut off from the graph: no gradient flows through it.
    pub fn detach(&self) -> Tensor {
        let u = self.uop();
        self.lift(UOp::new(Ops::Detach, u.dtype(), vec![u], crate::uop::Arg::None))
    }
    /// Gradients of this scalar with respect to `targets` (lazy; `.grad` is untouched).
    pub fn gradient(&self, targets: &[&Tensor]) -> Vec<Tensor> {
        self.try_gradient(targets).or_panic()
    }
    /// `gradient`, with a target the loss does not depend on reported as an error.
    pub fn try_gradient(&self, targets: &[&Tensor]) -> Result<Vec<Tensor>> {
        let wanted: std::collections::HashSet<UOp> = targets.iter().map(|t| t.grad_key()).collect();
        let grads = self.grads_for(&wanted)?;
        targets
            .iter()
            .map(|t| {
                let found = grads.get(&t.grad_key()).map(|g| t.lift(g.clone()).reshape(&t.shape()));
                // an empty tensor can be dropped from the graph (by cat or pad): its gradient is empty
                let found = found.or_else(|| (t.numel() == 0).then(|| t.zeros_like()));
                found.ok_or_else(|| {
                    Error::shape("gradient", &[&t.shape()], "the loss does not depend on the tensor of this shape")
                })
            })
            .collect()
    }
    /// tinygrad's `gradient`: the gradients of this tensor with respect to `targets`, seeded with
    /// `seed` (of this tensor's shape; ones for a scalar when `None`). A target the tensor does
    /// not depend on gets zeros; only float tensors have gradients.
    pub fn gradient_with(&self, targets: &[&Tensor], seed: Option<&Tensor>) -> Result<Vec<Tensor>> {
        if !self.dtype().is_float() || targets.iter().any(|t| !t.dtype().is_float()) {
            return Err(Error::DTypes {
                op: "gradient",
                dtypes: std::iter::once(self).chain(targets.iter().copied()).map(Tensor::dtype).collect(),
                reason: "only float tensors have gradients".into(),
            });
        }
        let seed = self.seed("gradient", seed)?;
        let wanted: std::collections::HashSet<UOp> = targets.iter().map(|t| t.grad_key()).collect();
        let grads = gradient::compute_gradient(&self.uop(), &seed.uop(), &wanted, self.device());
        let grad = |t: &&Tensor| match grads.get(&t.grad_key()) {
            Some(g) => t.lift(g.clone()).reshape(&t.shape()),
            None => t.zeros_like(),
        };
        Ok(targets.iter().map(grad).collect())
    }
    /// The gradient `op` starts from: `seed` (of this tensor's shape), or ones for a tensor of
    /// one element.
    fn seed(&self, op: &'static str, seed: Option<&Tensor>) -> Result<Tensor> {
        match seed {
            Some(s) if s.shape() == self.shape() => Ok(s.cast(self.dtype().to_float())),
            Some(s) => Err(Error::shape(op, &[&self.shape(), &s.shape()], "the seed's shape is not the tensor's")),
            None if self.numel() == 1 => Ok(self.ones_like().cast(self.dtype().to_float())),
            None => Err(Error::shape(op, &[&self.shape()], "a tensor that is not a scalar needs a seed gradient")),
        }
    }
    /// Point this tensor at `other`'s graph (tinygrad's `replace`: same shape, any dtype); returns it.
    pub fn replace(&self, other: &Tensor) -> Tensor {
        self.try_replace(other).or_panic()
    }
    /// `replace`, reporting differing shapes as an error.
    pub fn try_replace(&self, other: &Tensor) -> Result<Tensor> {
        ensure(self.shape() == other.shape(), || {
            Error::shape("replace", &[&self.shape(), &other.shape()], "shapes differ")
        })?;
        *self.0.uop.write().unwrap_or_else(|e| e.into_inner()) = other.uop();
        Ok(self.clone())
    }
    /// The node gradients are collected on: the BUFFER behind a tensor with storage (reshapes
    /// of it get folded into the graphs that use it), else the tensor's own node.
    fn grad_key(&self) -> UOp {
        let u = self.uop();
        match u.op() {
            Ops::Reshape if u.src()[0].op() == Ops::Buffer => u.src()[0].clone(),
            _ => u,
        }
    }
    fn grads_for(&self, targets: &std::collections::HashSet<UOp>) -> Result<std::collections::HashMap<UOp, UOp>> {
        if self.numel() != 1 {
            return Err(Error::shape("backward", &[&self.shape()], "the loss must be a scalar"));
        }
        let seed = self.seed("backward", None)?.uop();
        Ok(gradient::compute_gradient(&self.uop(), &seed, targets, self.device()))
    }
    /// Accumulate `d self / d t` into `t.grad()` for every live float tensor `t` this scalar
    /// depends on, as tinygrad does (parameters, inputs and intermediates alike), unless it opted
    /// out (`requires_grad(false)`).
    pub fn backward(&self) -> Tensor {
        self.backward_with(None).or_panic()
    }
    /// `backward` from `seed` (the gradient of this tensor, of its shape; ones for a tensor of
    /// one element when `None`), with a missing or misshapen seed as the error.
    pub fn backward_with(&self, seed: Option<&Tensor>) -> Result<Tensor> {
        let seed = self.seed("backward", seed)?;
        let graph: std::collections::HashSet<UOp> = gradient::gradient_graph(&self.uop()).into_iter().collect();
        let live: Vec<Tensor> = live_tensors()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .map(Tensor)
            .filter(|t| {
                let opted_out = *t.0.requires_grad.read().unwrap_or_else(|e| e.into_inner()) == Some(false);
                graph.contains(&t.grad_key()) && t.dtype().is_float() && !opted_out
            })
            .collect();
        let targets = live.iter().map(Tensor::grad_key).collect();
        let grads = gradient::compute_gradient(&self.uop(), &seed.uop(), &targets, self.device());
        for t in live {
            if let Some(g) = grads.get(&t.grad_key()) {
                let g = t.lift(g.clone()).reshape(&t.shape());
                // as in PyTorch, a stored gradient has no history of its own
                t.set_grad(Some(
                    match t.grad() {
                        Some(prev) => prev + g,
                        None => g,
                    }
                    .detach(),
                ));
            }
        }
        Ok(self.clone())
    }
    /// tinygrad's `clone`: the values in storage of their own (on `device` when given), with a
    /// copy of the gradient; writing into the clone leaves this tensor as it is.
    pub fn clone_to(&self, device: Option<&str>) -> Tensor {
        let copy = |t: &Tensor| {
            let c = t.contiguous();
            device.map_or(c.clone(), |d| c.to(d))
        };
        let out = copy(self);
        out.set_grad(self.grad().map(|g| copy(&g)));
        if let Some(flag) = self.requires_grad_flag() {
            out.requires_grad(flag);
        }
        out
    }
    /// Write `value` into this tensor's storage (in place, at the next realize); returns it. A
    /// view (reshape, transpose, slice, flip, step slice) writes into the storage it views, as in
    /// PyTorch; an expanded view of storage cannot be written (its elements share memory
    /// locations), nor padding (realizing such an assignment is an error).
    pub fn assign(&self, value: &Tensor) -> Tensor {
        self.try_assign(value).or_panic()
    }
    /// `assign`, reporting differing shapes or devices, or a target whose elements share memory
    /// (an expanded view of storage), as an error.
    pub fn try_assign(&self, value: &Tensor) -> Result<Tensor> {
        ensure(self.shape() == value.shape(), || {
            Error::shape("assign", &[&self.shape(), &value.shape()], "shapes differ")
        })?;
        check_devices("assign", &[self, value])?;
        let target = self.assign_target()?;
        let value = value.cast(self.dtype()).uop();
        let assign = UOp::new(Ops::Assign, target.dtype(), vec![target, value], crate::uop::Arg::None);
        *self.0.uop.write().unwrap_or_else(|e| e.into_inner()) = assign;
        Ok(self.clone())
    }

    /// What an assignment writes through: this tensor's node once it is storage or a view of it
    /// (RESHAPE, PERMUTE, SHRINK, FLIP, PAD of a BUFFER). A view of something not stored yet
    /// stores that first: the node under the views, or the highest EXPAND among them (`zeros` is
    /// a constant expanded), which is then the storage written. A tensor neither stored nor a
    /// view (and of a concrete shape) is written into new storage, as tinygrad's store into the
    /// tensor's graph: its value is computed from that graph in the kernel that stores it
    /// (`a += b` is `a + b`, bit for bit, not `a` stored and then added to).
    fn assign_target(&self) -> Result<UOp> {
        let u = self.uop();
        let mut chain = vec![];
        let mut base = &u;
        while matches!(base.op(), Ops::Reshape | Ops::Permute | Ops::Shrink | Ops::Flip | Ops::Pad | Ops::Expand) {
            chain.push(base);
            base = &base.src()[0];
        }
        let expand = chain.iter().find(|n| n.op() == Ops::Expand);
        // on several devices, storage is a MULTI of each device's buffer
        let stored_multi = |b: &UOp| b.op() == Ops::Multi && b.src().iter().all(|s| view_buffer(s).is_some());
        if base.op() == Ops::Buffer || stored_multi(base) {
            if let Some(e) = expand {
                return Err(Error::shape(
                    "assign",
                    &[e.src()[0].sh(), e.sh()],
                    "the target expands the first shape to the second: several of its elements are one memory location",
                ));
            }
            return Ok(u);
        }
        let concrete = self.dims().iter().all(|d| matches!(d, crate::uop::Sint::Int(_)));
        if chain.is_empty() && concrete && !self.device().contains(',') {
            let shape = self.shape();
            let storage = Buffer::new(self.device(), checked_numel("assign", &shape, self.dtype())?, self.dtype());
            return Ok(buffer_view(&Arc::new(storage), &shape));
        }
        let stored = expand.copied().unwrap_or(base);
        Tensor::from_uop(stored.clone(), self.device()).try_realize()?;
        Ok(self.uop())
    }

    /// The data as a flat `Vec<T>` in row-major order (`T` must match the dtype).
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        self.try_to_vec().or_panic()
    }
    /// `to_vec`, reporting a dtype mismatch or a failed realize as an error.
    pub fn try_to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypes {
                op: "to_vec",
                dtypes: vec![self.dtype(), T::DTYPE],
                reason: "the tensor's dtype is not the one asked for (cast first)".into(),
            });
        }
        let bytes = self.raw_bytes()?;
        Ok(bytes.chunks_exact(T::DTYPE.itemsize()).map(T::read_le).collect())
    }
    /// The contiguous data as little-endian bytes.
    pub fn raw_bytes(&self) -> Result<Vec<u8>> {
        if let [first, _, ..] = &self.devices()[..] {
            return self.to(first).raw_bytes();
        }
        let u = self.uop();
        if view_buffer(&u).is_none() {
            // a fresh CONTIGUOUS is stored for this tensor alone (an equal lazy graph elsewhere,
            // maybe on another device, is left alone); this tensor then reads that buffer, so
            // later graphs reuse the data instead of recomputing it
            let c = self.contiguous();
            c.try_realize()?;
            let view = c.uop();
            self.0.replace_uop(&u, view.clone());
            return stored_bytes(&view);
        }
        stored_bytes(&u)
    }
    /// The data nested by dimension, as tinygrad's `tolist` (a 0-d tensor gives `Scalar`).
    pub fn tolist<T: Element>(&self) -> Nested<T> {
        fn nest<T: Copy>(data: &[T], shape: &[usize]) -> Nested<T> {
            match shape.split_first() {
                None => Nested::Scalar(data[0]),
                Some((&n, rest)) => {
                    let step = rest.iter().product::<usize>();
                    Nested::List((0..n).map(|i| nest(&data[i * step..(i + 1) * step], rest)).collect())
                }
            }
        }
        nest(&self.to_vec::<T>(), &self.bound_shape())
    }
    /// The single element of a one-element tensor.
    pub fn item<T: Element>(&self) -> T {
        self.try_item().or_panic()
    }
    /// `item`, reporting a tensor of more or fewer elements, a dtype mismatch or a failed realize
    /// as an error.
    pub fn try_item<T: Element>(&self) -> Result<T> {
        let n = self.numel();
        ensure(n == 1, || Error::shape("item", &[&self.shape()], format!("the tensor has {n} elements, not one")))?;
        Ok(self.try_to_vec::<T>()?[0])
    }
}

/// The bytes of `view`, a stored tensor: a buffer or a reshape of one, or, for a tensor of
/// variable shape, the leading part of each axis of a buffer laid out for the largest shape (what
/// storing such a tensor makes), taken at the sizes its variables are bound to.
fn stored_bytes(view: &UOp) -> Result<Vec<u8>> {
    if let Some(buf) = view_buffer(view) {
        return buf.copyout();
    }
    let sizes: Vec<usize> = crate::uop::variable::dims_of(view).iter().map(|d| d.value()).collect();
    if sizes.contains(&0) {
        return Ok(vec![]);
    }
    let full = view.src().first().and_then(view_buffer).filter(|_| view.op() == Ops::Shrink);
    let starts_at_zero = view.src()[1..].iter().step_by(2).all(|s| s.const_int_value() == Some(0));
    let (Some(buf), true) = (full, starts_at_zero) else {
        return Err(Error::shape("raw_bytes", &[view.sh()], "a stored tensor that is no buffer view"));
    };
    let largest = view.src()[0].sh().to_vec();
    let bytes = buf.copyout()?;
    let item = buf.dtype().itemsize();
    // row-major over `sizes`, each element's offset in the largest shape
    let mut out = Vec::with_capacity(sizes.iter().product::<usize>() * item);
    let mut index = vec![0usize; sizes.len()];
    loop {
        let flat = index.iter().zip(&largest).fold(0, |f, (&i, &n)| f * n + i);
        out.extend_from_slice(&bytes[flat * item..(flat + 1) * item]);
        let Some(axis) = (0..sizes.len()).rev().find(|&a| index[a] + 1 < sizes[a]) else { break };
        index[axis] += 1;
        index[axis + 1..].iter_mut().for_each(|i| *i = 0);
    }
    Ok(out)
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<Tensor {:?} {:?} on {}>", self.shape(), self.dtype(), self.placed_device().unwrap_or("None"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_with_gives_zeros_for_unused_targets_and_takes_a_seed() {
        let x = Tensor::new([1.0f32, 2.0, 3.0]);
        let unused = Tensor::new([5.0f32, 6.0]);
        let g = (&x * &x).sum(None, false).gradient_with(&[&x, &unused], None).unwrap();
        assert_eq!(g[0].to_vec::<f32>(), [2.0, 4.0, 6.0]);
        assert_eq!(g[1].to_vec::<f32>(), [0.0, 0.0]);
        let seed = Tensor::new([1.0f32, 10.0, 100.0]);
        let g = (&x * 3.0).gradient_with(&[&x], Some(&seed)).unwrap();
        assert_eq!(g[0].to_vec::<f32>(), [3.0, 30.0, 300.0]);
        assert!((&x * 3.0).gradient_with(&[&x], None).is_err(), "no seed for a vector");
        let ints = Tensor::new([1i32, 2]);
        assert!(ints.sum(None, false).gradient_with(&[&ints], None).is_err(), "ints have no gradient");
    }

    #[test]
    fn only_graphs_with_a_large_tensor_wake_the_workers() {
        let threadable = |tensors: &[Tensor]| {
            Tensor::threadable(&UOp::toposort_all(&tensors.iter().map(Tensor::uop).collect::<Vec<_>>()))
        };
        let (a, b) = (Tensor::rand(&[64, 64]).realize(), Tensor::rand(&[64, 64]).realize());
        assert!(!threadable(&[(&a + &b).relu()]), "a small eager op");
        let big = Tensor::rand(&[512, 512]).realize();
        assert!(threadable(&[big.sum(None, false)]), "a small result of a large input");
        assert!(threadable(&[a.clone(), (&a + 1.0).reshape(&[1, 4096]).expand(&[16, 4096])]), "a large result");
    }
}
