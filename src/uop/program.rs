//! The program a device runs: a kernel's linearized UOps, its source, its name and its launch.
//! Beneath codegen, which makes it, and the runtime, which runs it.
//! Codegen produces it with a renderer; the devices compile and launch it.

use crate::uop::{Arg, LinearProgram, Ops, Special, UOp};

use super::name::KernelName;

/// A kernel ready for a device: its linearized UOps and, for compiled devices, its source.
#[derive(Clone, Debug)]
pub struct ProgramSpec {
    /// Named after the loops left after opts; rendered plain, it is the C function's name.
    pub name: KernelName,
    pub uops: LinearProgram,
    pub src: String,
    /// Arithmetic ops one run performs (for DEBUG=2 GFLOP/s).
    pub ops: u64,
    /// The launch: workgroups along each dim, or for a CPU kernel its threads in dim 0, each
    /// with its own `core_id`.
    pub global_size: [usize; 3],
    /// Threads of one workgroup along each dim; None for a kernel without workgroups (CPU).
    /// Where a launch dim spans a symbolic loop, `global_size` holds its largest value and
    /// `grid` the count at each launch.
    pub local_size: Option<[usize; 3]>,
}

/// How many workgroups a launch runs along each dim: fixed, or given by the kernel's variables.
#[derive(Clone, Debug)]
pub struct LaunchGrid {
    fixed: Option<[usize; 3]>,
    dims: [UOp; 3],
    vars: Vec<UOp>,
}

impl LaunchGrid {
    /// The workgroups of a launch whose variables have the values `vals`.
    pub fn at(&self, vals: &[i64]) -> [usize; 3] {
        self.fixed.unwrap_or_else(|| {
            self.dims.clone().map(|d| crate::uop::variable::value_at(&d, &self.vars, vals).max(1) as usize)
        })
    }
}

impl ProgramSpec {
    /// The workgroup counts as expressions of the kernel's variables (the sizes of its group
    /// SPECIALs), for a device program to evaluate at each launch.
    pub fn grid(&self) -> LaunchGrid {
        let mut dims = [(); 3].map(|_| UOp::index_const(1));
        for u in &self.uops {
            if let (Ops::Special, Arg::Special(Special::Group(d))) = (u.op(), u.arg()) {
                dims[*d] = u.src()[0].clone();
            }
        }
        let fixed = dims.iter().all(|d| d.const_int_value().is_some());
        LaunchGrid {
            fixed: fixed.then_some(self.global_size),
            dims,
            vars: crate::uop::variable::kernel_vars(&self.uops),
        }
    }
    /// The names of the variables the kernel reads: its integer arguments after the buffers,
    /// in this order.
    pub fn vars(&self) -> Vec<String> {
        crate::uop::variable::kernel_vars(&self.uops)
            .iter()
            .map(|v| crate::uop::variable::var_name(v).to_string())
            .collect()
    }
    /// The buffer slots the kernel uses, ascending: its pointer arguments, in order, on devices
    /// whose kernels take one argument per used buffer (OpenCL, CUDA).
    pub fn param_slots(&self) -> Vec<usize> {
        let mut slots: Vec<usize> = self
            .uops
            .iter()
            .filter_map(|u| match (u.op(), u.arg()) {
                (Ops::Param, Arg::Int(slot)) => Some(*slot as usize),
                _ => None,
            })
            .collect();
        slots.sort();
        slots.dedup();
        slots
    }
}
