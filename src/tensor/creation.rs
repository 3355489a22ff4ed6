//! Tensors from Rust data and the standard constructors.

use std::sync::Arc;

use super::elementwise::Scalar;
use super::Tensor;
use crate::dtype::{DType, Element, Scalar as Kind};
use crate::error::{ensure, Error, OrPanic, Result};
use crate::runtime::buffer_view;
use crate::runtime::{default_device, Buffer};
use crate::uop::exec::cast_const;
use crate::uop::{Arg, Ops, Sint, UOp};

/// Rust values a tensor can be built from: scalars, `Vec`s, slices and nested arrays.
pub trait TensorData {
    type Elem: Element;
    /// Append the elements in row-major order and return the shape.
    fn flatten_into(&self, out: &mut Vec<Self::Elem>) -> Vec<usize>;
}

impl<T: Element> TensorData for T {
    type Elem = T;
    fn flatten_into(&self, out: &mut Vec<T>) -> Vec<usize> {
        out.push(*self);
        vec![]
    }
}

impl<A: TensorData, const N: usize> TensorData for [A; N] {
    type Elem = A::Elem;
    fn flatten_into(&self, out: &mut Vec<A::Elem>) -> Vec<usize> {
        let inner = flatten_rows(self.iter(), out);
        let mut shape = vec![N];
        shape.extend(inner);
        shape
    }
}

impl<A: TensorData> TensorData for Vec<A> {
    type Elem = A::Elem;
    fn flatten_into(&self, out: &mut Vec<A::Elem>) -> Vec<usize> {
        self.as_slice().flatten_into(out)
    }
}

impl<A: TensorData> TensorData for &[A] {
    type Elem = A::Elem;
    fn flatten_into(&self, out: &mut Vec<A::Elem>) -> Vec<usize> {
        let inner = flatten_rows(self.iter(), out);
        let mut shape = vec![self.len()];
        shape.extend(inner);
        shape
    }
}

/// The shape of nested rows whose lengths differ (a ragged `Vec<Vec<_>>`): `Tensor::new` has no
/// shape for them.
const RAGGED: [usize; 1] = [usize::MAX];

/// Append each row's elements and return the rows' common shape (`RAGGED` for ragged rows).
fn flatten_rows<'a, A: TensorData + 'a>(rows: impl Iterator<Item = &'a A>, out: &mut Vec<A::Elem>) -> Vec<usize> {
    let mut inner = vec![];
    for (i, a) in rows.enumerate() {
        let s = a.flatten_into(out);
        if (i > 0 && s != inner) || s.contains(&usize::MAX) {
            return RAGGED.to_vec();
        }
        inner = s;
    }
    inner
}

impl Tensor {
    /// A tensor holding `data` (scalar, array, nested arrays, `Vec`) on the default device.
    pub fn new<D: TensorData>(data: D) -> Tensor {
        Tensor::try_new(data).or_panic()
    }
    /// `new`, reporting ragged nested data or a failed copy to the device as an error.
    pub fn try_new<D: TensorData>(data: D) -> Result<Tensor> {
        let mut flat = vec![];
        let shape = data.flatten_into(&mut flat);
        ensure(!shape.contains(&usize::MAX), || {
            Error::value("Tensor::new", "ragged nested data: rows differ in shape")
        })?;
        Tensor::from_elements("Tensor::new", &flat, &shape)
    }
    /// A tensor of `shape` from row-major `data`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Tensor {
        Tensor::from_elements("Tensor::from_vec", &data, shape).or_panic()
    }
    /// A tensor of `shape` from row-major `data` (copied to the device now).
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        Tensor::try_from_slice(data, shape).or_panic()
    }
    /// `from_slice`, reporting data that does not fill `shape` or a failed copy as an error.
    pub fn try_from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_elements("Tensor::from_slice", data, shape)
    }
    fn from_elements<T: Element>(op: &'static str, data: &[T], shape: &[usize]) -> Result<Tensor> {
        let n = super::checked_numel(op, shape, T::DTYPE)?;
        ensure(n == data.len(), || {
            Error::shape(op, &[shape], format!("{} elements do not fill the shape", data.len()))
        })?;
        let mut bytes = Vec::with_capacity(n * T::DTYPE.itemsize());
        data.iter().for_each(|v| v.write_le(&mut bytes));
        Tensor::try_from_bytes(&bytes, shape, T::DTYPE, &default_device())
    }
    /// A tensor of `shape` on `device` from row-major values of mixed kinds, as tinygrad builds
    /// one from Python numbers: `dtype`, else float32 if any value is a float, int32 if any is an
    /// int (int64 where a value leaves int32's range, as numpy infers: an inferred dtype never
    /// wraps a value), bool if all are bools, and float32 for no values. Each value is converted
    /// to the dtype once (a float to float16 rounds once, not through float32); an integer dtype
    /// asked for takes a value outside its range wrapped to its width, as tinygrad and torch do
    /// (`-1` as uint8 is 255, a float truncated toward zero first), and NaN or infinity there is
    /// `Error::Unrepresentable`.
    pub fn from_scalars(values: &[Scalar], shape: &[usize], dtype: Option<DType>, device: &str) -> Result<Tensor> {
        let dtype = dtype.unwrap_or_else(|| {
            let any = |f: &dyn Fn(&Scalar) -> bool| values.iter().any(f);
            let (min, max) = DType::INT32.int_range();
            match () {
                _ if values.is_empty() || any(&|v| matches!(v, Scalar::Float(_))) => DType::FLOAT32,
                _ if any(&|v| matches!(v, Scalar::Int(i) if !(min..=max).contains(&(*i as i128)))) => DType::INT64,
                _ if any(&|v| matches!(v, Scalar::Int(_))) => DType::INT32,
                _ => DType::BOOL,
            }
        });
        super::check_dtype("Tensor::from_scalars", dtype)?;
        let n = super::checked_numel("Tensor::from_scalars", shape, dtype)?;
        ensure(n == values.len(), || {
            Error::shape("Tensor::from_scalars", &[shape], format!("{} values do not fill the shape", values.len()))
        })?;
        let mut bytes = Vec::with_capacity(n * dtype.itemsize());
        for v in values {
            write_scalar(*v, dtype, &mut bytes)?;
        }
        Tensor::try_from_bytes(&bytes, shape, dtype, device)
    }
    /// A tensor of `shape` and `dtype` on `device` from little-endian bytes.
    pub fn from_bytes(bytes: &[u8], shape: &[usize], dtype: DType, device: &str) -> Tensor {
        Tensor::try_from_bytes(bytes, shape, dtype, device).or_panic()
    }
    /// `from_bytes`, reporting bytes that do not fill the shape, or a device that fails, as an
    /// error.
    pub fn try_from_bytes(bytes: &[u8], shape: &[usize], dtype: DType, device: &str) -> Result<Tensor> {
        super::check_dtype("Tensor::from_bytes", dtype)?;
        let n = super::checked_numel("Tensor::from_bytes", shape, dtype)?;
        ensure(n * dtype.itemsize() == bytes.len(), || {
            Error::shape(
                "Tensor::from_bytes",
                &[shape],
                format!("{} bytes do not hold {dtype:?} elements of this shape", bytes.len()),
            )
        })?;
        let buf = Arc::new(Buffer::new(device, n, dtype));
        buf.copyin(bytes)?;
        Ok(Tensor::from_uop(buffer_view(&buf, shape), device))
    }
    /// A tensor of `shape` and `dtype` on `device` over the host memory at `ptr`, neither copied
    /// nor owned (tinygrad's `Tensor.from_blob`): each kernel reads the memory as it is when it
    /// runs, so what is written to it shows in what is computed after. Panics where
    /// `try_from_blob` errs.
    ///
    /// # Safety
    /// As `try_from_blob`.
    pub unsafe fn from_blob(ptr: *mut u8, shape: &[usize], dtype: DType, device: &str) -> Tensor {
        // SAFETY: the caller's promise, passed on
        unsafe { Tensor::try_from_blob(ptr, shape, dtype, device) }.or_panic()
    }
    /// `from_blob`, reporting a dtype no tensor has, a shape too large, or a device whose memory
    /// is not the host's (only CPU and INTERP take host memory) as an error.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of the tensor's bytes for as long as the tensor, or a
    /// lazy tensor built on it, lives.
    pub unsafe fn try_from_blob(ptr: *mut u8, shape: &[usize], dtype: DType, device: &str) -> Result<Tensor> {
        super::check_dtype("Tensor::from_blob", dtype)?;
        let n = super::checked_numel("Tensor::from_blob", shape, dtype)?;
        let device = crate::runtime::canonical_device(device);
        // SAFETY: the caller's promise, passed on
        let buf = Arc::new(unsafe { Buffer::from_host_ptr(&device, ptr, n, dtype) }?);
        Ok(Tensor::from_uop(buffer_view(&buf, shape), &device))
    }
    /// An uninitialized (zero-filled on allocation) tensor.
    pub fn empty(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::try_empty(shape, dtype).or_panic()
    }
    /// `empty`, reporting a dtype no tensor has or a shape too large as an error.
    pub fn try_empty(shape: &[usize], dtype: DType) -> Result<Tensor> {
        super::check_dtype("Tensor::empty", dtype)?;
        let device = default_device();
        let buf = Arc::new(Buffer::new(&device, super::checked_numel("Tensor::empty", shape, dtype)?, dtype));
        Ok(Tensor::from_uop(buffer_view(&buf, shape), &device))
    }
    /// `empty` of a shape whose sizes may be symbolic (tinygrad's `Tensor.empty(2, v, 4)`):
    /// storage for the largest shape, viewed at `dims`.
    pub fn empty_sym(dims: &[Sint], dtype: DType) -> Tensor {
        let largest: Vec<usize> = dims.iter().map(Sint::max).collect();
        let whole: Vec<(Sint, Sint)> = dims.iter().map(|d| (Sint::Int(0), d.clone())).collect();
        Tensor::empty(&largest, dtype).shrink_sym(&whole)
    }
    /// `value` broadcast to `shape`; its dtype is the scalar's (f32/f64/int/bool).
    pub fn full(shape: &[usize], value: impl Into<Scalar>) -> Tensor {
        let v: Scalar = value.into();
        Tensor::full_dtype(shape, v, v.default_dtype())
    }
    /// `value` broadcast to `shape` as `dtype`.
    pub fn full_dtype(shape: &[usize], value: impl Into<Scalar>, dtype: DType) -> Tensor {
        Tensor::try_full_dtype(shape, value, dtype).or_panic()
    }
    /// `full_dtype`, reporting a dtype no tensor has or a shape too large as an error.
    pub fn try_full_dtype(shape: &[usize], value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
        super::check_dtype("Tensor::full", dtype)?;
        super::checked_numel("Tensor::full", shape, dtype)?;
        let device = default_device();
        let c = super::device_const(dtype, value.into().value(), &device);
        let ones = vec![1; shape.len()];
        let u = UOp::new(Ops::Reshape, dtype, vec![c], Arg::Shape(ones));
        let u = UOp::new(Ops::Expand, dtype, vec![u], Arg::Shape(shape.to_vec()));
        Ok(Tensor::from_uop(u, &device))
    }
    pub fn zeros(shape: &[usize]) -> Tensor {
        Tensor::full(shape, 0.0f32)
    }
    pub fn ones(shape: &[usize]) -> Tensor {
        Tensor::full(shape, 1.0f32)
    }
    /// Zeros of this tensor's shape and dtype, on its device.
    pub fn zeros_like(&self) -> Tensor {
        self.full_like(0)
    }
    /// Ones of this tensor's shape and dtype, on its device.
    pub fn ones_like(&self) -> Tensor {
        self.full_like(1)
    }
    /// `value` in this tensor's shape and dtype, on its device.
    pub fn full_like(&self, value: impl Into<Scalar>) -> Tensor {
        self.const_tensor(value.into(), self.dtype()).expand(&self.shape())
    }
    /// `0, 1, ..., n-1` as int32.
    pub fn arange(n: usize) -> Tensor {
        Tensor::arange_step(0.0, n as f64, 1.0, DType::INT32)
    }
    /// `start, start+step, ...` below `stop` (above, for a negative step), as `dtype`.
    ///
    /// Built on the device as tinygrad builds it: a running sum of ones (a reduction over
    /// windows of a padded vector), which the reduce-folding pass turns back into the loop index,
    /// so a kernel using it computes `i` instead of loading or summing anything.
    pub fn arange_step(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
        Tensor::try_arange_step(start, stop, step, dtype).or_panic()
    }
    /// `arange_step`, reporting a zero or non-finite step or bound, or a count past int32, as an
    /// error.
    pub fn try_arange_step(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        ensure(start.is_finite() && stop.is_finite() && step.is_finite() && step != 0.0, || {
            Error::value(
                "arange",
                format!("start {start}, stop {stop} and step {step} must be finite, the step non-zero"),
            )
        })?;
        super::check_dtype("arange", dtype)?;
        let count = ((stop - start) / step).ceil().max(0.0);
        // the running index below counts in int32
        ensure(count <= i32::MAX as f64, || {
            Error::value("arange", format!("{count} elements from {start} to {stop} by {step} exceed int32"))
        })?;
        let n = count as usize;
        if n == 0 {
            return Tensor::try_empty(&[0], dtype);
        }
        let (len, w) = (2 * n - 1, n as isize);
        // W[i][k] = padded[i + k]: one row per output, a window of n each
        let windows = Tensor::full_dtype(&[n], 1, DType::INT32)
            .pad(&[(n - 1, 0)])
            .reshape(&[1, len])
            .expand(&[n + 1, len])
            .reshape(&[((n + 1) * len) as isize])
            .shrink(&[(0, n * (len + 1))])
            .reshape(&[w, len as isize + 1])
            .shrink(&[(0, n), (0, n)]);
        let index = windows.sum(1, false) - 1;
        if dtype.is_int() && step == 1.0 && start == 0.0 {
            return Ok(index.cast(dtype));
        }
        // integers stepped by integers in the dtype, exactly; else in the dtype's float (float32
        // below float64), as numpy fills an arange
        if dtype.is_int() && start.fract() == 0.0 && step.fract() == 0.0 {
            return Ok(index.cast(dtype) * step as i64 + start as i64);
        }
        let float = if dtype == DType::FLOAT64 { DType::FLOAT64 } else { DType::FLOAT32 };
        Ok((index.cast(float) * step + start).cast(dtype))
    }
    /// tinygrad's `arange(start, stop, step, dtype)` over Python-like numbers: without `dtype`,
    /// float32 if any of the three is a float, else int32, or int64 where the range leaves int32.
    /// An integer `dtype` that cannot hold the range is an error ("not representable"), not a
    /// wrapped sequence.
    pub fn arange_of(start: Scalar, stop: Scalar, step: Scalar, dtype: Option<DType>) -> Tensor {
        Tensor::try_arange_of(start, stop, step, dtype).or_panic()
    }
    /// `arange_of`, reporting a range the dtype cannot hold or a bad step as an error.
    pub fn try_arange_of(start: Scalar, stop: Scalar, step: Scalar, dtype: Option<DType>) -> Result<Tensor> {
        let [a, b, c] = [start, stop, step].map(|v| v.value().as_f64());
        let (lo, hi) = if c > 0.0 { (a, b - c) } else { (b - c, a) };
        let holds = |d: DType| {
            let (min, max) = d.int_range();
            !d.is_int() || (lo >= min as f64 && hi <= max as f64)
        };
        let dtype = dtype.unwrap_or_else(|| match () {
            _ if [start, stop, step].iter().any(|v| matches!(v, Scalar::Float(_))) => DType::FLOAT32,
            _ if holds(DType::INT32) => DType::INT32,
            _ => DType::INT64,
        });
        let empty = (b - a) / c <= 0.0;
        ensure(empty || holds(dtype), || Error::Unrepresentable {
            op: "arange",
            value: format!("[{a}, {b}) by {c}"),
            dtype,
        })?;
        Tensor::try_arange_step(a, b, c, dtype)
    }
    /// `steps` evenly spaced float32 values from `start` to `stop`, both included.
    pub fn linspace(start: f64, stop: f64, steps: usize) -> Tensor {
        Tensor::linspace_as(start, stop, steps, DType::FLOAT32).or_panic()
    }
    /// `linspace` computed in float32 and cast to `dtype` (bool has no spacing: an error).
    pub fn linspace_as(start: f64, stop: f64, steps: usize, dtype: DType) -> Result<Tensor> {
        if dtype.is_bool() {
            return Err(Error::DTypes { op: "linspace", dtypes: vec![dtype], reason: "bool has no spacing".into() });
        }
        if steps == 1 {
            return Ok(Tensor::full_dtype(&[1], start, dtype));
        }
        let step = (stop - start) / (steps as f64 - 1.0);
        Ok(Tensor::arange(steps).mul(step).add(start).cast(dtype))
    }
    /// The `n`×`n` identity matrix (float32).
    pub fn eye(n: usize) -> Tensor {
        Tensor::eye_rect(n, n)
    }
    /// The `rows`×`cols` matrix with ones on the main diagonal (float32; tinygrad's `eye(n, m)`).
    pub fn eye_rect(rows: usize, cols: usize) -> Tensor {
        let i = Tensor::arange(rows).reshape(&[rows, 1]);
        let j = Tensor::arange(cols).reshape(&[1, cols]);
        i.eq(&j).cast(DType::FLOAT32)
    }
}

/// `x` rounded once to the nearest float16 (ties to even). It goes through float32 rounded to
/// odd: with 13 bits to spare, that keeps the information the second rounding needs, so no
/// value lands on a false tie (`half`'s `from_f64` rounds twice).
fn f16_rounded_once(x: f64) -> half::f16 {
    let mut r = x as f32;
    if r.is_finite() && f64::from(r) != x && r.to_bits() & 1 == 0 {
        // the neighbour on x's side has an odd last bit
        let away = (f64::from(r).abs() < x.abs()) as i32 * 2 - 1;
        r = f32::from_bits((r.to_bits() as i32 + away) as u32);
    }
    half::f16::from_f32(r)
}

/// Appends `v` as a little-endian `dtype` value: floats rounded once to the dtype, integers (and
/// floats truncated toward zero) wrapped to an integer dtype's width.
fn write_scalar(v: Scalar, dtype: DType, out: &mut Vec<u8>) -> Result<()> {
    if dtype.is_int() {
        let whole = match v {
            Scalar::Float(f) if f.is_finite() => f.trunc() as i128,
            Scalar::Float(_) => return Err(Error::Unrepresentable { op: "Tensor", value: format!("{v:?}"), dtype }),
            Scalar::Int(i) => i as i128,
            Scalar::Bool(b) => b as i128,
        };
        // two's complement: the low bytes are the wrapped value in every integer width
        out.extend_from_slice(&whole.to_le_bytes()[..dtype.itemsize()]);
        return Ok(());
    }
    let c = cast_const(v.value(), dtype);
    match dtype.scalar {
        Kind::Bool => out.push(c.as_bool() as u8),
        Kind::Float16 => out.extend_from_slice(&f16_rounded_once(v.value().as_f64()).to_le_bytes()),
        Kind::BFloat16 => out.extend_from_slice(&half::bf16::from_f64(v.value().as_f64()).to_le_bytes()),
        Kind::Float32 => out.extend_from_slice(&(v.value().as_f64() as f32).to_le_bytes()),
        Kind::Float64 => out.extend_from_slice(&v.value().as_f64().to_le_bytes()),
        _ => unreachable!("check_dtype admits tensor dtypes only, not {dtype:?}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(values: &[Scalar], dtype: Option<DType>) -> Result<Tensor> {
        Tensor::from_scalars(values, &[values.len()], dtype, "CPU")
    }

    #[test]
    fn from_scalars_picks_tinygrads_dtypes() {
        let dtype = |v: &[Scalar]| made(v, None).unwrap().dtype();
        assert_eq!(dtype(&[]), DType::FLOAT32);
        assert_eq!(dtype(&[Scalar::Bool(true)]), DType::BOOL);
        assert_eq!(dtype(&[Scalar::Bool(true), Scalar::Int(2)]), DType::INT32);
        assert_eq!(dtype(&[Scalar::Int(2), Scalar::Float(0.5)]), DType::FLOAT32);
    }

    #[test]
    fn from_scalars_infers_a_dtype_that_holds_them_and_wraps_to_one_asked_for() {
        let inferred = made(&[Scalar::Int(1 << 40), Scalar::Int(5)], None).unwrap();
        assert_eq!((inferred.dtype(), inferred.to_vec::<i64>()), (DType::INT64, vec![1 << 40, 5]));
        assert_eq!(made(&[Scalar::Int(-(1 << 31)), Scalar::Int(5)], None).unwrap().dtype(), DType::INT32);
        let bytes = made(&[Scalar::Int(-1), Scalar::Int(256), Scalar::Float(-1.5)], Some(DType::UINT8)).unwrap();
        assert_eq!(bytes.to_vec::<u8>(), [255, 0, 255]);
        let big = made(&[Scalar::Float(1.5e10)], Some(DType::INT32)).unwrap();
        assert_eq!(big.to_vec::<i32>(), [15_000_000_000i64 as i32]);
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = made(&[Scalar::Float(v)], Some(DType::INT32)).unwrap_err();
            assert!(matches!(e, Error::Unrepresentable { dtype: DType::INT32, .. }), "{v} as int32: {e:?}");
        }
        let edge = made(&[Scalar::Int(255), Scalar::Float(-1.9)], Some(DType::INT16)).unwrap();
        assert_eq!(edge.to_vec::<i16>(), [255, -1]);
        let wide = made(&[Scalar::Int((1 << 40) + 1), Scalar::Int(-1)], Some(DType::INT64)).unwrap();
        assert_eq!(wide.to_vec::<i64>(), [(1 << 40) + 1, -1]);
        assert_eq!(made(&[Scalar::Int(-1)], Some(DType::UINT64)).unwrap().to_vec::<u64>(), [u64::MAX]);
    }

    #[test]
    fn float16_from_a_float_rounds_once() {
        // 1 + 2^-11 + 2^-30 rounds up to 1 + 2^-10 in float16 directly, but through float32 it
        // first becomes the tie 1 + 2^-11, which rounds to even: 1
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-30);
        let t = made(&[Scalar::Float(x)], Some(DType::FLOAT16)).unwrap();
        assert_eq!(t.to_vec::<half::f16>(), [half::f16::from_f64(1.0 + 2f64.powi(-10))]);
    }

    #[test]
    fn arange_picks_tinygrads_dtype_and_linspace_refuses_bool() {
        let dtype = |a: i64, b: i64| Tensor::arange_of(Scalar::Int(a), Scalar::Int(b), Scalar::Int(1), None).dtype();
        assert_eq!(dtype(0, 5), DType::INT32);
        assert_eq!(dtype(1 << 31, (1 << 31) + 3), DType::INT64);
        let up = Tensor::arange_of(Scalar::Int(1 << 31), Scalar::Int((1 << 31) + 3), Scalar::Int(1), None);
        assert_eq!(up.to_vec::<i64>(), [1 << 31, (1 << 31) + 1, (1 << 31) + 2]);
        let half = Tensor::arange_of(Scalar::Int(0), Scalar::Int(2), Scalar::Float(0.5), None);
        assert_eq!(half.to_vec::<f32>(), [0.0, 0.5, 1.0, 1.5]);
        let int8 = |a: i64, b: i64, c: i64| {
            Tensor::try_arange_of(Scalar::Int(a), Scalar::Int(b), Scalar::Int(c), Some(DType::INT8))
        };
        assert!(int8(-128, 128, 1).is_ok() && int8(127, -129, -1).is_ok(), "int8's whole range");
        assert!(int8(0, 129, 1).is_err() && int8(-129, 0, 1).is_err() && int8(127, -130, -1).is_err());
        assert!(Tensor::linspace_as(5.0, 10.0, 3, DType::BOOL).is_err());
        assert_eq!(Tensor::linspace_as(5.0, 10.0, 3, DType::INT32).unwrap().to_vec::<i32>(), [5, 7, 10]);
    }
}
