//! Reading `fixtures/torch_ref.bin` (format documented in `tools/gen_reference.py`) and comparing
//! lazygrad's results with the stored ones.

use half::{bf16, f16};
use lazygrad::DType;

use crate::common::Reader;
/// A host array as stored: dtype, shape and row-major little-endian bytes.
pub use crate::common::{Array, Tol};

/// One stored input: its data and whether the reference took a gradient for it.
#[derive(Debug)]
pub struct Input {
    pub array: Array,
    pub requires_grad: bool,
}

/// One stored output and the `upstream` its gradient contribution is weighted with (floats only).
#[derive(Debug)]
pub struct Output {
    pub value: Array,
    pub upstream: Option<Array>,
}

#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub group: String,
    pub op: String,
    pub params: String,
    pub tol: Tol,
    pub grad_tol: Tol,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    /// `(input index, gradient)` for every input the reference has a gradient for.
    pub grads: Vec<(usize, Array)>,
}

/// The dtype torch calls `name` (without the `torch.` prefix).
pub fn dtype_from_name(name: &str) -> DType {
    DType::from_name(name).unwrap_or_else(|| panic!("torch_ref.bin: unknown dtype {name:?}"))
}

/// Every case in the fixture file.
pub fn parse(data: &[u8]) -> Vec<Case> {
    let mut r = Reader::new(data, "torch_ref.bin");
    assert_eq!(r.take(4), b"LGTR", "torch_ref.bin: bad magic");
    assert_eq!(r.u32(), 1, "torch_ref.bin: unsupported version");
    let n = r.u32() as usize;
    let cases: Vec<Case> = (0..n)
        .map(|_| {
            let (name, group, op, params) = (r.str(), r.str(), r.str(), r.str());
            let tol = Tol { atol: r.f64(), rtol: r.f64() };
            let grad_tol = Tol { atol: r.f64(), rtol: r.f64() };
            let inputs =
                (0..r.u8()).map(|_| Input { requires_grad: r.u8() != 0, array: r.array() }).collect::<Vec<_>>();
            let outputs = (0..r.u8())
                .map(|_| {
                    let value = r.array();
                    let upstream = (r.u8() != 0).then(|| r.array());
                    Output { value, upstream }
                })
                .collect();
            let grads = (0..r.u8()).map(|_| (r.u8() as usize, r.array())).collect();
            Case { name, group, op, params, tol, grad_tol, inputs, outputs, grads }
        })
        .collect();
    r.finish();
    cases
}

/// The elements of a float array as f64.
fn floats(a: &Array) -> Vec<f64> {
    let it = a.dtype.itemsize();
    a.bytes
        .chunks_exact(it)
        .map(|c| match a.dtype {
            DType::FLOAT16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::BFLOAT16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::FLOAT32 => f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
            DType::FLOAT64 => f64::from_le_bytes(c.try_into().expect("8 bytes")),
            d => unreachable!("not a float dtype: {d:?}"),
        })
        .collect()
}

/// `Err` with a short description when `got` differs from `want`: dtype, shape, then values
/// (floats within `tol`, NaN matching NaN and infinities matching exactly; everything else bitwise).
pub fn compare(what: &str, got: &Array, want: &Array, tol: Tol) -> Result<(), String> {
    if got.dtype != want.dtype {
        return Err(format!("{what}: dtype {:?}, want {:?}", got.dtype, want.dtype));
    }
    if got.shape != want.shape {
        return Err(format!("{what}: shape {:?}, want {:?}", got.shape, want.shape));
    }
    if !want.dtype.is_float() {
        return match got.bytes == want.bytes {
            true => Ok(()),
            false => Err(format!("{what}: {:?} data differs (exact compare)", want.dtype)),
        };
    }
    let (g, w) = (floats(got), floats(want));
    let bad: Vec<usize> = (0..w.len()).filter(|&i| !crate::common::close(g[i], w[i], tol)).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} values off, first at flat index {i}: got {}, want {} (atol {}, rtol {})",
            bad.len(),
            w.len(),
            g[i],
            w[i],
            tol.atol,
            tol.rtol
        )),
    }
}
