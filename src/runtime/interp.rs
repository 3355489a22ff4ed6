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

/// A value in a slot: a scalar, or an element address within a buffer.
#[derive(Clone, Copy)]
enum Value {
    Scalar(ConstValue),
    Addr { buf: usize, idx: i64, valid: bool },
}

impl Value {
    fn scalar(self) -> ConstValue {
        match self {
            Value::Scalar(c) => c,
            Value::Addr { .. } => panic!("INTERP: address used as a value"),
        }
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
            let s = |i: usize| vals[inst.src[i]];
            let value = match (inst.op, &inst.arg) {
                (Ops::Const, Arg::Const(c)) => Some(Value::Scalar(*c)),
                (Ops::Param, Arg::Int(slot)) => {
                    let buf = *slot as usize;
                    if buf >= bufs.len() {
                        return Err(Error::Device(format!("INTERP: PARAM {buf} but {} buffers", bufs.len())));
                    }
                    Some(Value::Addr { buf, idx: 0, valid: true })
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
                    let gate = inst.src.get(2).is_none_or(|_| s(2).scalar().as_bool());
                    Some(Value::Addr { buf, idx: idx + s(1).scalar().as_i64(), valid: valid && gate })
                }
                (Ops::Load, _) => {
                    let Value::Addr { buf, idx, valid } = s(0) else { panic!("INTERP: LOAD of a non-pointer") };
                    Some(Value::Scalar(if valid {
                        let off = check(bufs, buf, idx)?;
                        // SAFETY: `check` proved idx is within the buffer, so the element's
                        // itemsize bytes at `off` lie inside the live allocation.
                        let bytes = unsafe { std::slice::from_raw_parts(mem[buf].add(off), inst.dtype.itemsize()) };
                        read_elem(bytes, inst.dtype)
                    } else {
                        cast_value(ConstValue::Int(0), DType::INT64, inst.dtype)
                    }))
                }
                (Ops::Store, _) => {
                    let Value::Addr { buf, idx, valid } = s(0) else { panic!("INTERP: STORE to a non-pointer") };
                    if valid {
                        let off = check(bufs, buf, idx)?;
                        let bytes = write_elem(s(1).scalar(), inst.src_dtypes[1]);
                        // SAFETY: as for LOAD; kernels run one at a time, so nothing else
                        // accesses this buffer during the write.
                        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem[buf].add(off), bytes.len()) };
                    }
                    None
                }
                (Ops::DefineReg, _) => Some(s(0)),
                (Ops::Assign, _) => {
                    let new = s(1);
                    vals[inst.src[0]] = new;
                    Some(new)
                }
                (Ops::After, _) => Some(s(0)),
                (Ops::Cast, _) => Some(Value::Scalar(cast_value(s(0).scalar(), inst.src_dtypes[0], inst.dtype))),
                (Ops::Bitcast, _) => Some(Value::Scalar(bitcast_value(s(0).scalar(), inst.src_dtypes[0], inst.dtype))),
                (Ops::Special, _) => Some(Value::Scalar(ConstValue::Int(core as i64))),
                (Ops::Sink, _) => None,
                (op, _) if op.is_alu() => {
                    let operand = if op == Ops::Where { inst.src_dtypes[1] } else { inst.src_dtypes[0] };
                    let args: Vec<ConstValue> = (0..inst.src.len()).map(|i| s(i).scalar()).collect();
                    Some(Value::Scalar(exec_alu(op, operand, &args)))
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
