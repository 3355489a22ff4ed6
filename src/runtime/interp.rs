//! The INTERP device: executes linearized UOps directly, bounds-checked, with the exact dtype
//! semantics of `uop::exec`. It is the oracle every compiled backend is tested against.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::allocator::{Allocator, HostAllocator, LruAllocator};
use super::device::{Device, KernelArg, Program};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::uop::exec::{bitcast_value, cast_value, exec_alu};
use crate::uop::wmma::TensorCore;
use crate::uop::wmma::WARP;
use crate::uop::{Arg, ConstValue, Ops, Special, UOp};
use crate::uop::{DTypeSupport, Language, ProgramSpec, Target, Workgroups};

/// The reference interpreter device.
pub struct InterpDevice {
    allocator: LruAllocator<HostAllocator>,
}

impl InterpDevice {
    pub fn new() -> InterpDevice {
        InterpDevice { allocator: LruAllocator::new(HostAllocator, LruAllocator::<HostAllocator>::default_cap()) }
    }
}

impl Default for InterpDevice {
    fn default() -> InterpDevice {
        InterpDevice::new()
    }
}

impl Device for InterpDevice {
    fn name(&self) -> &str {
        "INTERP"
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn target(&self) -> Target {
        target()
    }
    fn times_kernels(&self) -> bool {
        false
    }
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        Ok(Arc::new(InterpProgram::new(&spec.uops)?))
    }
}

/// One instruction: the op, its dtype, operand slots and argument.
struct Inst {
    op: Ops,
    dtype: DType,
    src: Vec<usize>,
    src_dtypes: Vec<DType>,
    arg: Arg,
    /// For RANGE: index of its END; for END: index of its RANGE.
    jump: usize,
}

/// A value in a slot: a scalar, a vector's lanes, or an element address within a buffer.
#[derive(Clone)]
enum Value {
    Scalar(ConstValue),
    Lanes(Arc<[ConstValue]>),
    /// `valid`: bit `k` says whether lane `k` of an access through it happens (all ones when
    /// ungated; a vector gate clears the bits of its false lanes).
    Addr {
        buf: usize,
        idx: i64,
        valid: u64,
    },
}

impl Value {
    fn scalar(&self) -> ConstValue {
        match self {
            Value::Scalar(c) => *c,
            Value::Lanes(_) => panic!("INTERP: vector used as a scalar"),
            Value::Addr { .. } => panic!("INTERP: address used as a value"),
        }
    }
    /// Lane `k` (a scalar is the same in every lane).
    fn lane(&self, k: usize) -> ConstValue {
        match self {
            Value::Lanes(l) => l[k],
            _ => self.scalar(),
        }
    }
    fn width(&self) -> usize {
        match self {
            Value::Lanes(l) => l.len(),
            _ => 1,
        }
    }
    /// A scalar, or lanes when `w > 1`, from `f(lane)`.
    fn from_lanes(w: usize, mut f: impl FnMut(usize) -> Result<ConstValue>) -> Result<Value> {
        Ok(match w {
            1 => Value::Scalar(f(0)?),
            _ => Value::Lanes((0..w).map(f).collect::<Result<Vec<ConstValue>>>()?.into()),
        })
    }
}

/// A linear program prepared for interpretation.
///
/// It runs as a grid of workgroups (one per value of its `core_id` or `gidx` launch dims, one
/// after the other), each a set of threads (one per value of its `lidx` dims, dim 0 counting
/// fastest, as on a GPU) that share the workgroup's local memory. The threads take turns: each
/// runs until it reaches a BARRIER, a WMMA or the end, and once all have, they go on together;
/// at a WMMA, each warp of 32 consecutive threads first computes its tensor-core product.
pub struct InterpProgram {
    insts: Vec<Inst>,
    /// (slot of the SPECIAL, size) of the grid's dims and of a workgroup's thread dims.
    grid: Vec<(usize, i64)>,
    local: Vec<(usize, i64)>,
    /// Each DEFINE_LOCAL: its slot, size in elements and element dtype.
    shared: Vec<(usize, usize, DType)>,
    /// The slot of each variable, in the order launches pass their values.
    vars: Vec<usize>,
}

/// Memory a program addresses by index in `Value::Addr`: the kernel's buffers, then the
/// workgroup's local memory.
struct Region {
    ptr: *mut u8,
    bytes: usize,
}

/// One thread's state: where it is and the values it computed.
struct Thread {
    pc: usize,
    vals: Vec<Value>,
}

/// Why a thread stopped running.
#[derive(PartialEq)]
enum Stop {
    /// At the BARRIER at this pc (the thread resumes after it).
    Barrier(usize),
    /// At the WMMA at this pc, which its warp runs together (the thread resumes after it, with
    /// the result in its slot).
    Warp(usize),
    Done,
}

impl InterpProgram {
    /// The program for `uops`; an error if a uop reads a value no earlier uop defines (a
    /// linearizer bug, which a compiled backend would reject or read as garbage).
    pub fn new(uops: &[UOp]) -> Result<InterpProgram> {
        let slot: HashMap<&UOp, usize> = uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
        for (i, u) in uops.iter().enumerate() {
            if let Some(s) = u.src().iter().find(|s| slot.get(s).is_none_or(|&j| j >= i)) {
                return Err(Error::Compile(format!(
                    "INTERP: uop {i} ({}) reads a {} that is not defined before it",
                    u.op().name(),
                    s.op().name()
                )));
            }
        }
        let mut insts: Vec<Inst> = uops
            .iter()
            .map(|u| Inst {
                op: u.op(),
                dtype: u.dtype(),
                src: u.src().iter().map(|s| slot[s]).collect(),
                src_dtypes: u.src().iter().map(UOp::dtype).collect(),
                arg: u.arg().clone(),
                jump: 0,
            })
            .collect();
        for i in 0..insts.len() {
            if insts[i].op == Ops::End {
                let r = insts[i].src[0];
                insts[i].jump = r;
                insts[r].jump = i;
            }
        }
        let size =
            |u: &UOp| u.src()[0].const_int_value().expect("INTERP: launch dims and local memory have constant sizes");
        let (mut grid, mut local, mut shared) = (vec![], vec![], vec![]);
        for (i, u) in uops.iter().enumerate() {
            match (u.op(), u.arg()) {
                (Ops::Special, Arg::Special(Special::Local(_))) => local.push((i, size(u))),
                (Ops::Special, _) => grid.push((i, size(u))),
                (Ops::DefineLocal, _) => shared.push((i, size(u) as usize, u.dtype().base())),
                _ => {}
            }
        }
        // dim 0 last: it varies fastest in a thread's or workgroup's number
        let dim = |&(slot, _): &(usize, i64)| match uops[slot].arg() {
            Arg::Special(Special::Local(d) | Special::Group(d)) => std::cmp::Reverse(*d),
            _ => std::cmp::Reverse(0),
        };
        grid.sort_by_key(dim);
        local.sort_by_key(dim);
        let vars = crate::uop::variable::kernel_vars(uops).iter().map(|v| slot[v]).collect();
        Ok(InterpProgram { insts, grid, local, shared, vars })
    }

    /// Run every workgroup of the grid.
    fn launch(&self, bufs: &[KernelArg], var_vals: &[i64]) -> Result<()> {
        if var_vals.len() != self.vars.len() {
            return Err(Error::Device(format!(
                "INTERP: kernel reads {} variables, got {}",
                self.vars.len(),
                var_vals.len()
            )));
        }
        let mut regions: Vec<Region> =
            bufs.iter().map(|b| Ok(Region { ptr: b.host_ptr()?, bytes: b.bytes })).collect::<Result<_>>()?;
        let groups: i64 = self.grid.iter().map(|d| d.1).product();
        let threads: i64 = self.local.iter().map(|d| d.1).product();
        for group in 0..groups {
            let mut shared: Vec<Vec<u8>> = self.shared.iter().map(|s| vec![0; s.1 * s.2.itemsize()]).collect();
            regions.truncate(bufs.len());
            regions.extend(
                shared
                    .iter_mut()
                    .zip(&self.shared)
                    .map(|(m, s)| Region { ptr: m.as_mut_ptr(), bytes: s.1 * s.2.itemsize() }),
            );
            let mut team: Vec<Thread> = (0..threads)
                .map(|t| {
                    let mut vals = vec![Value::Scalar(ConstValue::Int(0)); self.insts.len()];
                    for (&slot, &v) in self.vars.iter().zip(var_vals) {
                        vals[slot] = Value::Scalar(ConstValue::Int(v));
                    }
                    for (dims, mut id) in [(&self.grid, group), (&self.local, t)] {
                        for &(slot, size) in dims.iter().rev() {
                            vals[slot] = Value::Scalar(ConstValue::Int(id % size));
                            id /= size;
                        }
                    }
                    Thread { pc: 0, vals }
                })
                .collect();
            loop {
                let stops = team.iter_mut().map(|t| self.run(t, &regions)).collect::<Result<Vec<Stop>>>()?;
                match &stops[..] {
                    [Stop::Done, ..] if stops.iter().all(|s| *s == Stop::Done) => break,
                    [Stop::Barrier(pc), ..] if stops.iter().all(|s| *s == Stop::Barrier(*pc)) => {}
                    [Stop::Warp(pc), ..] if stops.iter().all(|s| *s == Stop::Warp(*pc)) => self.wmma(*pc, &mut team)?,
                    _ => {
                        return Err(Error::Device(
                            "INTERP: the threads of a workgroup reached different barriers or tensor-core ops".into(),
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Each warp of `team` runs the WMMA at `pc`: its threads' fragments of A, B and C in, their
    /// fragments of D out (into the WMMA's slot), and on after it.
    fn wmma(&self, pc: usize, team: &mut [Thread]) -> Result<()> {
        let inst = &self.insts[pc];
        let Arg::Wmma(tc) = inst.arg else { unreachable!("a warp stops only at a WMMA") };
        if !team.len().is_multiple_of(WARP) {
            return Err(Error::Device(format!(
                "INTERP: {} runs on whole warps of {WARP} threads, but the workgroup has {}",
                tc.name,
                team.len()
            )));
        }
        for warp in team.chunks_mut(WARP) {
            let operand = |i: usize| -> Vec<Vec<f64>> {
                let lanes = |v: &Value| (0..v.width()).map(|k| v.lane(k).as_f64()).collect();
                warp.iter().map(|t| lanes(&t.vals[inst.src[i]])).collect()
            };
            let d = tc.run(&operand(0), &operand(1), &operand(2));
            for (t, lanes) in warp.iter_mut().zip(d) {
                t.vals[pc] = Value::Lanes(lanes.into_iter().map(ConstValue::Float).collect());
                t.pc = pc + 1;
            }
        }
        Ok(())
    }

    /// Run `t` until it reaches a BARRIER or a WMMA, or ends.
    fn run(&self, t: &mut Thread, mem: &[Region]) -> Result<Stop> {
        let vals = &mut t.vals;
        let mut pc = t.pc;
        // the kernel's buffers come first in `mem`, the workgroup's local memory after them
        let nbufs = mem.len() - self.shared.len();
        while pc < self.insts.len() {
            let inst = &self.insts[pc];
            let s = |i: usize| vals[inst.src[i]].clone();
            let value = match (inst.op, &inst.arg) {
                (Ops::Const, Arg::Const(c)) => Some(Value::Scalar(*c)),
                (Ops::Param, Arg::Int(slot)) => {
                    let buf = *slot as usize;
                    if buf >= nbufs {
                        return Err(Error::Device(format!("INTERP: PARAM {buf} but {nbufs} buffers")));
                    }
                    Some(Value::Addr { buf, idx: 0, valid: u64::MAX })
                }
                (Ops::DefineLocal, _) => {
                    let k = self.shared.iter().position(|s| s.0 == pc).expect("every DEFINE_LOCAL has memory");
                    Some(Value::Addr { buf: nbufs + k, idx: 0, valid: u64::MAX })
                }
                (Ops::Barrier, _) => {
                    t.pc = pc + 1;
                    return Ok(Stop::Barrier(pc));
                }
                (Ops::Wmma, _) => {
                    t.pc = pc;
                    return Ok(Stop::Warp(pc));
                }
                (Ops::Range, _) => {
                    if s(0).scalar().as_i64() <= 0 {
                        pc = inst.jump + 1;
                        continue;
                    }
                    Some(Value::Scalar(ConstValue::Int(0)))
                }
                (Ops::End, _) => {
                    let r = inst.jump;
                    let next = vals[r].scalar().as_i64() + 1;
                    if next < vals[self.insts[r].src[0]].scalar().as_i64() {
                        vals[r] = Value::Scalar(ConstValue::Int(next));
                        pc = r + 1;
                        continue;
                    }
                    None
                }
                (Ops::Index, _) => {
                    let Value::Addr { buf, idx, valid } = s(0) else { panic!("INTERP: INDEX of a non-pointer") };
                    let gate = match inst.src.get(2).map(|_| s(2)) {
                        None => u64::MAX,
                        Some(Value::Lanes(l)) => {
                            l.iter().enumerate().fold(0, |m, (k, g)| m | (g.as_bool() as u64) << k)
                        }
                        Some(g) => {
                            if g.scalar().as_bool() {
                                u64::MAX
                            } else {
                                0
                            }
                        }
                    };
                    Some(Value::Addr { buf, idx: idx + s(1).scalar().as_i64(), valid: valid & gate })
                }
                // a vector load reads consecutive elements
                (Ops::Load, _) => {
                    let Value::Addr { buf, idx, valid } = s(0) else { panic!("INTERP: LOAD of a non-pointer") };
                    let elem = inst.dtype.base();
                    Some(Value::from_lanes(inst.dtype.count as usize, |k| {
                        if valid >> k & 1 == 0 {
                            return Ok(cast_value(ConstValue::Int(0), DType::INT64, elem));
                        }
                        let off = check(mem, buf, idx + k as i64, elem.itemsize())?;
                        // SAFETY: `check` proved the element is within the region, so its
                        // itemsize bytes at `off` lie inside a live allocation: a kernel buffer,
                        // or this workgroup's local memory, which `launch` keeps alive and
                        // unresized while its threads run.
                        let bytes = unsafe { std::slice::from_raw_parts(mem[buf].ptr.add(off), elem.itemsize()) };
                        Ok(read_elem(bytes, elem))
                    })?)
                }
                (Ops::Store, _) => {
                    let Value::Addr { buf, idx, valid } = s(0) else { panic!("INTERP: STORE to a non-pointer") };
                    let value = s(1);
                    for k in (0..value.width()).filter(|k| valid >> k & 1 == 1) {
                        let bytes = write_elem(value.lane(k), inst.src_dtypes[1].base());
                        let off = check(mem, buf, idx + k as i64, bytes.len())?;
                        // SAFETY: as for LOAD; kernels run one at a time, so nothing else
                        // accesses this buffer during the write.
                        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem[buf].ptr.add(off), bytes.len()) };
                    }
                    None
                }
                (Ops::DefineReg, _) => Some(s(0)),
                (Ops::Assign, _) => {
                    let new = s(1);
                    vals[inst.src[0]] = new.clone();
                    Some(new)
                }
                (Ops::After, _) => Some(s(0)),
                (Ops::Vectorize, _) => Some(Value::Lanes((0..inst.src.len()).map(|i| s(i).scalar()).collect())),
                (Ops::Gep, Arg::Int(k)) => Some(Value::Scalar(s(0).lane(*k as usize))),
                // launch dims: set when the thread was made
                (Ops::Special | Ops::DefineVar, _) => None,
                (Ops::Sink, _) => None,
                // vector ops run lane by lane
                (op @ (Ops::Cast | Ops::Bitcast), _) => {
                    let (from, to, x) = (inst.src_dtypes[0].base(), inst.dtype.base(), s(0));
                    Some(Value::from_lanes(x.width(), |k| {
                        Ok(match op {
                            Ops::Cast => cast_value(x.lane(k), from, to),
                            _ => bitcast_value(x.lane(k), from, to),
                        })
                    })?)
                }
                (op, _) if op.is_alu() => {
                    let operand = if op == Ops::Where { inst.src_dtypes[1] } else { inst.src_dtypes[0] }.base();
                    let w = inst.src.iter().map(|&i| vals[i].width()).max().unwrap_or(1);
                    Some(Value::from_lanes(w, |k| {
                        let mut args = [ConstValue::Int(0); 3];
                        for (a, &i) in args.iter_mut().zip(&inst.src) {
                            *a = vals[i].lane(k);
                        }
                        Ok(exec_alu(op, operand, &args[..inst.src.len()]))
                    })?)
                }
                (op, _) => return Err(Error::Device(format!("INTERP: cannot execute {}", op.name()))),
            };
            if let Some(v) = value {
                vals[pc] = v;
            }
            pc += 1;
        }
        t.pc = pc;
        Ok(Stop::Done)
    }
}

/// Byte offset of element `idx` (of `itemsize` bytes) of region `buf`, or an error naming the
/// out-of-bounds access: the element's bytes all lie inside the region.
fn check(mem: &[Region], buf: usize, idx: i64, itemsize: usize) -> Result<usize> {
    let r = &mem[buf];
    let end = usize::try_from(idx).ok().and_then(|i| i.checked_add(1)?.checked_mul(itemsize));
    match end {
        Some(end) if end <= r.bytes => Ok(end - itemsize),
        _ => Err(Error::Device(format!(
            "INTERP: index {idx} out of bounds for buffer {buf} of {} {itemsize}-byte elements",
            r.bytes / itemsize
        ))),
    }
}

/// An element's value from its little-endian bytes.
pub fn read_elem(b: &[u8], dtype: DType) -> ConstValue {
    let int = |v: i64| ConstValue::Int(v);
    match dtype.scalar {
        Scalar::Bool => ConstValue::Bool(b[0] != 0),
        Scalar::Int8 => int(b[0] as i8 as i64),
        Scalar::UInt8 => int(b[0] as i64),
        Scalar::Int16 => int(i16::from_le_bytes([b[0], b[1]]) as i64),
        Scalar::UInt16 => int(u16::from_le_bytes([b[0], b[1]]) as i64),
        Scalar::Int32 => int(i32::from_le_bytes(b[..4].try_into().unwrap()) as i64),
        Scalar::UInt32 => int(u32::from_le_bytes(b[..4].try_into().unwrap()) as i64),
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => int(i64::from_le_bytes(b[..8].try_into().unwrap())),
        Scalar::Float16 => ConstValue::Float(half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
        Scalar::BFloat16 => ConstValue::Float(half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        Scalar::Float32 => ConstValue::Float(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64),
        Scalar::Float64 => ConstValue::Float(f64::from_le_bytes(b[..8].try_into().unwrap())),
        Scalar::Void => panic!("INTERP: void element"),
    }
}

/// The little-endian bytes of a value normalized to `dtype`.
pub fn write_elem(v: ConstValue, dtype: DType) -> Vec<u8> {
    let i = v.as_i64();
    let f = v.as_f64();
    match dtype.scalar {
        Scalar::Bool => vec![v.as_bool() as u8],
        Scalar::Int8 | Scalar::UInt8 => vec![i as u8],
        Scalar::Int16 | Scalar::UInt16 => (i as u16).to_le_bytes().to_vec(),
        Scalar::Int32 | Scalar::UInt32 => (i as u32).to_le_bytes().to_vec(),
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => i.to_le_bytes().to_vec(),
        Scalar::Float16 => half::f16::from_f64(f).to_le_bytes().to_vec(),
        Scalar::BFloat16 => half::bf16::from_f64(f).to_le_bytes().to_vec(),
        Scalar::Float32 => (f as f32).to_le_bytes().to_vec(),
        Scalar::Float64 => f.to_le_bytes().to_vec(),
        Scalar::Void => panic!("INTERP: void element"),
    }
}

impl Program for InterpProgram {
    unsafe fn run(&self, bufs: &[KernelArg], vals: &[i64]) -> Result<Duration> {
        let start = Instant::now();
        self.launch(bufs, vals)?;
        Ok(start.elapsed())
    }
}

/// The reference interpreter: the CPU's vectors and layout choices (it is the CPU's oracle),
/// and unbounded workgroups so that every workgroup opt can be checked on it; with
/// `EMULATE_CUDA=1` it offers CUDA's tensor cores and with `EMULATE_METAL=1` Metal's, so the
/// TC opt and each layout are checked without a GPU.
pub fn target() -> Target {
    let unbounded = usize::MAX;
    let emulated = |var, tensor_cores: fn() -> Vec<&'static TensorCore>| {
        (crate::helpers::getenv(var, 0) != 0).then(tensor_cores).unwrap_or_default()
    };
    Target {
        language: Language::Listing,
        workgroups: Some(Workgroups {
            max_threads: 1024,
            max_local: [unbounded; 3],
            max_groups: [unbounded; 3],
            local_bytes: unbounded,
            simd_threads: false,
        }),
        dtypes: DTypeSupport { half: true, bfloat16: true, float64: true, int64: true },
        tensor_cores: [
            emulated("EMULATE_CUDA", crate::uop::wmma::nvidia_sm80),
            emulated("EMULATE_METAL", crate::uop::wmma::apple_simdgroup),
        ]
        .concat(),
        ..super::cpu::host_target("INTERP")
    }
}
