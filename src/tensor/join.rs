//! Joining and splitting along an axis: `cat`, `stack`, `split`, `chunk` and `meshgrid`, all
//! pads, shrinks and reshapes of their operands.

use super::movement::{at_least_1d, resolve_axis};
use super::{check_devices, Tensor};
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};

/// The sizes `split` cuts an axis into: one chunk size (the last chunk may be smaller) or a list.
pub trait SplitSizes {
    /// The piece sizes for an axis of `dim_size`.
    fn sizes(&self, dim_size: usize) -> Vec<usize>;
}
impl SplitSizes for usize {
    fn sizes(&self, n: usize) -> Vec<usize> {
        (0..n.max(1)).step_by((*self).max(1)).map(|i| (*self).min(n - i)).collect()
    }
}
impl SplitSizes for &[usize] {
    fn sizes(&self, _: usize) -> Vec<usize> {
        self.to_vec()
    }
}
impl SplitSizes for Vec<usize> {
    fn sizes(&self, _: usize) -> Vec<usize> {
        self.clone()
    }
}
impl<const N: usize> SplitSizes for [usize; N] {
    fn sizes(&self, _: usize) -> Vec<usize> {
        self.to_vec()
    }
}

impl Tensor {
    /// Cut axis `dim` into pieces of the given sizes (one size: equal chunks, the last maybe smaller).
    pub fn split(&self, sizes: impl SplitSizes, dim: isize) -> Vec<Tensor> {
        self.try_split(sizes, dim).or_panic()
    }
    /// `split`, reporting a bad axis or sizes that do not sum to it as an error.
    pub fn try_split(&self, sizes: impl SplitSizes, dim: isize) -> Result<Vec<Tensor>> {
        let shape = self.shape();
        let d = resolve_axis("split", dim, shape.len(), &shape)?;
        at_least_1d("split", &shape)?;
        let sizes = sizes.sizes(shape[d]);
        ensure(sizes.iter().sum::<usize>() == shape[d], || {
            Error::shape("split", &[&shape], format!("sizes {sizes:?} do not sum to axis {d}"))
        })?;
        Ok(sizes
            .iter()
            .scan(0, |start, &n| {
                *start += n;
                Some(self.shrink_dim(d, (*start - n, *start)))
            })
            .collect())
    }
    /// Split axis `dim` into `chunks` pieces of `ceil(size / chunks)` (maybe fewer pieces).
    pub fn chunk(&self, chunks: usize, dim: isize) -> Vec<Tensor> {
        self.try_chunk(chunks, dim).or_panic()
    }
    /// `chunk`, reporting a bad axis or 0 chunks as an error.
    pub fn try_chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        ensure(chunks > 0, || Error::value("chunk", "chunks must be positive, got 0"))?;
        let d = resolve_axis("chunk", dim, self.ndim(), &self.shape())?;
        at_least_1d("chunk", &self.shape())?;
        match self.shape()[d] {
            // `chunks` empty pieces: a count past memory is an error, not an aborting allocation
            0 => {
                let mut empty = vec![];
                empty
                    .try_reserve_exact(chunks)
                    .map_err(|_| Error::value("chunk", format!("{chunks} empty chunks do not fit in memory")))?;
                empty.resize(chunks, 0);
                self.try_split(empty, dim)
            }
            n => self.try_split(n.div_ceil(chunks), dim),
        }
    }
    /// Join tensors along the existing axis `dim` (dtypes are promoted).
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Tensor {
        Tensor::try_cat(tensors, dim).or_panic()
    }
    /// `cat`, reporting mismatched shapes, devices or a bad axis as an error.
    pub fn try_cat(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let shapes: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape()).collect();
        let Some(first) = shapes.first() else { return Err(Error::value("cat", "no tensors")) };
        let d = resolve_axis("cat", dim, first.len(), first)?;
        let all: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        // 0-d tensors have no axis to join along (stack them)
        ensure(!first.is_empty(), || Error::Axis { op: "cat", axis: dim, shape: vec![] })?;
        let same = |s: &Vec<usize>| {
            s.len() == first.len() && s.iter().zip(first).enumerate().all(|(i, (a, b))| i == d || a == b)
        };
        ensure(shapes.iter().all(same), || Error::shape("cat", &all, format!("shapes differ outside axis {dim}")))?;
        check_devices("cat", tensors)?;
        let dtype = tensors.iter().map(|t| t.dtype()).reduce(DType::least_upper).unwrap_or(DType::FLOAT32);
        let total: usize = shapes.iter().map(|s| s[d]).sum();
        let mut start = 0;
        let mut out: Option<Tensor> = None;
        for t in tensors.iter().filter(|t| t.shape()[d] > 0 || total == 0) {
            let n = t.shape()[d];
            let p = t.cast(dtype).pad_dim(d, (start, total - start - n));
            out = Some(match out {
                None => p,
                // pieces are disjoint: bools merge with a select, numbers by adding the zero padding
                Some(acc) if dtype.is_bool() => t.ones_mask().pad_dim(d, (start, total - start - n)).where_(&p, &acc),
                Some(acc) => acc.add(&p),
            });
            start += n;
        }
        Ok(out.expect("cat: at least one tensor"))
    }
    /// Join same-shaped tensors along a new axis `dim`.
    pub fn stack(tensors: &[&Tensor], dim: isize) -> Tensor {
        Tensor::try_stack(tensors, dim).or_panic()
    }
    /// `stack`, reporting differing shapes or devices or a bad axis as an error.
    pub fn try_stack(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let shapes: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape()).collect();
        let Some(first) = shapes.first() else { return Err(Error::value("stack", "no tensors")) };
        ensure(shapes.iter().all(|s| s == first), || {
            Error::shape("stack", &shapes.iter().map(Vec::as_slice).collect::<Vec<_>>(), "shapes differ")
        })?;
        let d = resolve_axis("stack", dim, first.len() + 1, first)? as isize;
        let parts: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(d)).collect();
        Tensor::try_cat(&parts.iter().collect::<Vec<_>>(), d)
    }
    /// Coordinate grids from 1-D tensors; `indexing` is `"ij"` (matrix) or `"xy"` (first two axes swapped).
    pub fn meshgrid(tensors: &[&Tensor], indexing: &str) -> Vec<Tensor> {
        Tensor::try_meshgrid(tensors, indexing).or_panic()
    }
    /// `meshgrid`, reporting an unknown indexing as an error.
    pub fn try_meshgrid(tensors: &[&Tensor], indexing: &str) -> Result<Vec<Tensor>> {
        ensure(indexing == "ij" || indexing == "xy", || {
            Error::value("meshgrid", format!("indexing must be \"ij\" or \"xy\", got {indexing:?}"))
        })?;
        let n = tensors.len();
        let mut basis: Vec<usize> = (0..n).collect();
        if indexing == "xy" && n >= 2 {
            basis.swap(0, 1);
        }
        let shaped: Vec<Tensor> = tensors
            .iter()
            .zip(&basis)
            .map(|(t, &b)| t.try_reshape(&[vec![-1isize], vec![1; n - 1 - b]].concat()))
            .collect::<Result<_>>()?;
        let shape = shaped
            .iter()
            .try_fold(vec![], |acc, t| super::elementwise::broadcast_shape(&acc, &t.shape()))
            .expect("meshgrid: shapes broadcast");
        Ok(shaped.iter().map(|t| t.broadcast_to(&shape)).collect())
    }
}
