//! Python values to the Rust API's and back: numbers as weak scalars, nested lists, numpy arrays
//! and bytes as tensor data, shapes, axes, indices and window sizes, and tensors as nested lists
//! and numpy arrays.

use ::lazygrad::tensor::{Idx, Operand, Padding, Scalar, Spatial};
use ::lazygrad::{DType, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyList, PySequence, PySlice, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

use crate::dtype::numpy_dtype;
use crate::error::{checked, guard, invalid};
use crate::pytensor::PyTensor;

/// A Python number (or a numpy scalar) as a weak scalar (`t * 2` keeps `t`'s dtype), or None for
/// anything else; an int past int64 is a ValueError.
pub(crate) fn scalar(x: &Bound<PyAny>) -> PyResult<Option<Scalar>> {
    if x.is_instance_of::<PyBool>() {
        return Ok(Some(Scalar::Bool(x.extract()?)));
    }
    if x.is_instance_of::<PyInt>() {
        let i: i64 = x.extract().map_err(|_| PyValueError::new_err(format!("{x} does not fit int64")))?;
        return Ok(Some(Scalar::Int(i)));
    }
    if x.is_instance_of::<PyFloat>() {
        return Ok(Some(Scalar::Float(x.extract()?)));
    }
    // a numpy scalar (np.float32(1), np.int64(2), np.bool_(True)) by its kind
    if is_numpy(x) && x.getattr("shape")?.len()? == 0 {
        return scalar(&x.call_method0("item")?);
    }
    Ok(None)
}

/// A number, or a TypeError naming what `what` expected.
pub(crate) fn number(x: &Bound<PyAny>, what: &str) -> PyResult<Scalar> {
    scalar(x)?.ok_or_else(|| PyTypeError::new_err(format!("{what}: expected a number, got {}", type_name(x))))
}

fn type_name(x: &Bound<PyAny>) -> String {
    x.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an object".into())
}

/// Whether `x` is a numpy array or scalar.
fn is_numpy(x: &Bound<PyAny>) -> bool {
    x.get_type().module().is_ok_and(|m| m == "numpy") && x.hasattr("dtype").unwrap_or(false)
}

/// The right operand of a binary op: a Tensor or a Python number (an Operand of the Rust API).
pub(crate) enum Rhs {
    Tensor(Tensor),
    Scalar(Scalar),
}

impl Rhs {
    pub(crate) fn of(x: &Bound<PyAny>) -> PyResult<Rhs> {
        if let Ok(t) = x.cast::<PyTensor>() {
            return Ok(Rhs::Tensor(t.get().0.clone()));
        }
        match scalar(x)? {
            Some(s) => Ok(Rhs::Scalar(s)),
            None if x.is_instance_of::<PyList>() || x.is_instance_of::<PyTuple>() || is_numpy(x) => {
                Ok(Rhs::Tensor(data(x, None, None)?))
            }
            None => Err(PyTypeError::new_err(format!("expected a Tensor or a number, got {}", type_name(x)))),
        }
    }
    /// This operand as a tensor beside `lhs` (a number takes `lhs`'s dtype where it fits).
    pub(crate) fn tensor(self, lhs: &Tensor) -> Tensor {
        match self {
            Rhs::Tensor(t) => t,
            Rhs::Scalar(s) => s.with(lhs).0,
        }
    }
}

impl Operand for Rhs {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        match self {
            Rhs::Tensor(t) => t.with(lhs),
            Rhs::Scalar(s) => s.with(lhs),
        }
    }
    fn as_tensor(&self) -> Option<Tensor> {
        match self {
            Rhs::Tensor(t) => Some(t.clone()),
            Rhs::Scalar(_) => None,
        }
    }
}

/// Nesting deeper than this is refused (a tensor has far fewer axes).
const MAX_DEPTH: usize = 64;

/// A value of tensor data: a number (`scalar`), where an int past int64 is a float for a float
/// `dtype` (any size Python can round) and, up to `2**64 - 1` (a uint64's range), is taken
/// wrapped to 64 bits for an integer `dtype` (whose width then wraps it again, as tinygrad does)
/// and as a float otherwise.
fn element(x: &Bound<PyAny>, dtype: Option<DType>) -> PyResult<Option<Scalar>> {
    if x.is_instance_of::<PyInt>() && !x.is_instance_of::<PyBool>() && x.extract::<i64>().is_err() {
        if dtype.is_some_and(|d| d.is_float()) {
            // float(x), as Python rounds it (an OverflowError past float64)
            return Ok(Some(Scalar::Float(x.extract()?)));
        }
        let wide: u64 = x.extract().map_err(|_| PyValueError::new_err(format!("{x} does not fit 64 bits")))?;
        return Ok(Some(match dtype {
            Some(d) if d.is_int() => Scalar::Int(wide as i64),
            _ => Scalar::Float(wide as f64),
        }));
    }
    scalar(x)
}

/// Nested lists (or a number) as flat values and a shape (values as `element` takes them for
/// `dtype`).
fn flatten(
    data: &Bound<PyAny>,
    dtype: Option<DType>,
    shape: &mut Vec<usize>,
    depth: usize,
    out: &mut Vec<Scalar>,
) -> PyResult<()> {
    let ragged = || PyValueError::new_err("Tensor: nested lists must be rectangular");
    if let Some(s) = element(data, dtype)? {
        if depth != shape.len() {
            return Err(ragged());
        }
        out.push(s);
        return Ok(());
    }
    // a string is a sequence of strings, and a list may hold itself: neither ends
    let not_values = || {
        PyTypeError::new_err(format!(
            "Tensor: expected numbers or (at most 64 levels of) lists of them, got {}",
            type_name(data)
        ))
    };
    if data.is_instance_of::<PyString>() || depth >= MAX_DEPTH {
        return Err(not_values());
    }
    let seq = data.cast::<PySequence>().map_err(|_| not_values())?;
    let n = seq.len()?;
    match shape.get(depth) {
        Some(&d) if d != n => return Err(ragged()),
        Some(_) => {}
        None if out.is_empty() && depth == shape.len() => shape.push(n),
        None => return Err(ragged()),
    }
    for item in seq.try_iter()? {
        flatten(&item?, dtype, shape, depth + 1, out)?;
    }
    Ok(())
}

/// A tensor from tinygrad's kinds of data: None (0.0), a number, nested lists or tuples, bytes
/// (uint8), or a numpy array of any dtype (its memory read in place where it is contiguous and
/// little-endian); in `dtype` when given, on `device` when given.
pub(crate) fn data(x: &Bound<PyAny>, dtype: Option<DType>, device: Option<&str>) -> PyResult<Tensor> {
    let device = device.map(str::to_string).unwrap_or_else(::lazygrad::runtime::default_device);
    if x.is_none() {
        return checked(|| Tensor::from_scalars(&[Scalar::Float(0.0)], &[], dtype, &device));
    }
    if let Ok(b) = x.cast::<PyBytes>() {
        let dtype = dtype.unwrap_or(DType::UINT8);
        let n = b.as_bytes().len() / dtype.itemsize();
        return guard(|| Tensor::from_bytes(&b.as_bytes()[..n * dtype.itemsize()], &[n], dtype, &device));
    }
    if is_numpy(x) && x.getattr("shape")?.len()? > 0 {
        return numpy_array(x, dtype, &device);
    }
    let (mut shape, mut values) = (vec![], vec![]);
    if is_numpy(x) {
        // a 0-d array keeps its numpy dtype
        let dtype = match dtype {
            Some(d) => Some(d),
            None => Some(crate::dtype::from_numpy(&x.getattr("dtype")?)?),
        };
        flatten(&x.call_method0("item")?, dtype, &mut shape, 0, &mut values)?;
        return checked(|| Tensor::from_scalars(&values, &shape, dtype, &device));
    }
    flatten(x, dtype, &mut shape, 0, &mut values)?;
    checked(|| Tensor::from_scalars(&values, &shape, dtype, &device))
}

/// A numpy array's elements as a tensor of its dtype (or `dtype`, which numpy converts to first,
/// as tinygrad's `astype`): contiguous little-endian memory is read where it lies.
fn numpy_array(x: &Bound<PyAny>, dtype: Option<DType>, device: &str) -> PyResult<Tensor> {
    let np = x.py().import("numpy")?;
    let x = match dtype.and_then(numpy_dtype) {
        Some(name) => x.call_method1("astype", (name,))?,
        None => x.clone(),
    };
    let little = x.getattr("dtype")?.call_method1("newbyteorder", ("<",))?;
    let x = np.call_method1("ascontiguousarray", (x, little))?;
    let source = crate::dtype::from_numpy(&x.getattr("dtype")?)?;
    let shape: Vec<usize> = x.getattr("shape")?.extract()?;
    let nbytes: usize = x.getattr("nbytes")?.extract()?;
    let address: usize = x.getattr("__array_interface__")?.get_item("data")?.get_item(0)?.extract()?;
    // SAFETY: `x` is a C-contiguous array of `nbytes` bytes at `address`, alive (held by `x`) and
    // not resized while this reads it: the GIL is held throughout.
    let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, nbytes) };
    let t = guard(|| Tensor::from_bytes(if nbytes == 0 { &[] } else { bytes }, &shape, source, device))?;
    Ok(match dtype {
        Some(d) if d != source => guard(|| t.cast(d))?,
        _ => t,
    })
}

/// A shape given as numbers (`reshape(2, 3)`) or one sequence (`reshape((2, 3))`), an entry
/// None where the op keeps an axis as it is (`reshape(None, 6)`); any other form (`(2, 2), 2`)
/// is an InvalidArgument, as tinygrad's ValueError.
pub(crate) fn dims_or_none(args: &Bound<PyTuple>) -> PyResult<Vec<Option<isize>>> {
    let items: Vec<Bound<PyAny>> = match args.len() {
        1 if !args.get_item(0)?.is_instance_of::<PyInt>() && !args.get_item(0)?.is_none() => {
            args.get_item(0)?.try_iter()?.collect::<PyResult<_>>()?
        }
        _ => args.iter().collect(),
    };
    items
        .iter()
        .map(|d| match () {
            _ if d.is_none() => Ok(None),
            _ if d.is_instance_of::<PyInt>() => Ok(Some(d.extract()?)),
            _ => Err(invalid(format!("shape: ints or one sequence of them, got {args}"))),
        })
        .collect()
}

/// A shape of numbers (`dims_or_none` without None).
pub(crate) fn dims(args: &Bound<PyTuple>) -> PyResult<Vec<isize>> {
    dims_or_none(args)?
        .into_iter()
        .map(|d| d.ok_or_else(|| invalid(format!("shape: ints or one sequence of them, got {args}"))))
        .collect()
}

/// A shape of sizes (no -1 to infer): a negative size is an InvalidArgument.
pub(crate) fn sizes(args: &Bound<PyTuple>) -> PyResult<Vec<usize>> {
    dims(args)?.into_iter().map(size).collect()
}

/// A size: a negative one is an InvalidArgument (a ValueError and a RuntimeError, as tinygrad
/// and torch raise for it).
pub(crate) fn size(d: isize) -> PyResult<usize> {
    usize::try_from(d).map_err(|_| invalid(format!("size {d} is negative")))
}

/// A shape given as one int or a sequence of them.
pub(crate) fn shape_of(x: &Bound<PyAny>) -> PyResult<Vec<usize>> {
    let d: Vec<isize> = match x.extract::<isize>() {
        Ok(n) => vec![n],
        Err(_) => x.extract()?,
    };
    d.into_iter().map(size).collect()
}

/// A window size, stride or dilation: one int for every spatial axis, or a tuple of one each.
pub(crate) fn spatial(x: &Bound<PyAny>) -> PyResult<Spatial> {
    Ok(Spatial(shape_of(x)?))
}

/// A padding: one int for every spatial axis, a tuple of one each, or torch's flat
/// `(left, right, top, bottom)`; negative values crop.
pub(crate) fn padding(x: &Bound<PyAny>) -> PyResult<Padding> {
    Ok(Padding(match x.extract::<isize>() {
        Ok(n) => vec![n],
        Err(_) => x.extract()?,
    }))
}

/// One part of an index: an int, a slice (its step too), None (a new axis), Ellipsis, an integer
/// tensor, or a list of ints (a tensor index).
fn index_part(x: &Bound<PyAny>) -> PyResult<Idx> {
    if x.is_none() {
        return Ok(Idx::NewAxis);
    }
    if x.is(x.py().Ellipsis()) {
        return Ok(Idx::Ellipsis);
    }
    if let Ok(t) = x.cast::<PyTensor>() {
        return Ok(Idx::Tensor(t.get().0.clone()));
    }
    if let Ok(s) = x.cast::<PySlice>() {
        let part = |name: &str| -> PyResult<Option<isize>> { s.getattr(name)?.extract() };
        return Ok(match (part("start")?, part("stop")?, part("step")?) {
            (None, None, None | Some(1)) => Idx::Full,
            (start, stop, step) => Idx::R(start, stop, step.unwrap_or(1)),
        });
    }
    if x.is_instance_of::<PyInt>() && !x.is_instance_of::<PyBool>() {
        return Ok(Idx::I(x.extract()?));
    }
    if x.is_instance_of::<PyList>() || x.is_instance_of::<PyTuple>() || is_numpy(x) {
        return Ok(Idx::Tensor(data(x, None, None)?));
    }
    Err(PyTypeError::new_err(format!(
        "index: ints, slices, None, Ellipsis, lists or integer tensors, not {}",
        type_name(x)
    )))
}

/// An index: one part, or a tuple of them.
pub(crate) fn indices(index: &Bound<PyAny>) -> PyResult<Vec<Idx>> {
    match index.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|p| index_part(&p)).collect(),
        Err(_) => Ok(vec![index_part(index)?]),
    }
}

/// Axes to reduce: None for all of them, one axis, or a sequence of axes.
pub(crate) fn axes(t: &Tensor, axis: Option<&Bound<PyAny>>) -> PyResult<Vec<isize>> {
    match axis {
        None => Ok((0..t.ndim() as isize).collect()),
        Some(a) if a.is_none() => Ok((0..t.ndim() as isize).collect()),
        Some(a) if a.is_instance_of::<PyInt>() => Ok(vec![a.extract()?]),
        Some(a) => a.extract(),
    }
}

/// Values as nested Python lists of `shape`.
pub(crate) fn nest<T: for<'py> IntoPyObject<'py> + Copy>(
    py: Python,
    values: &[T],
    shape: &[usize],
) -> PyResult<Py<PyAny>> {
    match shape.split_first() {
        None => values[0].into_py_any(py),
        Some((&n, rest)) => {
            let step: usize = rest.iter().product();
            let rows =
                (0..n).map(|i| nest(py, &values[i * step..(i + 1) * step], rest)).collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, rows)?.into_any().unbind())
        }
    }
}

/// The tensor's values as a numpy array of its shape and dtype (bfloat16 as float32), filled
/// from one copy of its bytes.
pub(crate) fn to_numpy(py: Python, t: &Tensor) -> PyResult<Py<PyAny>> {
    let t = if t.dtype() == DType::BFLOAT16 { guard(|| t.cast(DType::FLOAT32))? } else { t.clone() };
    let bytes = checked(|| t.raw_bytes())?;
    let np = py.import("numpy")?;
    let name = numpy_dtype(t.dtype()).expect("a tensor dtype numpy has");
    let flat = np.call_method1("frombuffer", (PyByteArray::new(py, &bytes), name))?;
    Ok(flat.call_method1("reshape", (PyTuple::new(py, t.bound_shape())?,))?.unbind())
}

/// The dtype argument of a constructor, if given.
pub(crate) fn dtype_arg(dtype: Option<&Bound<PyAny>>) -> PyResult<Option<DType>> {
    match dtype {
        Some(d) if !d.is_none() => Ok(Some(crate::dtype::dtype_of(d)?)),
        _ => Ok(None),
    }
}

/// The tensor a dtype and device argument ask for (`dtype` cast, moved to `device`), with
/// `requires_grad` set when given.
pub(crate) fn finish(
    t: Tensor,
    dtype: Option<DType>,
    device: Option<&str>,
    requires_grad: Option<bool>,
) -> PyResult<PyTensor> {
    guard(|| {
        let t = match dtype {
            Some(d) => t.cast(d),
            None => t,
        };
        let t = match device {
            Some(d) => t.to(d),
            None => t,
        };
        PyTensor(match requires_grad {
            Some(flag) => t.requires_grad(flag),
            None => t,
        })
    })
}

/// Optional arguments with int defaults, as Python objects.
pub(crate) fn or_ints<'py, const N: usize>(
    py: Python<'py>,
    given: [Option<&Bound<'py, PyAny>>; N],
    default: [usize; N],
) -> PyResult<[Bound<'py, PyAny>; N]> {
    let mut out = Vec::with_capacity(N);
    for (g, d) in given.into_iter().zip(default) {
        out.push(match g {
            Some(g) if !g.is_none() => g.clone(),
            _ => d.into_pyobject(py)?.into_any(),
        });
    }
    out.try_into().map_err(|_| PyValueError::new_err("or_ints: argument count"))
}
