//! Movement ops with tinygrad's argument forms: shapes as numbers or one tuple, pads flat
//! (torch's order, last axis first) or one pair per axis, `None` for an axis left alone.

use ::lazygrad::tensor::PadMode;
use ::lazygrad::Tensor;
use pyo3::exceptions::{PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyTuple};

use crate::convert::{axes, dims, dims_or_none, number, sizes};
use crate::pytensor::{tensor_result, tensors, PyTensor};

/// tinygrad's padding argument as `(before, after)` per axis: a flat sequence of ints (pairs for
/// the last axes, last axis first) or one pair (or None) per axis.
fn pads(padding: &Bound<PyAny>, ndim: usize) -> PyResult<Vec<(isize, isize)>> {
    let items: Vec<Bound<PyAny>> = padding.try_iter()?.collect::<PyResult<_>>()?;
    if items.iter().all(|p| p.is_instance_of::<PyInt>()) {
        let flat: Vec<isize> = items.iter().map(|p| p.extract()).collect::<PyResult<_>>()?;
        if !flat.len().is_multiple_of(2) || flat.len() / 2 > ndim {
            return Err(PyValueError::new_err(format!("pad: {} flat pads for {ndim} axes", flat.len())));
        }
        let mut grouped = vec![(0, 0); ndim - flat.len() / 2];
        grouped.extend(flat.chunks(2).rev().map(|p| (p[0], p[1])));
        return Ok(grouped);
    }
    let grouped: Vec<(isize, isize)> =
        items.iter().map(|p| if p.is_none() { Ok((0, 0)) } else { p.extract() }).collect::<PyResult<_>>()?;
    if grouped.len() != ndim {
        return Err(PyValueError::new_err(format!("pad: {} pairs for {ndim} axes", grouped.len())));
    }
    Ok(grouped)
}

/// Sizes given as numbers or one sequence, None where an axis is kept.
fn optional_sizes(shape: &Bound<PyTuple>) -> PyResult<Vec<Option<usize>>> {
    dims_or_none(shape)?.into_iter().map(|d| d.map(crate::convert::size).transpose()).collect()
}

fn pad_mode(mode: &str) -> PyResult<PadMode> {
    Ok(match mode {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        other => return Err(PyNotImplementedError::new_err(format!("pad: mode {other:?}"))),
    })
}

#[pymethods]
impl PyTensor {
    /// A view of `shape` (-1 inferred; None keeps that axis' size).
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let have = self.0.shape();
        let d: Vec<isize> = dims_or_none(shape)?
            .into_iter()
            .enumerate()
            .map(|(i, d)| d.or_else(|| have.get(i).map(|&n| n as isize)).unwrap_or(isize::MIN))
            .collect();
        tensor_result(|| self.0.reshape(&d))
    }
    /// Each axis padded at its end to `shape` (None keeps it), filled with `value`.
    #[pyo3(signature = (*shape, value=None))]
    fn pad_to(&self, shape: &Bound<PyTuple>, value: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let sizes = optional_sizes(shape)?;
        let value = value.map(|v| number(v, "pad_to")).transpose()?.unwrap_or(::lazygrad::tensor::Scalar::Int(0));
        tensor_result(|| self.0.pad_to(&sizes, value))
    }
    /// The first `shape[i]` elements of each axis (None keeps it).
    #[pyo3(signature = (*shape))]
    fn shrink_to(&self, shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let sizes = optional_sizes(shape)?;
        tensor_result(|| self.0.shrink_to(&sizes))
    }
    #[pyo3(signature = (*shape))]
    fn view(&self, shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        self.reshape(shape)
    }
    #[pyo3(signature = (*order))]
    fn permute(&self, order: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = dims(order)?;
        tensor_result(|| self.0.permute(&d))
    }
    #[pyo3(signature = (dim0=1, dim1=0))]
    fn transpose(&self, dim0: isize, dim1: isize) -> PyResult<PyTensor> {
        tensor_result(|| self.0.transpose(dim0, dim1))
    }
    #[getter(T)]
    fn t(&self) -> PyResult<PyTensor> {
        tensor_result(|| self.0.T())
    }
    #[pyo3(signature = (start_dim=0, end_dim=-1))]
    fn flatten(&self, start_dim: isize, end_dim: isize) -> PyResult<PyTensor> {
        tensor_result(|| self.0.flatten(start_dim, end_dim))
    }
    fn unflatten(&self, dim: isize, sizes: Vec<isize>) -> PyResult<PyTensor> {
        tensor_result(|| self.0.unflatten(dim, &sizes))
    }
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<isize>) -> PyResult<PyTensor> {
        tensor_result(|| self.0.squeeze(dim))
    }
    fn unsqueeze(&self, dim: isize) -> PyResult<PyTensor> {
        tensor_result(|| self.0.unsqueeze(dim))
    }
    /// Broadcast to `shape` (a -1 keeps that axis).
    #[pyo3(signature = (*shape))]
    fn expand(&self, shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let want = dims(shape)?;
        let have = self.0.shape();
        let lead = want.len().saturating_sub(have.len());
        let full = want
            .iter()
            .enumerate()
            .map(|(i, &d)| match d {
                -1 if i >= lead => Ok(have[i - lead]),
                d => crate::convert::size(d),
            })
            .collect::<PyResult<Vec<usize>>>()?;
        tensor_result(|| self.0.broadcast_to(&full))
    }
    /// Pad each axis (`padding` flat or in pairs; negative pads crop) with `mode` and `value`.
    #[pyo3(signature = (padding, mode="constant", value=None))]
    fn pad(&self, padding: &Bound<PyAny>, mode: &str, value: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let pads = pads(padding, self.0.ndim())?;
        let mode = pad_mode(mode)?;
        let value = match value {
            Some(v) => number(v, "pad")?,
            None => ::lazygrad::tensor::Scalar::Float(0.0),
        };
        tensor_result(|| self.0.pad_with(&pads, mode, value))
    }
    /// The part `[start, end)` of each axis (None: all of it).
    fn shrink(&self, arg: &Bound<PyAny>) -> PyResult<PyTensor> {
        let shape = self.0.shape();
        let bounds = arg
            .try_iter()?
            .zip(&shape)
            .map(|(b, &n)| {
                let b = b?;
                if b.is_none() {
                    Ok((0, n))
                } else {
                    b.extract()
                }
            })
            .collect::<PyResult<Vec<(usize, usize)>>>()?;
        tensor_result(|| self.0.shrink(&bounds))
    }
    /// Reverse the given axes (one, a tuple, or several arguments).
    #[pyo3(signature = (axis, *args))]
    fn flip(&self, axis: &Bound<PyAny>, args: Vec<isize>) -> PyResult<PyTensor> {
        let mut all = axes(&self.0, Some(axis))?;
        all.extend(args);
        tensor_result(|| self.0.flip(&all))
    }
    #[pyo3(signature = (*repeats))]
    fn repeat(&self, repeats: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let repeats = sizes(repeats)?;
        tensor_result(|| self.0.repeat(&repeats))
    }
    #[pyo3(signature = (repeats, dim=None))]
    fn repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> PyResult<PyTensor> {
        tensor_result(|| self.0.repeat_interleave(repeats, dim))
    }
    /// Pieces of `sizes` (one size: equal pieces, the last maybe smaller) along `dim`.
    #[pyo3(signature = (sizes, dim=0))]
    fn split(&self, sizes: &Bound<PyAny>, dim: isize) -> PyResult<Vec<PyTensor>> {
        let pieces = match sizes.extract::<usize>() {
            Ok(n) => crate::error::guard(|| self.0.split(n, dim))?,
            Err(_) => {
                let list: Vec<usize> = sizes.extract()?;
                crate::error::guard(|| self.0.split(list.as_slice(), dim))?
            }
        };
        Ok(pieces.into_iter().map(PyTensor).collect())
    }
    #[pyo3(signature = (chunks, dim=0))]
    fn chunk(&self, chunks: usize, dim: isize) -> PyResult<Vec<PyTensor>> {
        Ok(crate::error::guard(|| self.0.chunk(chunks, dim))?.into_iter().map(PyTensor).collect())
    }
    /// Shift by `shifts` along `dims` (of the flattened tensor when `dims` is None).
    #[pyo3(signature = (shifts, dims=None))]
    fn roll(&self, shifts: &Bound<PyAny>, dims: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let shifts: Vec<isize> = match shifts.extract::<isize>() {
            Ok(s) => vec![s],
            Err(_) => shifts.extract()?,
        };
        match dims {
            Some(d) if !d.is_none() => {
                let d = axes(&self.0, Some(d))?;
                tensor_result(|| self.0.roll(&shifts, &d))
            }
            _ => {
                let shape = self.0.shape();
                tensor_result(|| self.0.flatten(0, -1).roll(&shifts, &[0]).reshape(&shape))
            }
        }
    }
    fn unfold(&self, dimension: isize, size: isize, step: isize) -> PyResult<PyTensor> {
        let (size, step) = (crate::convert::size(size)?, crate::convert::size(step)?);
        tensor_result(|| self.0.unfold(dimension, size, step))
    }
    fn diag(&self) -> PyResult<PyTensor> {
        tensor_result(|| self.0.diag())
    }
    #[pyo3(signature = (offset=0, dim1=0, dim2=1))]
    fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> PyResult<PyTensor> {
        tensor_result(|| self.0.diagonal(offset, dim1, dim2))
    }
    /// Coordinate grids of 1-d tensors (`indexing` "ij" or "xy").
    #[pyo3(signature = (*args, indexing="ij"))]
    fn meshgrid(&self, args: Vec<PyTensor>, indexing: &str) -> PyResult<Vec<PyTensor>> {
        let mut all = vec![self.clone()];
        all.extend(args);
        Ok(crate::error::guard(|| Tensor::meshgrid(&tensors(&all), indexing))?.into_iter().map(PyTensor).collect())
    }
    fn contiguous(&self) -> PyResult<PyTensor> {
        tensor_result(|| self.0.contiguous())
    }
    fn detach(&self) -> PyResult<PyTensor> {
        tensor_result(|| self.0.detach())
    }
}
