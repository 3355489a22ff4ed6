//! Tensor cores: one warp computes `D = A·B + C` on small matrix tiles in one instruction (the
//! WMMA op). Each of the warp's 32 threads holds a few elements of every operand, as a vector;
//! where each element lies in its tile is the instruction's fragment layout, written here as
//! data so that codegen (which builds the vectors), the renderers (CUDA's `mma.sync`, Metal's
//! `simdgroup_multiply_accumulate`) and INTERP (which emulates it) read one description.

use super::{Ops, UOp};
use crate::dtype::DType;

/// The threads that run one tensor-core instruction together.
pub const WARP: usize = 32;

/// Where a warp's threads hold the elements of one operand tile: bit `i` of the thread's lane
/// (its id within the warp) adds `lane[i]` to the element's (row, column), and bit `j` of the
/// element's index within the thread's vector adds `element[j]`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Fragment {
    pub lane: [(usize, usize); 5],
    pub element: &'static [(usize, usize)],
}

impl Fragment {
    /// Elements each thread holds.
    pub fn elements(&self) -> usize {
        1 << self.element.len()
    }

    /// The (row, column) of element `e` of lane `lane`.
    pub fn coord(&self, lane: usize, e: usize) -> (usize, usize) {
        let bits = self.lane.iter().enumerate().map(|(i, w)| (lane >> i & 1, w));
        let bits = bits.chain(self.element.iter().enumerate().map(|(j, w)| (e >> j & 1, w)));
        bits.fold((0, 0), |(r, c), (bit, w)| (r + bit * w.0, c + bit * w.1))
    }

    /// `coord` for the index `lane` (a value in `0..WARP`) as index expressions: each run of
    /// lane bits that steps one coordinate by doubling weights is one digit `(lane / 2^i) % 2^n`.
    pub fn coord_of(&self, lane: &UOp, e: usize) -> (UOp, UOp) {
        let (row, col) = self.coord(0, e);
        let mut out = [UOp::index_const(row as i64), UOp::index_const(col as i64)];
        // each lane bit moves one coordinate: (axis, weight)
        let step = |i: usize| match self.lane[i] {
            (w, 0) => (0, w),
            (0, w) => (1, w),
            _ => panic!("{self:?}: a lane bit moves both coordinates"),
        };
        let mut i = 0;
        while i < self.lane.len() {
            let (axis, weight) = step(i);
            let mut n = 1;
            while i + n < self.lane.len() && step(i + n) == (axis, weight << n) {
                n += 1;
            }
            let digit = lane
                .alu(Ops::IDiv, &[&UOp::index_const(1 << i)])
                .alu(Ops::Mod, &[&UOp::index_const(1 << n)])
                .alu(Ops::Mul, &[&UOp::index_const(weight as i64)]);
            out[axis] = out[axis].alu(Ops::Add, &[&digit]);
            i += n;
        }
        let [row, col] = out;
        (row, col)
    }
}

/// One tensor-core instruction: an `m x n x k` product of `input` tiles `A` (`m x k`) and `B`
/// (`k x n`) added to an `accumulate` tile `C` (`m x n`), each held by the warp as its fragment
/// says.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TensorCore {
    /// The instruction's name in DEBUG output, opts and the renderers' helpers.
    pub name: &'static str,
    /// `[m, n, k]`.
    pub dims: [usize; 3],
    pub input: DType,
    pub accumulate: DType,
    /// Whether float32 inputs are read as TF32 (NVIDIA's `m16n8k8`: rounded to 10 mantissa bits,
    /// ties away from zero) rather than as they are.
    pub tf32_inputs: bool,
    pub a: Fragment,
    pub b: Fragment,
    pub c: Fragment,
}

/// A fragment of a 16-row tile of NVIDIA's `mma.sync` `m16n8k*` instructions whose lanes hold
/// pairs of neighbouring columns: lane bits 0-1 pick the pair (columns 2, 4), bits 2-4 the row.
const ROWS_BY_GROUP_PAIRS_BY_THREAD: [(usize, usize); 5] = [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)];

/// `mma.sync.m16n8k16` with 16-bit float inputs (float16 or bfloat16) and float32 accumulators:
/// A's 8 elements per thread are two pairs of rows `g` and `g + 8`, then the same 8 columns on;
/// B's 4 are two pairs of rows of column `g`; C's 4 a pair in row `g` and one in row `g + 8`
/// (`g` the lane's group of 4, as PTX's ISA draws them).
const fn m16n8k16(name: &'static str, input: DType) -> TensorCore {
    TensorCore {
        name,
        dims: [16, 8, 16],
        input,
        accumulate: DType::FLOAT32,
        tf32_inputs: false,
        a: Fragment { lane: ROWS_BY_GROUP_PAIRS_BY_THREAD, element: &[(0, 1), (8, 0), (0, 8)] },
        b: Fragment { lane: [(2, 0), (4, 0), (0, 1), (0, 2), (0, 4)], element: &[(1, 0), (8, 0)] },
        c: Fragment { lane: ROWS_BY_GROUP_PAIRS_BY_THREAD, element: &[(0, 1), (8, 0)] },
    }
}

/// float16 inputs, float32 accumulators (sm_80 and newer).
pub static MMA_M16N8K16_F16_F32: TensorCore = m16n8k16("mma_m16n8k16_f16_f32", DType::FLOAT16);
/// bfloat16 inputs, float32 accumulators (sm_80 and newer).
pub static MMA_M16N8K16_BF16_F32: TensorCore = m16n8k16("mma_m16n8k16_bf16_f32", DType::BFLOAT16);
/// `mma.sync.m16n8k8` on float32 inputs read as TF32 (rounded to 10 mantissa bits), float32
/// accumulators (sm_80 and newer): A's 4 elements per thread are rows `g` and `g + 8` of
/// column `t`, then of column `t + 4`; B's 2 are rows `t` and `t + 4` of column `g`; C as above.
pub static MMA_M16N8K8_TF32_F32: TensorCore = TensorCore {
    name: "mma_m16n8k8_tf32_f32",
    dims: [16, 8, 8],
    input: DType::FLOAT32,
    accumulate: DType::FLOAT32,
    tf32_inputs: true,
    a: Fragment { lane: [(0, 1), (0, 2), (1, 0), (2, 0), (4, 0)], element: &[(8, 0), (0, 4)] },
    b: Fragment { lane: [(1, 0), (2, 0), (0, 1), (0, 2), (0, 4)], element: &[(4, 0)] },
    c: Fragment { lane: ROWS_BY_GROUP_PAIRS_BY_THREAD, element: &[(0, 1), (8, 0)] },
};

/// Apple's `simdgroup_matrix` 8x8, the same for A, B and C: each thread holds two neighbouring
/// columns of one row; lane bits 1, 2 and 4 step the row by 1, 2 and 4, bits 0 and 3 the column
/// by 2 and 4 (as tinygrad's Metal tensor cores swizzle their threads).
const SIMDGROUP_8X8: Fragment = Fragment { lane: [(0, 2), (1, 0), (2, 0), (0, 4), (4, 0)], element: &[(0, 1)] };

/// `simdgroup_multiply_accumulate` on 8x8 `simdgroup_matrix` tiles (Apple GPUs from the M1 on,
/// Apple7) with `input` elements and float32 sums.
const fn simdgroup_8x8x8(name: &'static str, input: DType) -> TensorCore {
    TensorCore {
        name,
        dims: [8, 8, 8],
        input,
        accumulate: DType::FLOAT32,
        tf32_inputs: false,
        a: SIMDGROUP_8X8,
        b: SIMDGROUP_8X8,
        c: SIMDGROUP_8X8,
    }
}

/// Metal's float16 x float16 -> float32 `simdgroup_matrix` product.
pub static SIMDGROUP_8X8X8_F16_F32: TensorCore = simdgroup_8x8x8("simdgroup_8x8x8_f16_f32", DType::FLOAT16);
/// Metal's float32 `simdgroup_matrix` product (full float32 inputs).
pub static SIMDGROUP_8X8X8_F32_F32: TensorCore = simdgroup_8x8x8("simdgroup_8x8x8_f32_f32", DType::FLOAT32);

/// NVIDIA's tensor cores from sm_80 on.
static NVIDIA_SM80: [&TensorCore; 3] = [&MMA_M16N8K16_F16_F32, &MMA_M16N8K16_BF16_F32, &MMA_M16N8K8_TF32_F32];
/// Apple's tensor cores from the M1 on.
static APPLE_SIMDGROUP: [&TensorCore; 2] = [&SIMDGROUP_8X8X8_F16_F32, &SIMDGROUP_8X8X8_F32_F32];

/// Every tensor core codegen knows.
fn all() -> impl Iterator<Item = &'static TensorCore> {
    NVIDIA_SM80.iter().chain(&APPLE_SIMDGROUP).copied()
}

/// The tensor cores of NVIDIA GPUs of compute capability 8.0 and newer that kernels may use: the
/// float16 and bfloat16 ones, and with `ALLOW_TF32=1` the TF32 one, which rounds float32
/// matmuls' inputs to 10 mantissa bits (off by default, as PyTorch's `allow_tf32`).
pub fn nvidia_sm80() -> Vec<&'static TensorCore> {
    let tf32 = crate::helpers::getenv("ALLOW_TF32", 0) != 0;
    NVIDIA_SM80.into_iter().filter(|tc| tf32 || !tc.tf32_inputs).collect()
}

/// The tensor cores of Apple GPUs from the M1 on that Metal kernels may use: `simdgroup_matrix`
/// products of float16 and of float32 tiles, both summed in float32.
pub fn apple_simdgroup() -> Vec<&'static TensorCore> {
    APPLE_SIMDGROUP.to_vec()
}

/// A tensor core by name (an opt read back from BEAM's cache).
pub fn by_name(name: &str) -> Option<&'static TensorCore> {
    all().find(|tc| tc.name == name)
}

/// `x` as TF32, rounded to nearest with ties away from zero (PTX's `cvt.rna.tf32.f32`).
fn tf32(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let bits = (x as f32).to_bits();
    f32::from_bits(bits.wrapping_add(1 << 12) & !((1 << 13) - 1)) as f64
}

impl TensorCore {
    /// `x`, an input element, as the instruction reads it: float32 as TF32 where `tf32_inputs`,
    /// else as it is.
    fn read_input(&self, x: f64) -> f64 {
        match self.tf32_inputs {
            true => tf32(x),
            false => x,
        }
    }

    /// What the warp's instruction computes, lane by lane: `a[lane]`, `b[lane]` and `c[lane]`
    /// are each thread's fragments; the result is each thread's fragment of `D`, summed in
    /// float64 (products of 16-bit, TF32 and float32 values are exact there) and rounded once to
    /// `accumulate`.
    pub fn run(&self, a: &[Vec<f64>], b: &[Vec<f64>], c: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let [m, n, k] = self.dims;
        let tile = |f: &Fragment, vals: &[Vec<f64>], cols: usize, rows: usize, read: &dyn Fn(f64) -> f64| {
            let mut t = vec![0.0; rows * cols];
            for (lane, v) in vals.iter().enumerate() {
                for (e, x) in v.iter().enumerate() {
                    let (r, col) = f.coord(lane, e);
                    t[r * cols + col] = read(*x);
                }
            }
            t
        };
        let input = |x| self.read_input(x);
        let (ta, tb) = (tile(&self.a, a, k, m, &input), tile(&self.b, b, n, k, &input));
        let tc = tile(&self.c, c, n, m, &|x| x);
        (0..WARP)
            .map(|lane| {
                (0..self.c.elements())
                    .map(|e| {
                        let (r, col) = self.c.coord(lane, e);
                        let sum = (0..k).fold(tc[r * n + col], |s, i| s + ta[r * k + i] * tb[i * n + col]);
                        crate::uop::exec::cast_value(super::ConstValue::Float(sum), DType::FLOAT64, self.accumulate)
                            .as_f64()
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operand's fragments cover its tile: every (row, column) held by exactly one lane.
    #[test]
    fn fragments_cover_their_tiles_once() {
        for tc in all() {
            let [m, n, k] = tc.dims;
            for (f, rows, cols) in [(&tc.a, m, k), (&tc.b, k, n), (&tc.c, m, n)] {
                let mut seen = vec![0; rows * cols];
                for lane in 0..WARP {
                    for e in 0..f.elements() {
                        let (r, c) = f.coord(lane, e);
                        seen[r * cols + c] += 1;
                    }
                }
                assert!(seen.iter().all(|&s| s == 1), "{}: {seen:?}", tc.name);
            }
        }
    }

    /// The PTX ISA's tables for `m16n8k16`: lane 5 is group 1, thread 1 of its group.
    #[test]
    fn m16n8k16_layout_is_ptxs() {
        let tc = &MMA_M16N8K16_F16_F32;
        let a: Vec<_> = (0..8).map(|e| tc.a.coord(5, e)).collect();
        assert_eq!(a, [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]);
        let b: Vec<_> = (0..4).map(|e| tc.b.coord(5, e)).collect();
        assert_eq!(b, [(2, 1), (3, 1), (10, 1), (11, 1)]);
        let c: Vec<_> = (0..4).map(|e| tc.c.coord(5, e)).collect();
        assert_eq!(c, [(1, 2), (1, 3), (9, 2), (9, 3)]);
        let tf32 = &MMA_M16N8K8_TF32_F32;
        let a: Vec<_> = (0..4).map(|e| tf32.a.coord(5, e)).collect();
        assert_eq!(a, [(1, 1), (9, 1), (1, 5), (9, 5)]);
        let b: Vec<_> = (0..2).map(|e| tf32.b.coord(5, e)).collect();
        assert_eq!(b, [(1, 1), (5, 1)]);
    }

    /// Apple's 8x8 `simdgroup_matrix` layout (each thread two neighbouring columns of a row):
    /// lane 5 holds row 2, columns 2 and 3; lane 26 row 5, columns 4 and 5.
    #[test]
    fn simdgroup_layout_is_apples() {
        for tc in apple_simdgroup() {
            for f in [&tc.a, &tc.b, &tc.c] {
                assert_eq!([f.coord(5, 0), f.coord(5, 1)], [(2, 2), (2, 3)], "{}", tc.name);
                assert_eq!([f.coord(26, 0), f.coord(26, 1)], [(5, 4), (5, 5)], "{}", tc.name);
            }
        }
    }

    /// TF32 keeps 10 mantissa bits, rounding half away from zero; only NVIDIA's TF32 instruction
    /// reads float32 that way.
    #[test]
    fn float32_inputs_are_read_as_tf32_only_by_the_tf32_instruction() {
        let ulp = 2f64.powi(-10);
        let tf32 = |x| MMA_M16N8K8_TF32_F32.read_input(x);
        assert_eq!(tf32(1.0 + ulp), 1.0 + ulp);
        assert_eq!(tf32(1.0 + ulp / 2.0), 1.0 + ulp, "a tie goes away from zero");
        assert_eq!(tf32(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(tf32(1.0 + ulp / 4.0), 1.0);
        assert_eq!(MMA_M16N8K16_F16_F32.read_input(1.0 + ulp / 2.0), 1.0 + ulp / 2.0, "16-bit inputs are exact");
        assert_eq!(SIMDGROUP_8X8X8_F32_F32.read_input(1.0 + ulp / 4.0), 1.0 + ulp / 4.0, "Metal reads float32");
    }

    /// The index expressions give `coord` for every lane.
    #[test]
    fn index_expressions_agree_with_coord() {
        let lane = UOp::new(
            Ops::Range,
            DType::INDEX,
            vec![UOp::index_const(32)],
            super::super::Arg::Range(0, super::super::AxisKind::Warp),
        );
        for tc in all() {
            for f in [&tc.a, &tc.b, &tc.c] {
                for e in 0..f.elements() {
                    let (r, c) = f.coord_of(&lane, e);
                    for l in 0..WARP {
                        let at = |x: &UOp| {
                            let mut map = super::super::UOpMap::from_iter([(lane.clone(), UOp::index_const(l as i64))]);
                            crate::uop::symbolic::simplify(&crate::uop::substitute(x, &mut map, "lane"))
                                .const_int_value()
                                .unwrap() as usize
                        };
                        assert_eq!((at(&r), at(&c)), f.coord(l, e), "{} lane {l} element {e}", tc.name);
                    }
                }
            }
        }
    }
}
