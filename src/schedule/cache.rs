//! The schedule cache: a graph scheduled once is not scheduled again.
//!
//! The key is the outputs' graph with every BUFFER replaced by its position among the graph's
//! buffers (with its device, size and dtype) and every CONTIGUOUS's id by its position among the
//! CONTIGUOUS nodes: a training step rebuilt over new input batches is the same key. The entry
//! is the schedule itself, over slots that name those inputs by the same positions: a plain
//! lookup. `SCACHE=0` turns it off; it is off with VIZ, which records the rewrites scheduling
//! runs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use super::item::Schedule;
use crate::dtype::DType;
use crate::helpers::getenv;
use crate::helpers::lru::Lru;
use crate::uop::{Arg, FastHasher, Ops, UOp};

/// Entries kept, the least recently used dropped first (a program builds few distinct graphs).
const MAX_ENTRIES: usize = 256;

/// One node of a normalized graph.
#[derive(PartialEq, Eq, Hash)]
enum NodeKey {
    /// A node with no BUFFER or CONTIGUOUS under it: the interned node itself stands for its
    /// whole subgraph (no argument copied; the key keeps it, so an equal one is the same node).
    Fixed(UOp),
    /// Op, dtype, argument (buffers and CONTIGUOUS ids replaced by positions) and how many
    /// sources it has (they follow in `Key::sources`, by index).
    Normalized(Ops, DType, Arg, u32),
}

/// A graph's normalized form, its input buffers' device, size and dtype, the devices of its
/// outputs and the scheduling settings.
#[derive(PartialEq, Eq, Default)]
pub struct Key {
    nodes: Vec<NodeKey>,
    sources: Vec<u32>,
    inputs: Vec<(&'static str, usize, DType)>,
    outputs: Vec<u32>,
    devices: Vec<&'static str>,
    split_reduceop: i64,
}

/// Hashes the graph's shape (ops, sources, fixed nodes by address) and its inputs' sizes, not the
/// normalized arguments and names (most of the cost of hashing a key on every eager op): keys
/// that differ only there are told apart by `==`.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for node in &self.nodes {
            match node {
                NodeKey::Fixed(u) => u.hash(state),
                NodeKey::Normalized(op, _, _, sources) => state.write_u64(*op as u64 | (*sources as u64) << 32),
            }
        }
        self.sources.hash(state);
        self.outputs.hash(state);
        for (_, size, _) in &self.inputs {
            state.write_usize(*size);
        }
    }
}

static HITS: AtomicUsize = AtomicUsize::new(0);
static MISSES: AtomicUsize = AtomicUsize::new(0);

/// Schedule-cache hits and misses so far in this process.
pub fn stats() -> (usize, usize) {
    (HITS.load(Ordering::Relaxed), MISSES.load(Ordering::Relaxed))
}

/// Keys are hashed with `FastHasher`: they are the program's own graphs, and long.
type Cache = Lru<Key, Arc<Schedule>, BuildHasherDefault<FastHasher>>;

fn cache() -> &'static Mutex<Cache> {
    static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Lru::new(MAX_ENTRIES)));
    &CACHE
}

/// What building a key works in, kept between calls on a thread: a hit (every eager op) then
/// allocates nothing.
#[derive(Default)]
struct Scratch {
    key: Key,
    /// Each node's position in the walk, by serial.
    index: HashMap<u64, u32, BuildHasherDefault<FastHasher>>,
    /// Per node of the walk: whether it is a `NodeKey::Fixed`.
    fixed: Vec<bool>,
}

impl Scratch {
    /// Fill `key` with the key of `outputs` on `devices` (every node under them in `order`,
    /// sources first).
    fn build(&mut self, outputs: &[UOp], devices: &[&'static str], order: &[UOp]) {
        self.clear();
        let Scratch { key, index, fixed } = self;
        // positions by serial, not by node: a clone per node was an atomic increment and decrement
        index.extend(order.iter().enumerate().map(|(i, u)| (u.serial(), i as u32)));
        let mut contiguous = 0i64;
        for u in order {
            let is_fixed = !matches!(u.op(), Ops::Buffer | Ops::Contiguous)
                && u.src().iter().all(|s| fixed[index[&s.serial()] as usize]);
            fixed.push(is_fixed);
            if is_fixed {
                key.nodes.push(NodeKey::Fixed(u.clone()));
                continue;
            }
            let arg = match (u.op(), u.arg()) {
                (Ops::Buffer, Arg::Buffer(_)) => {
                    let b = u.device_buffer().expect("a BUFFER holds its buffer");
                    key.inputs.push((b.device(), b.numel(), u.dtype()));
                    Arg::Int(key.inputs.len() as i64 - 1)
                }
                (Ops::Contiguous, Arg::Int(_)) => {
                    contiguous += 1;
                    Arg::Int(contiguous)
                }
                (_, arg) => arg.clone(),
            };
            key.sources.extend(u.src().iter().map(|s| index[&s.serial()]));
            key.nodes.push(NodeKey::Normalized(u.op(), u.dtype(), arg, u.src().len() as u32));
        }
        key.outputs.extend(outputs.iter().map(|o| index[&o.serial()]));
        key.devices.extend_from_slice(devices);
        key.split_reduceop = getenv("SPLIT_REDUCEOP", 1);
    }
    /// Empty (the key's nodes released: the scratch must not keep a graph alive), its room kept
    /// unless a large graph's.
    fn clear(&mut self) {
        if self.index.capacity() > 1 << 12 {
            *self = Scratch::default();
            return;
        }
        let Key { nodes, sources, inputs, outputs, devices, .. } = &mut self.key;
        nodes.clear();
        sources.clear();
        inputs.clear();
        outputs.clear();
        devices.clear();
        self.index.clear();
        self.fixed.clear();
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The schedule cached for `outputs` on `devices` (every node under them in `order`, sources
/// first).
pub fn lookup(outputs: &[UOp], devices: &[&'static str], order: &[UOp]) -> Option<Arc<Schedule>> {
    if !enabled() {
        return None;
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        scratch.build(outputs, devices, order);
        let found = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&scratch.key).cloned();
        scratch.clear();
        let counter = if found.is_some() { &HITS } else { &MISSES };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    })
}

/// The key to remember the schedule of `outputs` on `devices` under (after a `lookup` missed);
/// `None` when caching is off.
pub fn key(outputs: &[UOp], devices: &[&'static str], order: &[UOp]) -> Option<Key> {
    enabled().then(|| {
        let mut scratch = Scratch::default();
        scratch.build(outputs, devices, order);
        scratch.key
    })
}

/// Whether schedules are cached: `SCACHE=0` turns it off, and VIZ, which records the rewrites
/// scheduling runs.
fn enabled() -> bool {
    getenv("SCACHE", 1) != 0 && !crate::viz::recording()
}

/// Remember `schedule`, computed for `key`.
pub fn insert(key: Key, schedule: Arc<Schedule>) {
    cache().lock().unwrap_or_else(|e| e.into_inner()).insert(key, schedule);
}
