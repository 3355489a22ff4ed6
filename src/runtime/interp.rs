//! The INTERP device: executes linearized UOps directly, bounds-checked, with the exact dtype
//! semantics of `uop::exec`. It is the oracle every compiled backend is tested against.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::device::{Allocator, Buffer, Device, HostAllocator, LruAllocator, Program};
use crate::codegen::ProgramSpec;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::renderer::Renderer;
use crate::uop::exec::{bitcast_value, cast_value, exec_alu};
use crate::uop::{Arg, ConstValue, Ops, UOp};

/// The reference interpreter device.
pub struct InterpDevice {
    allocator: LruAllocator<HostAllocator>,
}

impl InterpDevice {
    pub fn new() -> InterpDevice {
        InterpDevice { allocator: LruAllocator::new(HostAllocator, LruAllocator::<HostAllocator>::DEFAULT_CAP) }
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
    fn renderer(&self) -> Option<&dyn Renderer> {
        None
    }
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        Ok(Arc::new(InterpProgram::new(&spec.uops, spec.threads)))
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
pub struct InterpProgram {
    insts: Vec<Inst>,
    /// `core_id` takes each value in `0..threads`, one run after the other.
    threads: usize,
}

impl InterpProgram {
    pub fn new(uops: &[UOp], threads: usize) -> InterpProgram {
        let slot: HashMap<&UOp, usize> = uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
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
        InterpProgram { insts, threads }
    }

    fn execute(&self, bufs: &[Arc<Buffer>], core: usize) -> Result<()> {
        let mem: Vec<*mut u8> = bufs.iter().map(|b| b.as_mut_ptr()).collect::<Result<_>>()?;
        let mut vals = vec![Value::Scalar(ConstValue::Int(0)); self.insts.len()];
        let mut pc = 0;
        while pc < self.insts.len() {
            let inst = &self.insts[pc];
            let s = |i: usize| vals[inst.src[i]].clone();
            let value = match (inst.op, &inst.arg) {
                (Ops::Const, Arg::Const(c)) => Some(Value::Scalar(*c)),
                (Ops::Param, Arg::Int(slot)) => {
                    let buf = *slot as usize;
                    if buf >= bufs.len() {
                        return Err(Error::Device(format!("INTERP: PARAM {buf} but {} buffers", bufs.len())));
                    }
                    Some(Value::Addr { buf, idx: 0, valid: u64::MAX })
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
                        let off = check(bufs, buf, idx + k as i64)?;
                        // SAFETY: `check` proved the element is within the buffer, so its
                        // itemsize bytes at `off` lie inside the live allocation.
                        let bytes = unsafe { std::slice::from_raw_parts(mem[buf].add(off), elem.itemsize()) };
                        Ok(read_elem(bytes, elem))
                    })?)
                }
                (Ops::Store, _) => {
                    let Value::Addr { buf, idx, valid } = s(0) else { panic!("INTERP: STORE to a non-pointer") };
                    let value = s(1);
                    for k in (0..value.width()).filter(|k| valid >> k & 1 == 1) {
                        let off = check(bufs, buf, idx + k as i64)?;
                        let bytes = write_elem(value.lane(k), inst.src_dtypes[1].base());
                        // SAFETY: as for LOAD; kernels run one at a time, so nothing else
                        // accesses this buffer during the write.
                        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem[buf].add(off), bytes.len()) };
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
                (Ops::Special, _) => Some(Value::Scalar(ConstValue::Int(core as i64))),
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
        Ok(())
    }
}

/// Byte offset of element `idx` of buffer `buf`, or an error naming the out-of-bounds access.
fn check(bufs: &[Arc<Buffer>], buf: usize, idx: i64) -> Result<usize> {
    let b = &bufs[buf];
    if idx < 0 || idx as usize >= b.size() {
        return Err(Error::Device(format!("INTERP: index {idx} out of bounds for buffer {buf} of size {}", b.size())));
    }
    Ok(idx as usize * b.dtype().itemsize())
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
    fn run(&self, bufs: &[Arc<Buffer>]) -> Result<Duration> {
        let start = Instant::now();
        for core in 0..self.threads {
            self.execute(bufs, core)?;
        }
        Ok(start.elapsed())
    }
}
