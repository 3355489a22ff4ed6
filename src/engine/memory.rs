//! Buffer lifetime planning and reuse (tinygrad's `memory_planner`).
//!
//! Over a list of steps (a schedule, or the kernels a JIT captured), an intermediate buffer lives
//! from the step that first writes it to the step that last reads it. Intermediates whose
//! lifetimes do not overlap can share memory: each device's intermediates become views into one
//! arena, at offsets chosen by a best-fit allocator that replays the lifetimes in step order, so
//! the arena is about as large as the most memory live at any one step.
//!
//! An intermediate is a buffer that nothing but the steps holds (its `Arc` count is the number
//! of times the steps name it: no tensor, no caller, no output refers to it), that is not named
//! in `keep`, and whose first use is a plain write of the whole buffer, so its old contents are
//! never read. `NO_MEMORY_PLANNER=1` turns planning off.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::bind::ScheduleItem;
use crate::helpers::{debug, getenv};
use crate::runtime::Buffer;
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

/// The planned replacement of each intermediate buffer (by id): a view into its device's arena.
/// Empty when planning would not save memory. Prints the savings at `DEBUG=1`, after `prefix`.
pub fn plan_memory(steps: &[Step], keep: &HashSet<u64>, prefix: &str) -> HashMap<u64, Arc<Buffer>> {
    // first and last step of each buffer, how often the steps name it, and whether its first use
    // reads it
    struct Life<'a> {
        buf: &'a Arc<Buffer>,
        first: usize,
        last: usize,
        refs: usize,
        read_first: bool,
    }
    if !planner_enabled() {
        return HashMap::new();
    }
    let mut lives: Vec<Life> = vec![];
    let mut index: HashMap<u64, usize> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        for (slot, buf) in step.bufs.iter().enumerate() {
            let read = slot > 0 || step.reads_output;
            match index.get(&buf.id()) {
                Some(&l) => {
                    let life = &mut lives[l];
                    life.last = i;
                    life.refs += 1;
                    life.read_first |= life.first == i && read;
                }
                None => {
                    index.insert(buf.id(), lives.len());
                    lives.push(Life { buf, first: i, last: i, refs: 1, read_first: read });
                }
            }
        }
    }
    let planned: Vec<&Life> = lives
        .iter()
        .filter(|l| {
            !l.read_first && !keep.contains(&l.buf.id()) && l.buf.nbytes() > 0 && Arc::strong_count(l.buf) == l.refs
        })
        .collect();
    let mut by_device: BTreeMap<&str, Vec<&Life>> = BTreeMap::new();
    planned.iter().for_each(|l| by_device.entry(l.buf.device()).or_default().push(l));
    let mut out = HashMap::new();
    let (mut before, mut after, mut nbufs, mut narenas) = (0, 0, 0, 0);
    for (device, lives) in by_device {
        // views of an arena start where the device allows them to
        let Ok(align) = crate::runtime::get_device(device).map(|d| d.allocator().view_alignment()) else { continue };
        let round = |n: usize| n.div_ceil(align) * align;
        if lives.len() < 2 {
            continue;
        }
        // replay the lifetimes: at each step, release what died before it, then place what it
        // writes first (the largest first, which packs better)
        let mut births: BTreeMap<usize, Vec<&Life>> = BTreeMap::new();
        lives.iter().for_each(|l| births.entry(l.first).or_default().push(l));
        let mut deaths: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        let mut arena = Arena::default();
        let mut offsets: Vec<(&Life, usize)> = vec![];
        for (step, mut born) in births {
            while let Some(entry) = deaths.first_entry() {
                if *entry.key() >= step {
                    break;
                }
                entry.remove().into_iter().for_each(|(o, s)| arena.release(o, s));
            }
            born.sort_by_key(|l| std::cmp::Reverse(l.buf.nbytes()));
            for l in born {
                let size = round(l.buf.nbytes());
                let off = arena.alloc(size);
                deaths.entry(l.last).or_default().push((off, size));
                offsets.push((l, off));
            }
        }
        let total: usize = lives.iter().map(|l| l.buf.nbytes()).sum();
        if arena.end >= total {
            continue;
        }
        let base = Arc::new(Buffer::new(device, arena.end, crate::dtype::DType::UINT8));
        for (l, off) in offsets {
            let view = Buffer::view(&base, off, l.buf.size(), l.buf.dtype()).expect("the arena holds every offset");
            out.insert(l.buf.id(), Arc::new(view));
        }
        (before, after, nbufs, narenas) = (before + total, after + arena.end, nbufs + lives.len(), narenas + 1);
    }
    if debug() >= 1 && !out.is_empty() {
        eprintln!(
            "{prefix}memory reduced from {:.2} MB -> {:.2} MB, {nbufs} -> {narenas} bufs",
            before as f64 * 1e-6,
            after as f64 * 1e-6
        );
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

/// The schedule with its intermediate buffers sharing memory where their lifetimes allow;
/// buffers named in `keep` (and any held outside the schedule) are left alone.
pub fn memory_planner(mut items: Vec<ScheduleItem>, keep: &HashSet<u64>) -> Vec<ScheduleItem> {
    // two intermediates to share memory take two steps writing them
    if items.len() < 2 {
        return items;
    }
    let plan = {
        let steps: Vec<Step> = items
            .iter()
            .map(|item| match item {
                ScheduleItem::Kernel { ast, bufs } => {
                    Step { bufs: bufs.iter().collect(), reads_output: loads_output(ast) }
                }
                ScheduleItem::Copy { dst, src, .. } => Step { bufs: vec![dst, src], reads_output: false },
            })
            .collect();
        plan_memory(&steps, keep, "")
    };
    for item in &mut items {
        match item {
            ScheduleItem::Kernel { bufs, .. } => replace_planned(bufs, &plan),
            ScheduleItem::Copy { dst, src, .. } => {
                replace_planned(std::slice::from_mut(dst), &plan);
                replace_planned(std::slice::from_mut(src), &plan);
            }
        }
    }
    items
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
