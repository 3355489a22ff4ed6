//! The schedule cache: a graph scheduled once is not scheduled again.
//!
//! The key is the outputs' graph with every BUFFER replaced by its position among the graph's
//! buffers (with its device, size and dtype) and every CONTIGUOUS's id by its position among the
//! CONTIGUOUS nodes: a training step rebuilt over new input batches is the same key. The entry
//! is the schedule itself, over slots that name those inputs by the same positions: a plain
//! lookup. `SCACHE=0` turns it off; it is off with VIZ, which records the rewrites scheduling
//! runs.

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
#[derive(PartialEq, Eq)]
pub struct Key {
    nodes: Vec<NodeKey>,
    sources: Vec<u32>,
    inputs: Vec<(String, usize, DType)>,
    outputs: Vec<u32>,
    devices: Vec<String>,
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

/// The key of `outputs` on `devices` (every node under them in `order`, sources first); `None`
/// when caching is off.
pub fn key(outputs: &[UOp], devices: &[String], order: &[UOp]) -> Option<Key> {
    if getenv("SCACHE", 1) == 0 || crate::viz::recording() {
        return None;
    }
    // positions by serial, not by node: a clone per node was an atomic increment and decrement
    let index: HashMap<u64, u32, BuildHasherDefault<FastHasher>> =
        order.iter().enumerate().map(|(i, u)| (u.serial(), i as u32)).collect();
    let (mut described, mut contiguous) = (vec![], 0i64);
    let mut sources = Vec::with_capacity(2 * order.len());
    // per node in `order`: whether it is a `NodeKey::Fixed`
    let mut fixed = Vec::with_capacity(order.len());
    let nodes = order
        .iter()
        .map(|u| {
            let is_fixed = !matches!(u.op(), Ops::Buffer | Ops::Contiguous)
                && u.src().iter().all(|s| fixed[index[&s.serial()] as usize]);
            fixed.push(is_fixed);
            if is_fixed {
                return NodeKey::Fixed(u.clone());
            }
            let arg = match (u.op(), u.arg()) {
                (Ops::Buffer, Arg::Buffer(_)) => {
                    let b = u.device_buffer().expect("a BUFFER holds its buffer");
                    described.push((b.device().to_string(), b.numel(), u.dtype()));
                    Arg::Int(described.len() as i64 - 1)
                }
                (Ops::Contiguous, Arg::Int(_)) => {
                    contiguous += 1;
                    Arg::Int(contiguous)
                }
                (_, arg) => arg.clone(),
            };
            sources.extend(u.src().iter().map(|s| index[&s.serial()]));
            NodeKey::Normalized(u.op(), u.dtype(), arg, u.src().len() as u32)
        })
        .collect();
    let key = Key {
        nodes,
        sources,
        inputs: described,
        outputs: outputs.iter().map(|o| index[&o.serial()]).collect(),
        devices: devices.to_vec(),
        split_reduceop: getenv("SPLIT_REDUCEOP", 1),
    };
    Some(key)
}

/// The schedule cached for `key`.
pub fn lookup(key: &Key) -> Option<Arc<Schedule>> {
    let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
    let found = cache.get(key).cloned();
    let counter = if found.is_some() { &HITS } else { &MISSES };
    counter.fetch_add(1, Ordering::Relaxed);
    found
}

/// Remember `schedule`, computed for `key`.
pub fn insert(key: Key, schedule: Arc<Schedule>) {
    cache().lock().unwrap_or_else(|e| e.into_inner()).insert(key, schedule);
}
