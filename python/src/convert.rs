//! Python values to the Rust API's and back: numbers as weak scalars, nested lists as flat
//! values and a shape, shapes, axes and indices, and values as nested lists.

use ::lazygrad::tensor::{ConvOpts, Idx, Operand, Scalar};
use ::lazygrad::{DType, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PySequence, PySlice, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

use crate::tensor::PyTensor;

/// A Python number as a weak scalar (`t * 2` keeps `t`'s dtype), or None for anything else.
pub(crate) fn scalar(x: &Bound<PyAny>) -> Option<Scalar> {
    if x.is_instance_of::<PyBool>() {
        x.extract::<bool>().ok().map(Scalar::Bool)
    } else if x.is_instance_of::<PyInt>() {
        x.extract::<i64>().ok().map(Scalar::Int)
    } else if x.is_instance_of::<PyFloat>() {
        x.extract::<f64>().ok().map(Scalar::Float)
    } else {
        None
    }
}

/// The right operand of a binary op: a Tensor or a Python number.
pub(crate) enum Rhs {
    Tensor(Tensor),
    Scalar(Scalar),
}

impl Rhs {
    pub(crate) fn of(x: &Bound<PyAny>) -> PyResult<Rhs> {
        if let Ok(t) = x.cast::<PyTensor>() {
            return Ok(Rhs::Tensor(t.get().0.clone()));
        }
        scalar(x).map(Rhs::Scalar).ok_or_else(|| PyTypeError::new_err("expected a Tensor or a number"))
    }
}

impl Rhs {
    /// This operand as a tensor beside `lhs` (a number takes `lhs`'s dtype where it fits).
    pub(crate) fn tensor(self, lhs: &Tensor) -> Tensor {
        match self {
            Rhs::Tensor(t) => t,
            Rhs::Scalar(s) => s.with(lhs).0,
        }
    }
    /// `op(lhs, self)`, or with `reversed` `op(self, lhs)` (`2 - t`).
    pub(crate) fn apply(self, lhs: &Tensor, reversed: bool, op: fn(&Tensor, &Tensor) -> Tensor) -> PyTensor {
        let rhs = self.tensor(lhs);
        PyTensor(if reversed { op(&rhs, lhs) } else { op(lhs, &rhs) })
    }
}

/// Nested lists (or a number) as flat values of one kind and a shape.
pub(crate) enum Flat {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    Float(Vec<f64>),
}

/// Nesting deeper than this is refused (a tensor has far fewer axes).
const MAX_DEPTH: usize = 64;

pub(crate) fn flatten(
    data: &Bound<PyAny>,
    shape: &mut Vec<usize>,
    depth: usize,
    out: &mut Vec<Scalar>,
) -> PyResult<()> {
    if let Some(s) = scalar(data) {
        if depth != shape.len() {
            return Err(PyValueError::new_err("Tensor: nested lists must be rectangular"));
        }
        out.push(s);
        return Ok(());
    }
    // a string is a sequence of strings, and a list may hold itself: neither ends
    let not_values = || PyTypeError::new_err("Tensor: expected numbers or (at most 64 levels of) lists of them");
    if data.is_instance_of::<PyString>() || depth >= MAX_DEPTH {
        return Err(not_values());
    }
    let seq = data.cast::<PySequence>().map_err(|_| not_values())?;
    let n = seq.len()?;
    match shape.get(depth) {
        Some(&d) if d != n => return Err(PyValueError::new_err("Tensor: nested lists must be rectangular")),
        Some(_) => {}
        None if out.is_empty() && depth == shape.len() => shape.push(n),
        None => return Err(PyValueError::new_err("Tensor: nested lists must be rectangular")),
    }
    for item in seq.try_iter()? {
        flatten(&item?, shape, depth + 1, out)?;
    }
    Ok(())
}

impl Flat {
    pub(crate) fn of(values: Vec<Scalar>) -> Flat {
        if values.iter().any(|s| matches!(s, Scalar::Float(_))) {
            Flat::Float(values.iter().map(|s| s.value().as_f64()).collect())
        } else if values.iter().any(|s| matches!(s, Scalar::Int(_))) {
            let int = |s: &Scalar| match *s {
                Scalar::Int(i) => i,
                other => i64::from(matches!(other, Scalar::Bool(true))),
            };
            Flat::Int(values.iter().map(int).collect())
        } else {
            Flat::Bool(values.iter().map(|s| matches!(s, Scalar::Bool(true))).collect())
        }
    }

    /// The tensor of these values in tinygrad's default dtypes (float32, int32, bool), or `dtype`.
    pub(crate) fn tensor(self, shape: &[usize], dtype: Option<DType>) -> Tensor {
        let t = match self {
            // a float64 tensor keeps float64's digits
            Flat::Float(v) if dtype == Some(DType::FLOAT64) => Tensor::from_slice(&v, shape),
            Flat::Float(v) => Tensor::from_slice(&v.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape),
            Flat::Int(v) => match dtype {
                // an int64 tensor keeps values past int32
                Some(d) if d == DType::INT64 || d == DType::UINT64 => Tensor::from_slice(&v, shape),
                _ => Tensor::from_slice(&v.iter().map(|&x| x as i32).collect::<Vec<_>>(), shape),
            },
            Flat::Bool(v) => Tensor::from_slice(&v, shape),
        };
        match dtype {
            Some(d) if d != t.dtype() => t.cast(d),
            _ => t,
        }
    }
}

/// A shape given as numbers (`reshape(2, 3)`) or one sequence (`reshape((2, 3))`).
pub(crate) fn dims(args: &Bound<PyTuple>) -> PyResult<Vec<isize>> {
    match args.len() {
        1 if !args.get_item(0)?.is_instance_of::<PyInt>() => args.get_item(0)?.extract(),
        _ => args.extract(),
    }
}

/// A shape of sizes (no -1 to infer).
pub(crate) fn sizes(args: &Bound<PyTuple>) -> PyResult<Vec<usize>> {
    dims(args)?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| PyValueError::new_err(format!("size {d} is negative"))))
        .collect()
}

/// One part of an index: an int, a slice (its step too), None (a new axis), Ellipsis, or an
/// integer tensor.
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
    Err(PyTypeError::new_err("index: ints, slices, None, Ellipsis or integer tensors"))
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

/// A convolution's options from tinygrad's keyword arguments (one value for every spatial axis).
pub(crate) fn conv_opts(groups: usize, stride: usize, dilation: usize, padding: usize) -> ConvOpts {
    ConvOpts {
        groups,
        stride: stride.into(),
        dilation: dilation.into(),
        padding: padding.into(),
        ..ConvOpts::default()
    }
}
