//! The op set of the one IR, and the groups passes dispatch on.

/// Every operation a `UOp` can be. Tensor-level, kernel-level and decomposed ops share one enum
/// so that every stage is the same kind of graph.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Ops {
    // graph structure
    Sink,
    Noop,
    // tensor level: data
    Buffer,
    /// A tensor-level CONST's device (`Arg::Str`), its one source: equal constants on two
    /// devices are two graphs, as buffers on two devices are.
    Device,
    Const,
    Contiguous,
    Detach,
    Copy,
    Assign,
    /// A named tensor function (`Arg::Call`, or `Arg::Function` for a traced one): its value is
    /// `src[0]`, its inputs `src[1..]`, and autograd uses the function's own backward rule
    /// instead of differentiating `src[0]`. Scheduling inlines it.
    Call,
    // movement
    Reshape,
    Permute,
    Expand,
    Pad,
    Shrink,
    Flip,
    // reduce (tensor level carries axes, kernel level carries its ranges as sources)
    ReduceAxis,
    Reduce,
    // kernel level
    Param,
    Range,
    Index,
    Load,
    Store,
    End,
    DefineReg,
    /// Memory shared by the threads of one workgroup (`src[0]`: its size in elements).
    DefineLocal,
    /// Every thread of the workgroup waits here until all have arrived (`src`: the stores it
    /// orders before what reads after it).
    Barrier,
    After,
    /// A launch dimension: the id of the CPU thread (or GPU block/thread) running the kernel.
    Special,
    /// A vector built from scalar lanes (all sources the same scalar: a broadcast).
    Vectorize,
    /// Lane `arg` of a vector.
    Gep,
    /// A warp's tensor-core multiply-accumulate (`Arg::Wmma`): sources are this thread's
    /// fragments of A, B and C as vectors, the value its fragment of `A·B + C`.
    Wmma,
    // unary ALU
    Exp2,
    Log2,
    Sin,
    Sqrt,
    Recip,
    Trunc,
    Neg,
    // binary ALU
    Add,
    Mul,
    Max,
    CmpLt,
    CmpNe,
    CmpEq,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    IDiv,
    Mod,
    Pow,
    Sub,
    FDiv,
    // ternary ALU
    Where,
    MulAcc,
    // type changes
    Cast,
    Bitcast,
    // symbolic sizes (last, so that adding them left the other ops' hashes alone)
    /// A symbolic integer (`Arg::Var`: name, min, max): a size or offset known only when the
    /// graph runs. In a kernel it is a parameter, so one program serves every value.
    DefineVar,
    /// A DEFINE_VAR (`src[0]`) with its value for this run (`src[1]`, a CONST). Realize strips
    /// it before scheduling, so caches key on the variable, not the value.
    Bind,
    // the schedule (last, for the same reason)
    /// A step of the schedule in its kernel graph (`Arg::Int`: the step's index): its sources are
    /// the buffer states it reads, each a BUFFER or the AFTER of the step that wrote it.
    Kernel,
    // many devices (last, for the same reason)
    /// A tensor over several devices: one graph per device (`src[i]` on the tuple's `i`th
    /// device). `Arg::Int(axis)`: split along `axis` into equal shards, the shape the shards'
    /// joined; `Arg::None`: each device holds all of it (replicated). Lowering before
    /// scheduling (`schedule/multi.rs`) pushes it up through the ops above it.
    Multi,
    /// `src[0]` combined over every process of the job (`Arg::Reduce(op)`: ADD, MUL or MAX): a
    /// copy step the schedule runs through the job's collective (`runtime/collective.rs`).
    AllReduce,
}

impl Ops {
    /// How many ops there are, one past the last one's discriminant: rule tables index their
    /// rules by op. (A new last op updates it.)
    pub const COUNT: usize = Ops::AllReduce as usize + 1;
    pub const UNARY: &'static [Ops] = &[Ops::Exp2, Ops::Log2, Ops::Sin, Ops::Sqrt, Ops::Recip, Ops::Trunc, Ops::Neg];
    pub const BINARY: &'static [Ops] = &[
        Ops::Add,
        Ops::Mul,
        Ops::Max,
        Ops::CmpLt,
        Ops::CmpNe,
        Ops::CmpEq,
        Ops::And,
        Ops::Or,
        Ops::Xor,
        Ops::Shl,
        Ops::Shr,
        Ops::IDiv,
        Ops::Mod,
        Ops::Pow,
        Ops::Sub,
        Ops::FDiv,
    ];
    pub const TERNARY: &'static [Ops] = &[Ops::Where, Ops::MulAcc];
    pub const MOVEMENT: &'static [Ops] = &[Ops::Reshape, Ops::Permute, Ops::Expand, Ops::Pad, Ops::Shrink, Ops::Flip];
    /// Binary ops whose operands can be swapped.
    pub const COMMUTATIVE: &'static [Ops] =
        &[Ops::Add, Ops::Mul, Ops::Max, Ops::CmpNe, Ops::CmpEq, Ops::And, Ops::Or, Ops::Xor];
    /// Comparisons: their result is bool whatever the operand dtype.
    pub const COMPARISON: &'static [Ops] = &[Ops::CmpLt, Ops::CmpNe, Ops::CmpEq];

    pub fn is_alu(self) -> bool {
        self.is_unary() || self.is_binary() || self.is_ternary()
    }
    pub fn is_unary(self) -> bool {
        Ops::UNARY.contains(&self)
    }
    pub fn is_binary(self) -> bool {
        Ops::BINARY.contains(&self)
    }
    pub fn is_ternary(self) -> bool {
        Ops::TERNARY.contains(&self)
    }
    pub fn is_movement(self) -> bool {
        Ops::MOVEMENT.contains(&self)
    }
    pub fn is_commutative(self) -> bool {
        Ops::COMMUTATIVE.contains(&self)
    }
    pub fn is_comparison(self) -> bool {
        Ops::COMPARISON.contains(&self)
    }
    /// Upper-case name as tinygrad prints it.
    pub fn name(self) -> String {
        match self {
            Ops::ReduceAxis => "REDUCE_AXIS".into(),
            Ops::DefineReg => "DEFINE_REG".into(),
            Ops::DefineLocal => "DEFINE_LOCAL".into(),
            Ops::DefineVar => "DEFINE_VAR".into(),
            Ops::AllReduce => "ALLREDUCE".into(),
            _ => format!("{self:?}").to_ascii_uppercase(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ops;

    #[test]
    fn names_read_like_tinygrad() {
        assert_eq!(Ops::ReduceAxis.name(), "REDUCE_AXIS");
        assert_eq!(Ops::CmpLt.name(), "CMPLT");
        assert_eq!(Ops::IDiv.name(), "IDIV");
        assert_eq!(Ops::Exp2.name(), "EXP2");
    }
}
