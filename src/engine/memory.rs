//! Buffer lifetime planning and reuse (tinygrad's `memory_planner`).
//!
//! Over a list of steps (a schedule's, over its slots, or the kernels a JIT captured, over their
//! buffers), an intermediate lives from the step that first writes it to the step that last
//! reads it. Intermediates whose lifetimes do not overlap can share memory: each device's
//! intermediates become views into one arena, at offsets chosen by a best-fit allocator that
//! replays the lifetimes in step order, so the arena is about as large as the most memory live at
//! any one step. An intermediate's first use is a plain write of all of it, so its old contents
//! are never read. `NO_MEMORY_PLANNER=1` turns planning off.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::helpers::{debug, getenv};
use crate::runtime::Buffer;
use crate::schedule::{Schedule, ScheduleStep, Slot};
use crate::uop::{Arg, Ops, UOp};

/// The buffers one step uses: `bufs[0]` is written (all of it), the rest are read, and
/// `reads_output` says whether the step also reads `bufs[0]` (an in-place update).
pub struct Step<'a> {
    pub bufs: Vec<&'a Arc<Buffer>>,
    pub reads_output: bool,
}

/// Whether the planner is on (`NO_MEMORY_PLANNER` unset or 0).
pub fn planner_enabled() -> bool {
    getenv("NO_MEMORY_PLANNER", 0) == 0
}

/// Whether a kernel AST loads from its output buffer (PARAM 0).
pub fn loads_output(ast: &UOp) -> bool {
    ast.toposort().iter().any(|u| {
        u.op() == Ops::Load && {
            let p = &u.src()[0].src()[0];
            p.op() == Ops::Param && matches!(p.arg(), Arg::Int(0))
        }
    })
}

/// The bytes of each PARAM slot a kernel AST can touch, as a half-open range (empty for a slot
/// it never indexes), from each INDEX's `uop::reach::index_reach` under its gate. A launch checks
/// its buffers against them, so no kernel reaches outside the memory it is given.
pub fn param_reach(ast: &UOp) -> Vec<std::ops::Range<i128>> {
    let mut reach: Vec<std::ops::Range<i128>> = vec![];
    for u in ast.toposort().iter().filter(|u| u.op() == Ops::Index && u.src()[0].op() == Ops::Param) {
        let (p, idx) = (&u.src()[0], &u.src()[1]);
        let Arg::Int(slot) = p.arg() else { continue };
        let Some((lo, hi)) = crate::uop::reach::index_reach(idx, u.src().get(2)) else { continue };
        let size = p.dtype().itemsize() as i128;
        let slot = *slot as usize;
        if reach.len() <= slot {
            reach.resize(slot + 1, 0..0);
        }
        let r = &mut reach[slot];
        *r = match r.is_empty() {
            true => lo * size..(hi + 1) * size,
            false => r.start.min(lo * size)..r.end.max((hi + 1) * size),
        };
    }
    reach
}

/// A best-fit allocator of offsets in an arena that grows as needed.
#[derive(Default)]
struct Arena {
    /// Free ranges by offset: offset -> size.
    free: BTreeMap<usize, usize>,
    /// The arena's size so far.
    end: usize,
}

impl Arena {
    fn alloc(&mut self, size: usize) -> usize {
        let best = self.free.iter().filter(|(_, &s)| s >= size).min_by_key(|(&o, &s)| (s, o)).map(|(&o, &s)| (o, s));
        if let Some((off, s)) = best {
            self.free.remove(&off);
            if s > size {
                self.free.insert(off + size, s - size);
            }
            return off;
        }
        // nothing fits: grow the arena, from the free range at its end if there is one
        let off = match self.free.last_key_value() {
            Some((&o, &s)) if o + s == self.end => {
                self.free.remove(&o);
                o
            }
            _ => self.end,
        };
        self.end = off + size;
        off
    }
    fn release(&mut self, mut off: usize, mut size: usize) {
        if let Some((&o, &s)) = self.free.range(..off).next_back() {
            if o + s == off {
                self.free.remove(&o);
                (off, size) = (o, s + size);
            }
        }
        if let Some(s) = self.free.remove(&(off + size)) {
            size += s;
        }
        self.free.insert(off, size);
    }
}

/// When an intermediate is first written and last used (step indices), and its bytes.
#[derive(Clone, Copy)]
struct Lifetime {
    first: usize,
    last: usize,
    nbytes: usize,
}

/// The offsets of `lives` (one device's intermediates) in one arena, and the arena's size: the
/// lifetimes replayed in step order, each step releasing what died before it and then placing
/// what it writes first, the largest first (which packs better), every offset a multiple of
/// `align`. None where the arena would not be smaller than the intermediates apart.
fn pack(lives: &[Lifetime], align: usize) -> Option<(Vec<usize>, usize)> {
    if lives.len() < 2 {
        return None;
    }
    let round = |n: usize| n.div_ceil(align) * align;
    let mut births: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    lives.iter().enumerate().for_each(|(i, l)| births.entry(l.first).or_default().push(i));
    let mut deaths: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    let mut arena = Arena::default();
    let mut offsets = vec![0; lives.len()];
    for (step, mut born) in births {
        while let Some(entry) = deaths.first_entry() {
            if *entry.key() >= step {
                break;
            }
            entry.remove().into_iter().for_each(|(o, s)| arena.release(o, s));
        }
        born.sort_by_key(|&i| std::cmp::Reverse(lives[i].nbytes));
        for i in born {
            let size = round(lives[i].nbytes);
            offsets[i] = arena.alloc(size);
            deaths.entry(lives[i].last).or_default().push((offsets[i], size));
        }
    }
    (arena.end < lives.iter().map(|l| l.nbytes).sum()).then_some((offsets, arena.end))
}

/// The intermediates a planner found on one device, packed into an arena of `bytes`.
struct Packed<K> {
    device: String,
    bytes: usize,
    /// Each intermediate's key and offset.
    at: Vec<(K, usize)>,
    /// The intermediates' bytes apart.
    apart: usize,
}

/// Lifetimes keyed by `K` (a buffer's id, a slot), packed per device: where each arena saves
/// memory (a device that cannot be opened keeps its intermediates apart). Prints the savings at
/// `DEBUG=1`, after `prefix`.
fn pack_per_device<K: Copy>(lives: Vec<(K, &str, Lifetime)>, prefix: &str) -> Vec<Packed<K>> {
    let mut by_device: BTreeMap<&str, Vec<(K, Lifetime)>> = BTreeMap::new();
    lives.into_iter().for_each(|(k, device, l)| by_device.entry(device).or_default().push((k, l)));
    let mut packed = vec![];
    for (device, lives) in by_device {
        // views of an arena start where the device allows them to
        let Ok(align) = crate::runtime::get_device(device).map(|d| d.allocator().view_alignment()) else { continue };
        let times: Vec<Lifetime> = lives.iter().map(|(_, l)| *l).collect();
        let Some((offsets, bytes)) = pack(&times, align) else { continue };
        let at = lives.iter().map(|(k, _)| *k).zip(offsets).collect();
        packed.push(Packed { device: device.to_string(), bytes, at, apart: times.iter().map(|l| l.nbytes).sum() });
    }
    if debug() >= 1 && !packed.is_empty() {
        let before: usize = packed.iter().map(|p| p.apart).sum();
        let after: usize = packed.iter().map(|p| p.bytes).sum();
        let nbufs: usize = packed.iter().map(|p| p.at.len()).sum();
        eprintln!(
            "{prefix}memory reduced from {:.2} MB -> {:.2} MB, {nbufs} -> {} bufs",
            before as f64 * 1e-6,
            after as f64 * 1e-6,
            packed.len()
        );
    }
    packed
}

/// Where a schedule's intermediate slots live: an arena per device, and each planned slot's
/// arena and offset.
#[derive(Default)]
pub struct SlotPlan {
    /// Each arena's device and bytes.
    pub arenas: Vec<(String, usize)>,
    /// Planned slot -> (arena, byte offset).
    pub at: HashMap<usize, (usize, usize)>,
}

/// The memory plan of `schedule`, over its slots, before any buffer exists: its intermediates
/// (new slots no output is stored in, first written whole) share memory where their lifetimes
/// allow. Empty with fewer than two steps or `NO_MEMORY_PLANNER=1`.
pub fn plan_slots(schedule: &Schedule) -> SlotPlan {
    // two intermediates to share memory take two steps writing them
    if schedule.steps.len() < 2 || !planner_enabled() {
        return SlotPlan::default();
    }
    let outputs: HashSet<usize> = schedule.outputs.iter().flatten().map(|&(slot, _)| slot).collect();
    let mut lives: HashMap<usize, (Lifetime, bool)> = HashMap::new();
    for (i, step) in schedule.steps.iter().enumerate() {
        let copy;
        let (slots, reads_output): (&[usize], bool) = match step {
            ScheduleStep::Kernel { ast, slots } => (slots, loads_output(ast)),
            ScheduleStep::Copy { dst, src, .. } => {
                copy = [*dst, *src];
                (&copy, false)
            }
        };
        for (k, &slot) in slots.iter().enumerate() {
            let read = k > 0 || reads_output;
            let nbytes = schedule.slots[slot].size() * schedule.slots[slot].dtype().itemsize();
            let (life, read_first) = lives.entry(slot).or_insert((Lifetime { first: i, last: i, nbytes }, read));
            life.last = i;
            *read_first |= life.first == i && read;
        }
    }
    let mut planned: Vec<(usize, &str, Lifetime)> = lives
        .into_iter()
        .filter_map(|(slot, (life, read_first))| match &schedule.slots[slot] {
            Slot::New { device, .. } if !read_first && !outputs.contains(&slot) && life.nbytes > 0 => {
                Some((slot, device.as_str(), life))
            }
            _ => None,
        })
        .collect();
    planned.sort_by_key(|(slot, ..)| *slot);
    let mut plan = SlotPlan::default();
    for (arena, p) in pack_per_device(planned, "").into_iter().enumerate() {
        plan.arenas.push((p.device, p.bytes));
        plan.at.extend(p.at.into_iter().map(|(slot, offset)| (slot, (arena, offset))));
    }
    plan
}

/// The planned replacement of each intermediate buffer of `steps` (by id; the JIT's captured
/// kernels): a view into its device's arena. An intermediate is a buffer that nothing but the
/// steps holds (its `Arc` count is the number of times the steps name it: no tensor, no caller,
/// no output refers to it), that is not named in `keep`, and whose first use is a plain write of
/// the whole buffer. Empty when planning would not save memory. Prints the savings at `DEBUG=1`,
/// after `prefix`.
pub fn plan_memory(steps: &[Step], keep: &HashSet<u64>, prefix: &str) -> HashMap<u64, Arc<Buffer>> {
    if !planner_enabled() {
        return HashMap::new();
    }
    // each buffer's lifetime, how often the steps name it, and whether its first use reads it
    let mut lives: Vec<(&Arc<Buffer>, Lifetime, usize, bool)> = vec![];
    let mut index: HashMap<u64, usize> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        for (slot, buf) in step.bufs.iter().enumerate() {
            let read = slot > 0 || step.reads_output;
            match index.get(&buf.id()) {
                Some(&l) => {
                    let (_, life, refs, read_first) = &mut lives[l];
                    life.last = i;
                    *refs += 1;
                    *read_first |= life.first == i && read;
                }
                None => {
                    index.insert(buf.id(), lives.len());
                    lives.push((buf, Lifetime { first: i, last: i, nbytes: buf.nbytes() }, 1, read));
                }
            }
        }
    }
    let planned: Vec<(usize, &str, Lifetime)> = lives
        .iter()
        .enumerate()
        .filter(|(_, (buf, life, refs, read_first))| {
            !read_first && !keep.contains(&buf.id()) && life.nbytes > 0 && Arc::strong_count(buf) == *refs
        })
        .map(|(i, (buf, life, ..))| (i, buf.device(), *life))
        .collect();
    let mut out = HashMap::new();
    for p in pack_per_device(planned, prefix) {
        let base = Arc::new(Buffer::new(&p.device, p.bytes, crate::dtype::DType::UINT8));
        for (i, off) in p.at {
            let buf = lives[i].0;
            let view = Buffer::view(&base, off, buf.size(), buf.dtype()).expect("the arena holds every offset");
            out.insert(buf.id(), Arc::new(view));
        }
    }
    out
}

/// `bufs` with planned buffers replaced by their views.
pub fn replace_planned(bufs: &mut [Arc<Buffer>], plan: &HashMap<u64, Arc<Buffer>>) {
    for b in bufs {
        if let Some(v) = plan.get(&b.id()) {
            *b = v.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Arena;

    #[test]
    fn arena_reuses_the_best_fit_merges_neighbours_and_grows_from_a_free_end() {
        let mut a = Arena::default();
        let (x, y, z) = (a.alloc(100), a.alloc(50), a.alloc(200));
        assert_eq!((x, y, z, a.end), (0, 100, 150, 350));
        a.release(x, 100);
        a.release(z, 200);
        // 40 fits both holes; the smaller one wins
        assert_eq!(a.alloc(40), 0);
        a.release(0, 40);
        a.release(y, 50);
        // 0..350 merged into one free range: 300 starts at 0
        assert_eq!(a.alloc(300), 0);
        // 100 does not fit the 50 left at the end: the arena grows from there
        assert_eq!(a.alloc(100), 300);
        assert_eq!(a.end, 400);
    }
}
