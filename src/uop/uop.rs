//! `UOp`: the one IR node. Interned globally, so equal content means the same `Arc`.

use std::any::Any;
use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::ops::Ops;
use crate::dtype::DType;
pub use crate::helpers::hasher::FastHasher;

/// A constant scalar. Integers of every width are held as `i64` (a `u64` keeps its bit
/// pattern); equality and hashing of floats are by bits, so `NaN` consts intern too.
#[derive(Clone, Copy, Debug)]
pub enum ConstValue {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl ConstValue {
    pub fn as_f64(self) -> f64 {
        match self {
            ConstValue::Bool(b) => b as u8 as f64,
            ConstValue::Int(i) => i as f64,
            ConstValue::Float(f) => f,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            ConstValue::Bool(b) => b as i64,
            ConstValue::Int(i) => i,
            ConstValue::Float(f) => f as i64,
        }
    }
    pub fn as_bool(self) -> bool {
        match self {
            ConstValue::Bool(b) => b,
            ConstValue::Int(i) => i != 0,
            ConstValue::Float(f) => f != 0.0,
        }
    }
    fn key(self) -> (u8, u64) {
        match self {
            ConstValue::Bool(b) => (0, b as u64),
            ConstValue::Int(i) => (1, i as u64),
            ConstValue::Float(f) => (2, f.to_bits()),
        }
    }
}

impl PartialEq for ConstValue {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for ConstValue {}
impl Hash for ConstValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}
impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstValue::Bool(b) => write!(f, "{b}"),
            ConstValue::Int(i) => write!(f, "{i}"),
            ConstValue::Float(x) => write!(f, "{x:?}"),
        }
    }
}

/// What kind of loop a RANGE is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum AxisKind {
    /// An output axis.
    Loop,
    /// An axis summed (or maxed) away.
    Reduce,
    /// Part of an output axis computed by unrolled copies in one iteration (register tiling).
    Upcast,
    /// Part of a reduce axis whose iterations are unrolled into one loop step.
    Unroll,
    /// Part of an output axis spread over the threads of a workgroup (GPU local dims).
    Local,
    /// Part of a reduce axis spread over the threads of a workgroup, each reducing its share,
    /// the shares then combined through shared memory.
    GroupReduce,
    /// The lanes of a warp that run a tensor-core instruction together (`uop/wmma.rs`): always
    /// the innermost thread dim, so that they are consecutive threads.
    Warp,
}

/// What a SPECIAL index is: one of the launch's indices, or a stand-in for a bounded expression.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Special {
    /// The CPU thread's core id (the THREAD opt).
    Core,
    /// Workgroup index in launch dim `n` (0 is the fastest-varying, x).
    Group(usize),
    /// Thread index inside the workgroup in launch dim `n`.
    Local(usize),
    /// A stand-in the valid simplifier puts in place of its `n`-th bounded expression.
    StandIn(usize),
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Special::Core => write!(f, "core_id"),
            Special::Group(n) => write!(f, "gidx{n}"),
            Special::Local(n) => write!(f, "lidx{n}"),
            Special::StandIn(n) => write!(f, "valid{n}"),
        }
    }
}

/// How a STORE writes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum StoreMode {
    /// Around the caches (non-temporal): the output is too large to stay in them.
    Stream,
}

/// A named tensor function whose gradient autograd takes from its own rule (CALL).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Call {
    Matmul,
    Conv,
    Exp,
    Expm1,
    Log1p,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Erfc,
}

/// The non-graph payload of a UOp.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Arg {
    None,
    Const(ConstValue),
    /// PARAM slot, DEFINE_REG id.
    Int(i64),
    /// RESHAPE and EXPAND target shape.
    Shape(Vec<usize>),
    /// PERMUTE order, FLIP axes.
    Axes(Vec<usize>),
    /// PAD (before, after) and SHRINK (start, end) per axis.
    Pairs(Vec<(usize, usize)>),
    /// REDUCE_AXIS: the reduce op and the axes it reduces.
    ReduceAxis(Ops, Vec<usize>),
    /// Kernel-level REDUCE: the reduce op.
    Reduce(Ops),
    /// RANGE: id unique in its kernel, and kind.
    Range(usize, AxisKind),
    /// BUFFER: the device buffer the node stands for.
    Buffer(BufferRef),
    /// COPY destination device.
    Str(String),
    /// SPECIAL: which index.
    Special(Special),
    /// STORE: how it writes (a plain store has `None`).
    Store(StoreMode),
    /// CALL: the function and its integer parameters (a conv's groups, strides, pads).
    Call(Call, Vec<isize>),
    /// SINK of a kernel launched without local dims (the NOLOCALS opt): no LOCAL or GROUP may
    /// follow, and each workgroup is one thread.
    NoLocals,
    /// WMMA: the tensor-core instruction.
    Wmma(&'static super::wmma::TensorCore),
    /// CALL of a traced tensor function (`tensor::function`).
    Function(super::function::FunctionRef),
    /// DEFINE_VAR: the variable's name and the range its values lie in (inclusive).
    Var(String, i64, i64),
}

/// Something an argument holds by identity: a device buffer, a traced function.
pub trait Identified {
    /// Unique in the process: what a `Shared` of it hashes by.
    fn id(&self) -> u64;
    /// How it prints in an argument.
    fn describe(&self) -> String;
}

/// A shared object in an argument, compared and hashed by identity.
pub struct Shared<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}
impl<T: ?Sized> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl<T: ?Sized> Eq for Shared<T> {}
impl<T: Identified + ?Sized> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id().hash(state)
    }
}
impl<T: Identified + ?Sized> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.describe())
    }
}

/// A device buffer as the IR sees it: an identity, a device and a length. The runtime's `Buffer`
/// is the one implementation; the layers above it take it back with `Buffer::of` (the IR, beneath
/// every layer, does not name the one that allocates memory).
pub trait DeviceBuffer: Identified + Any + Send + Sync {
    /// Number of elements.
    fn numel(&self) -> usize;
    /// The device it is on.
    fn device(&self) -> &'static str;
}

impl UOp {
    /// The device buffer a BUFFER node stands for.
    pub fn device_buffer(&self) -> Option<&dyn DeviceBuffer> {
        match self.arg() {
            Arg::Buffer(b) => Some(&*b.0),
            _ => None,
        }
    }
}

/// The device buffer a BUFFER node stands for.
pub type BufferRef = Shared<dyn DeviceBuffer>;

/// FNV-1a: a hasher whose output is stable across runs, for content keys and disk caches.
#[derive(Default)]
pub struct StableHasher(u64);

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A map keyed by UOps (hashed by address with `FastHasher`).
pub type UOpMap<V> = HashMap<UOp, V, BuildHasherDefault<FastHasher>>;
/// A set of UOps (hashed by address with `FastHasher`).
pub type UOpSet = HashSet<UOp, BuildHasherDefault<FastHasher>>;

/// The nodes a walk over a graph makes room for at the start: an eager op's graph fits, where
/// growing from empty rehashed four times (a twentieth of a small op's time went to rehashing).
pub(crate) const SMALL_GRAPH: usize = 32;

/// Stable 64-bit hash of any hashable value.
pub fn stable_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = StableHasher::default();
    value.hash(&mut h);
    h.finish()
}

/// The interned node behind a `UOp`.
pub struct Node {
    pub op: Ops,
    pub dtype: DType,
    pub src: Vec<UOp>,
    pub arg: Arg,
    key: u64,
    serial: u64,
    shape: OnceLock<Option<Vec<usize>>>,
    sym_dims: OnceLock<Option<Vec<Option<UOp>>>>,
    bounds: OnceLock<(i128, i128)>,
}

/// A micro-op: an immutable, interned graph node. Clone is an `Arc` clone; `==` and hashing are
/// by pointer.
#[derive(Clone)]
pub struct UOp(Arc<Node>);

const SHARDS: usize = 64;
type Bucket = HashMap<u64, Chain, BuildHasherDefault<FastHasher>>;

/// The nodes whose content hashes to one key: nearly always one, held inline (a `Vec` per key
/// was a heap allocation and a free in every node's life).
enum Chain {
    One(Weak<Node>),
    Many(Vec<Weak<Node>>),
}

impl Chain {
    fn nodes(&self) -> &[Weak<Node>] {
        match self {
            Chain::One(node) => std::slice::from_ref(node),
            Chain::Many(nodes) => nodes,
        }
    }
    fn push(&mut self, node: Weak<Node>) {
        match self {
            Chain::One(first) => *self = Chain::Many(vec![first.clone(), node]),
            Chain::Many(nodes) => nodes.push(node),
        }
    }
    /// Forget the node at `node`; whether none is left.
    fn remove(&mut self, node: *const Node) -> bool {
        match self {
            Chain::One(only) => only.as_ptr() == node,
            Chain::Many(nodes) => {
                nodes.retain(|w| w.as_ptr() != node);
                nodes.is_empty()
            }
        }
    }
}

fn table() -> &'static [Mutex<Bucket>; SHARDS] {
    static TABLE: OnceLock<[Mutex<Bucket>; SHARDS]> = OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|_| Mutex::new(Bucket::default())))
}

fn shard(key: u64) -> &'static Mutex<Bucket> {
    &table()[(key as usize ^ (key >> 32) as usize) % SHARDS]
}

/// A handle on a UOp that does not keep it alive, compared and hashed by the node's address.
/// While any `WeakUOp` of a node exists its allocation is kept, so the address cannot be taken by
/// another node: equal addresses mean the same node. (VIZ names nodes by it without holding them.)
#[derive(Clone)]
pub struct WeakUOp(Weak<Node>);

impl PartialEq for WeakUOp {
    fn eq(&self, other: &Self) -> bool {
        Weak::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for WeakUOp {}
impl WeakUOp {
    /// Whether the node still exists.
    pub fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}
impl Hash for WeakUOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_ptr().hash(state)
    }
}

impl UOp {
    /// The one constructor: returns the existing node if `(op, dtype, src, arg)` was built before.
    pub fn new(op: Ops, dtype: DType, src: Vec<UOp>, arg: Arg) -> UOp {
        let mut h = FastHasher::default();
        (op, dtype.scalar, dtype.count, dtype.ptr.map(|p| p as u8), &arg).hash(&mut h);
        for s in &src {
            s.0.key.hash(&mut h);
        }
        let key = h.finish();
        // Nodes upgraded but not matching are dropped after the lock is released: dropping the
        // last handle of a node takes the same lock.
        let mut mismatches = vec![];
        let mut map = shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let chain = map.entry(key);
        let known = match &chain {
            Entry::Occupied(nodes) => nodes.get().nodes(),
            Entry::Vacant(_) => &[],
        };
        for weak in known {
            if let Some(node) = weak.upgrade() {
                if node.op == op
                    && node.dtype == dtype
                    && node.arg == arg
                    && node.src.len() == src.len()
                    && node.src.iter().zip(&src).all(|(a, b)| a == b)
                {
                    drop(map);
                    return UOp(node);
                }
                mismatches.push(node);
            }
        }
        static CREATED: AtomicU64 = AtomicU64::new(0);
        let serial = CREATED.fetch_add(1, Ordering::Relaxed);
        let node = Arc::new(Node {
            op,
            dtype,
            src,
            arg,
            key,
            serial,
            shape: OnceLock::new(),
            sym_dims: OnceLock::new(),
            bounds: OnceLock::new(),
        });
        match chain {
            Entry::Occupied(mut nodes) => nodes.get_mut().push(Arc::downgrade(&node)),
            Entry::Vacant(slot) => {
                slot.insert(Chain::One(Arc::downgrade(&node)));
            }
        }
        UOp(node)
    }

    /// A handle that does not keep this node alive.
    pub fn downgrade(&self) -> WeakUOp {
        WeakUOp(Arc::downgrade(&self.0))
    }
    pub fn op(&self) -> Ops {
        self.0.op
    }
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    pub fn src(&self) -> &[UOp] {
        &self.0.src
    }
    pub fn arg(&self) -> &Arg {
        &self.0.arg
    }
    /// Content hash: the same for the same graph in any run (buffers hash by id).
    pub fn key(&self) -> u64 {
        self.0.key
    }
    /// When the node was made, counting every node made in the process. A node's sources are
    /// older than it, so a graph holds no node younger than its root.
    pub fn serial(&self) -> u64 {
        self.0.serial
    }
    /// This node with other sources (interned like any other).
    pub fn replace_src(&self, src: Vec<UOp>) -> UOp {
        if src.len() == self.0.src.len() && src.iter().zip(&self.0.src).all(|(a, b)| a == b) {
            return self.clone();
        }
        UOp::new(self.op(), self.dtype(), src, self.arg().clone())
    }

    /// The constant `value` of `dtype`, normalized to the dtype's representation.
    pub fn constant(dtype: DType, value: ConstValue) -> UOp {
        UOp::new(Ops::Const, dtype, vec![], Arg::Const(super::exec::cast_const(value, dtype.base())))
    }
    pub fn const_int(dtype: DType, value: i64) -> UOp {
        UOp::constant(dtype, ConstValue::Int(value))
    }
    pub fn const_float(dtype: DType, value: f64) -> UOp {
        UOp::constant(dtype, ConstValue::Float(value))
    }
    pub fn index_const(value: i64) -> UOp {
        UOp::const_int(DType::INDEX, value)
    }
    /// The const value if this is a CONST.
    pub fn const_value(&self) -> Option<ConstValue> {
        match (&self.0.op, &self.0.arg) {
            (Ops::Const, Arg::Const(c)) => Some(*c),
            _ => None,
        }
    }
    /// The integer value if this is an integer CONST.
    pub fn const_int_value(&self) -> Option<i64> {
        self.const_value().filter(|_| !self.dtype().is_float()).map(|c| c.as_i64())
    }

    /// An ALU op on `self` and `rest`; comparisons give bool, others keep `self`'s dtype.
    pub fn alu(&self, op: Ops, rest: &[&UOp]) -> UOp {
        let dtype = if op.is_comparison() {
            DType::BOOL.vec(self.dtype().count)
        } else if op == Ops::Where {
            rest[0].dtype()
        } else {
            self.dtype()
        };
        let mut src = vec![self.clone()];
        src.extend(rest.iter().map(|u| (*u).clone()));
        UOp::new(op, dtype, src, Arg::None)
    }
    /// A movement op (RESHAPE, PERMUTE, EXPAND, ...) of this node with `arg`, its dtype kept.
    pub fn movement(&self, op: Ops, arg: Arg) -> UOp {
        UOp::new(op, self.dtype(), vec![self.clone()], arg)
    }
    /// A const of this node's dtype.
    pub fn const_like(&self, value: ConstValue) -> UOp {
        UOp::constant(self.dtype(), value)
    }
    /// A BUFFER, possibly reshaped: already contiguous data, nothing to compute.
    pub fn is_buffer_view(&self) -> bool {
        match self.op() {
            Ops::Buffer => true,
            Ops::Reshape => self.src()[0].op() == Ops::Buffer,
            _ => false,
        }
    }
    /// The node under this one's movement ops and DETACH: what a view views (tinygrad's `base`).
    pub fn base(&self) -> UOp {
        match self.op() {
            op if op.is_movement() || op == Ops::Detach => self.src()[0].base(),
            _ => self.clone(),
        }
    }
    pub fn cast(&self, dtype: DType) -> UOp {
        if self.dtype() == dtype {
            return self.clone();
        }
        UOp::new(Ops::Cast, dtype, vec![self.clone()], Arg::None)
    }
    /// `cond ? self : other`.
    pub fn where_(cond: &UOp, a: &UOp, b: &UOp) -> UOp {
        cond.alu(Ops::Where, &[a, b])
    }
    /// A SINK of `src`: the root of several graphs (a schedule's outputs, a kernel's stores).
    pub fn sink(src: Vec<UOp>) -> UOp {
        UOp::new(Ops::Sink, DType::VOID, src, Arg::None)
    }

    /// Every node reachable from `self`, sources before users.
    pub fn toposort(&self) -> Vec<UOp> {
        self.toposort_with(|_| None)
    }
    /// `toposort` of the graph in which each node also depends on `more(node)`, if any.
    pub fn toposort_with(&self, more: impl Fn(&UOp) -> Option<UOp>) -> Vec<UOp> {
        toposort_from(std::slice::from_ref(self), more)
    }
    /// Every node reachable from `roots`, sources before users: the `toposort` of a SINK of them
    /// without building (and interning) the SINK.
    pub fn toposort_all(roots: &[UOp]) -> Vec<UOp> {
        toposort_from(roots, |_| None)
    }
}

/// What a walk marks and stacks, kept between walks on a thread: a small walk (every eager op
/// makes several) then allocates only its result.
#[derive(Default)]
struct Walk {
    seen: HashSet<*const Node, BuildHasherDefault<FastHasher>>,
    stack: Vec<(UOp, bool)>,
}

thread_local! {
    static WALK: RefCell<Walk> = RefCell::new(Walk::default());
}

/// The nodes reachable from `roots` (each also depending on `more(node)`), sources before users.
/// Nodes are marked seen by address and moved, not cloned, from the stack into the order: each
/// clone is an atomic increment and its drop a decrement, which were most of a small walk's time.
fn toposort_from(roots: &[UOp], more: impl Fn(&UOp) -> Option<UOp>) -> Vec<UOp> {
    WALK.with(|walk| match walk.try_borrow_mut() {
        Ok(mut walk) => {
            // emptied before (a panic in `more` may have left it full) and after (a large walk's
            // room is not kept)
            walk.seen.clear();
            walk.stack.clear();
            let order = walk_from(&mut walk, roots, &more);
            match walk.seen.capacity() > 1 << 12 {
                true => *walk = Walk::default(),
                false => walk.seen.clear(),
            }
            order
        }
        // a walk inside `more` of another: room of its own
        Err(_) => walk_from(&mut Walk::default(), roots, &more),
    })
}

fn walk_from(walk: &mut Walk, roots: &[UOp], more: &impl Fn(&UOp) -> Option<UOp>) -> Vec<UOp> {
    let Walk { seen, stack } = walk;
    let mut order = Vec::with_capacity(SMALL_GRAPH);
    stack.extend(roots.iter().rev().map(|r| (r.clone(), false)));
    while let Some((u, expanded)) = stack.pop() {
        if expanded {
            order.push(u);
            continue;
        }
        if !seen.insert(Arc::as_ptr(&u.0)) {
            continue;
        }
        let (extra, sources) = (more(&u), u.src().len());
        stack.push((u, true));
        let node = stack.len() - 1;
        stack.extend(extra.filter(|e| !seen.contains(&Arc::as_ptr(&e.0))).map(|e| (e, false)));
        for k in (0..sources).rev() {
            let s = &stack[node].0.src()[k];
            if !seen.contains(&Arc::as_ptr(&s.0)) {
                let s = s.clone();
                stack.push((s, false));
            }
        }
    }
    order
}

impl UOp {
    /// Tensor-level shape, derived from the sources and cached. `None` for kernel-level nodes.
    pub fn shape(&self) -> Option<&[usize]> {
        self.0.shape.get_or_init(|| super::shape::derive_shape(self)).as_deref()
    }
    /// The symbolic sizes of a tensor node's axes (`None` for an axis whose size is its shape's
    /// number); `None` when every axis is a number. The shape holds their upper bounds.
    pub fn sym_dims(&self) -> Option<&[Option<UOp>]> {
        // sources first, without recursion: a lazy chain can be deeper than the stack
        let mut stack = vec![(self.clone(), false)];
        while let Some((u, ready)) = stack.pop() {
            if u.0.sym_dims.get().is_some() {
                continue;
            }
            if ready {
                let _ = u.0.sym_dims.set(super::shape::derive_sym_dims(&u));
                continue;
            }
            stack.push((u.clone(), true));
            stack.extend(u.src().iter().filter(|s| s.0.sym_dims.get().is_none()).map(|s| (s.clone(), false)));
        }
        self.0.sym_dims.get().and_then(Option::as_deref)
    }
    /// The shape, panicking with the op's name for a node that has none.
    pub fn sh(&self) -> &[usize] {
        self.shape().unwrap_or_else(|| panic!("{} has no shape", self.op().name()))
    }

    /// Lower and upper bound of an integer or bool value (cached).
    pub fn bounds(&self) -> (i128, i128) {
        *self.0.bounds.get_or_init(|| super::bounds::derive_bounds(self))
    }
    pub fn vmin(&self) -> i128 {
        self.bounds().0
    }
    pub fn vmax(&self) -> i128 {
        self.bounds().1
    }
}

impl PartialEq for UOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for UOp {}
impl Hash for UOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as usize).hash(state)
    }
}

thread_local! {
    /// Sources of nodes being dropped; drained iteratively so deep graphs can't overflow the stack.
    static DROP_QUEUE: RefCell<Option<Vec<UOp>>> = const { RefCell::new(None) };
}

impl Drop for Node {
    fn drop(&mut self) {
        {
            let mut map = shard(self.key).lock().unwrap_or_else(|e| e.into_inner());
            let me = self as *const Node;
            if map.get_mut(&self.key).is_some_and(|chain| chain.remove(me)) {
                map.remove(&self.key);
            }
        }
        let src = std::mem::take(&mut self.src);
        if src.is_empty() {
            return;
        }
        // the sources move into the queue (a clone there and a drop here were two more atomic
        // operations per edge); the first node dropped lends its sources' vector as the queue
        // a node dropped while its thread exits (held by another thread-local) may find the
        // queue gone: its sources then drop here, recursively
        let draining = DROP_QUEUE.try_with(|q| {
            let mut q = q.borrow_mut();
            match q.as_mut() {
                Some(queue) => {
                    queue.extend(src);
                    true
                }
                None => {
                    *q = Some(src);
                    false
                }
            }
        });
        if draining != Ok(false) {
            return;
        }
        while let Some(u) = DROP_QUEUE.try_with(|q| q.borrow_mut().as_mut().and_then(|v| v.pop())).ok().flatten() {
            drop(u);
        }
        let _ = DROP_QUEUE.try_with(|q| *q.borrow_mut() = None);
    }
}

impl fmt::Debug for UOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", super::print::render_tree(self))
    }
}

/// Number of live interned nodes (for tests of the interning table).
pub fn live_nodes() -> usize {
    table()
        .iter()
        .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).values().map(|chain| chain.nodes().len()).sum::<usize>())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_returns_the_same_arc() {
        let a = UOp::index_const(3);
        let b = UOp::index_const(3);
        assert_eq!(a, b);
        let x = a.alu(Ops::Add, &[&b]);
        let y = b.alu(Ops::Add, &[&a]);
        assert_eq!(x, y);
        assert_ne!(x, a.alu(Ops::Mul, &[&b]));
        assert_eq!(x.key(), y.key());
    }

    /// Nodes are freed with their last handle, a root directly and its sources through the drop
    /// queue, and a thread's locals holding nodes drop them as it exits.
    #[test]
    fn nodes_are_freed_with_their_last_handle() {
        thread_local! {
            static HELD: RefCell<Option<UOp>> = const { RefCell::new(None) };
        }
        let gone =
            |k: u64| shard(k).lock().unwrap().get(&k).is_none_or(|b| b.nodes().iter().all(|w| w.upgrade().is_none()));
        let (root, leaf) =
            (UOp::const_int(DType::INT64, 987_654_321_123), UOp::const_int(DType::INT64, 123_456_789_987));
        let (root_key, leaf_key) = (root.key(), leaf.key());
        let top = leaf.alu(Ops::Neg, &[]).alu(Ops::Add, &[&leaf]);
        drop((root, leaf, top));
        assert!(gone(root_key) && gone(leaf_key));
        let held = std::thread::spawn(|| {
            let chain = UOp::const_int(DType::INT64, 555_555_555).alu(Ops::Neg, &[]).alu(Ops::Neg, &[]);
            let key = chain.src()[0].src()[0].key();
            HELD.with(|h| *h.borrow_mut() = Some(chain));
            // the drop queue made after HELD: a thread's locals go in the reverse order
            drop(UOp::const_int(DType::INT64, 666_666_666).alu(Ops::Neg, &[]));
            key
        });
        assert!(gone(held.join().expect("the thread exits, its nodes dropped")));
    }

    #[test]
    fn a_walk_sees_every_node_after_one_that_panicked_and_inside_another() {
        let a = UOp::const_int(DType::INT64, 424_242);
        let b = a.alu(Ops::Neg, &[]);
        let c = b.alu(Ops::Add, &[&a]);
        let stop_at_neg = |u: &UOp| if u.op() == Ops::Neg { panic!("a walk stopped halfway") } else { None };
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.toposort_with(stop_at_neg))).is_err());
        assert_eq!(c.toposort(), [a.clone(), b.clone(), c.clone()]);
        let nested = c.toposort_with(|u| {
            assert_eq!(u.toposort().last(), Some(u));
            None
        });
        assert_eq!(nested, [a, b, c]);
    }

    #[test]
    fn deep_chains_drop_without_overflow() {
        let mut x = UOp::const_int(DType::INT32, 1);
        for _ in 0..200_000 {
            x = x.alu(Ops::Neg, &[]);
        }
        drop(x);
    }

    #[test]
    fn interning_is_thread_safe() {
        let handles: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..2000).map(|i| UOp::index_const(i % 50)).collect::<Vec<_>>()))
            .collect();
        let results: Vec<Vec<UOp>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for r in &results[1..] {
            assert!(r.iter().zip(&results[0]).all(|(a, b)| a == b));
        }
    }
}
