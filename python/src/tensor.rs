//! `Tensor`, and `Tensor.train()`'s scope.

use ::lazygrad::tensor::{PoolOpts, Reduction};
use ::lazygrad::{Context, DType, Tensor};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyTuple};

use crate::convert::{axes, conv_opts, dims, flatten, indices, nest, scalar, sizes, Flat, Rhs};
use crate::dtype::{dtype_of, numpy_name, PyDType};
use crate::guard;

/// A lazy tensor: operations build a graph, and `realize`, `tolist`, `numpy` or `item` run it.
#[pyclass(name = "Tensor", module = "lazygrad", frozen)]
#[derive(Clone)]
pub(crate) struct PyTensor(pub(crate) Tensor);

impl PyTensor {
    /// `op(self, rhs)`, or with `reversed` `op(rhs, self)`, for a Tensor or number `rhs`.
    fn binary(&self, rhs: &Bound<PyAny>, reversed: bool, op: fn(&Tensor, &Tensor) -> Tensor) -> PyResult<PyTensor> {
        let rhs = Rhs::of(rhs)?;
        guard(|| rhs.apply(&self.0, reversed, op))
    }
}

#[pymethods]
impl PyTensor {
    #[new]
    #[pyo3(signature = (data, dtype=None, device=None))]
    fn new(data: &Bound<PyAny>, dtype: Option<&Bound<PyAny>>, device: Option<&str>) -> PyResult<PyTensor> {
        let dtype = dtype.map(dtype_of).transpose()?;
        let (mut shape, mut values) = (vec![], vec![]);
        flatten(data, &mut shape, 0, &mut values)?;
        let flat = Flat::of(values);
        guard(|| {
            let t = flat.tensor(&shape, dtype);
            PyTensor(match device {
                Some(d) => t.to(d),
                None => t,
            })
        })
    }

    #[staticmethod]
    #[pyo3(signature = (*shape))]
    fn zeros(shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = sizes(shape)?;
        guard(|| PyTensor(Tensor::zeros(&d)))
    }
    #[staticmethod]
    #[pyo3(signature = (*shape))]
    fn ones(shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = sizes(shape)?;
        guard(|| PyTensor(Tensor::ones(&d)))
    }
    #[staticmethod]
    #[pyo3(signature = (*shape))]
    fn rand(shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = sizes(shape)?;
        guard(|| PyTensor(Tensor::rand(&d)))
    }
    #[staticmethod]
    #[pyo3(signature = (*shape))]
    fn randn(shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = sizes(shape)?;
        guard(|| PyTensor(Tensor::randn(&d)))
    }
    #[staticmethod]
    #[pyo3(signature = (*shape, low=0, high=10))]
    fn randint(shape: &Bound<PyTuple>, low: i64, high: i64) -> PyResult<PyTensor> {
        let shape = sizes(shape)?;
        guard(|| PyTensor(Tensor::randint(&shape, low, high)))
    }
    #[staticmethod]
    fn arange(n: usize) -> PyResult<PyTensor> {
        guard(|| PyTensor(Tensor::arange(n)))
    }
    #[staticmethod]
    fn manual_seed(seed: u64) {
        Tensor::manual_seed(seed)
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.shape())
    }
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType(self.0.dtype())
    }
    #[getter]
    fn device(&self) -> String {
        self.0.device().to_string()
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.0.ndim()
    }
    fn numel(&self) -> usize {
        self.0.numel()
    }
    #[getter]
    fn requires_grad(&self) -> bool {
        self.0.requires_grad_flag() == Some(true)
    }
    /// The gradient `backward` left, or None.
    #[getter]
    fn grad(&self) -> Option<PyTensor> {
        self.0.grad().map(PyTensor)
    }
    /// This tensor with gradients recorded (`requires_grad_()` in tinygrad and torch).
    #[pyo3(signature = (flag=true))]
    fn requires_grad_(&self, flag: bool) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.requires_grad(flag)))
    }

    /// Compute the value now, together with `others` in one schedule (errors from compilers and
    /// devices are `RuntimeError`s).
    #[pyo3(signature = (*others))]
    fn realize(&self, others: Vec<PyTensor>) -> PyResult<PyTensor> {
        let all: Vec<Tensor> = std::iter::once(self.0.clone()).chain(others.into_iter().map(|t| t.0)).collect();
        guard(|| Tensor::realize_all(&all))?.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(self.clone())
    }
    /// The values as nested lists of Python numbers.
    fn tolist(&self, py: Python) -> PyResult<Py<PyAny>> {
        let t = self.realize(vec![])?.0;
        let (shape, d) = (t.shape(), t.dtype());
        match () {
            _ if d.is_float() => nest(py, &guard(|| t.cast(DType::FLOAT64).to_vec::<f64>())?, &shape),
            _ if d.is_bool() => nest(py, &guard(|| t.to_vec::<bool>())?, &shape),
            _ if d == DType::UINT64 => nest(py, &guard(|| t.to_vec::<u64>())?, &shape),
            _ => nest(py, &guard(|| t.cast(DType::INT64).to_vec::<i64>())?, &shape),
        }
    }
    /// The value of a one-element tensor as a Python number.
    fn item(&self, py: Python) -> PyResult<Py<PyAny>> {
        if self.0.numel() != 1 {
            return Err(PyValueError::new_err(format!(
                "item: a tensor of shape {:?} has no single value",
                self.0.shape()
            )));
        }
        PyTensor(self.0.reshape(&[] as &[isize])).tolist(py)
    }
    /// The values as a numpy array (numpy must be installed).
    fn numpy(&self, py: Python) -> PyResult<Py<PyAny>> {
        let list = self.tolist(py)?;
        let np = py.import("numpy")?;
        let dtype = numpy_name(self.0.dtype());
        Ok(np.call_method1("array", (list, dtype))?.unbind())
    }
    /// Gradients of this scalar with respect to every tensor that requires them (left in `.grad`).
    fn backward(&self) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.backward()))
    }

    fn __repr__(&self) -> String {
        format!("<Tensor shape={:?} dtype=dtypes.{} device={}>", self.0.shape(), self.0.dtype().name(), self.0.device())
    }

    fn __add__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.add(b))
    }
    fn __radd__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, true, |a, b| a.add(b))
    }
    fn __sub__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.sub(b))
    }
    fn __rsub__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, true, |a, b| a.sub(b))
    }
    fn __mul__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.mul(b))
    }
    fn __rmul__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, true, |a, b| a.mul(b))
    }
    fn __truediv__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.div(b))
    }
    fn __rtruediv__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, true, |a, b| a.div(b))
    }
    fn __matmul__(&self, rhs: &PyTensor) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.matmul(&rhs.0)))
    }
    fn matmul(&self, rhs: &PyTensor) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.matmul(&rhs.0)))
    }
    fn __neg__(&self) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.neg()))
    }
    fn __lt__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.lt(b))
    }
    fn __gt__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.gt(b))
    }
    fn __le__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.le(b))
    }
    fn __ge__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.ge(b))
    }
    /// Elementwise, as in tinygrad: `(pred == y).mean()`.
    fn __eq__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.eq(b))
    }
    fn __ne__(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.ne(b))
    }
    /// By identity (`==` compares elements), so tensors can key dicts and fill sets.
    fn __hash__(slf: &Bound<Self>) -> isize {
        slf.as_ptr() as isize
    }
    /// Indexing with ints, slices, None, Ellipsis and integer tensors (gathers), or a tuple of them.
    fn __getitem__(&self, index: &Bound<PyAny>) -> PyResult<PyTensor> {
        let idx = indices(index)?;
        guard(|| PyTensor(self.0.index(&idx)))
    }
    /// `t[index] = value`: the value (a tensor or a number) written into the view at once.
    fn __setitem__(&self, index: &Bound<PyAny>, value: &Bound<PyAny>) -> PyResult<()> {
        let (idx, value) = (indices(index)?, Rhs::of(value)?);
        let written = guard(|| {
            let view = self.0.index(&idx);
            let value = value.tensor(&view);
            view.assign(&value.cast(view.dtype()).expand(&view.shape())).try_realize()
        })?;
        written.map(|_| ()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
    /// `layers` applied in order (each a callable: a layer, `Tensor.relu`, a lambda).
    fn sequential(slf: &Bound<Self>, layers: &Bound<PyAny>) -> PyResult<Py<PyAny>> {
        let mut x = slf.clone().into_any();
        for layer in layers.try_iter()? {
            x = layer?.call1((x,))?;
        }
        Ok(x.unbind())
    }
    #[pyo3(signature = (kernel_size=2, stride=None))]
    fn max_pool2d(&self, kernel_size: usize, stride: Option<usize>) -> PyResult<PyTensor> {
        let opts = PoolOpts { stride: stride.map(Into::into), ..PoolOpts::kernel(kernel_size) };
        guard(|| PyTensor(self.0.max_pool2d(&opts)))
    }

    #[pyo3(signature = (axis=-1))]
    fn softmax(&self, axis: isize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.softmax(axis)))
    }
    #[pyo3(signature = (axis=-1))]
    fn log_softmax(&self, axis: isize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.log_softmax(axis)))
    }

    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = dims(shape)?;
        guard(|| PyTensor(self.0.reshape(&d)))
    }
    #[pyo3(signature = (*order))]
    fn permute(&self, order: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let d = dims(order)?;
        guard(|| PyTensor(self.0.permute(&d)))
    }
    #[pyo3(signature = (dim0=1, dim1=0))]
    fn transpose(&self, dim0: isize, dim1: isize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.transpose(dim0, dim1)))
    }
    #[getter(T)]
    fn t(&self) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.T()))
    }
    fn cast(&self, dtype: &Bound<PyAny>) -> PyResult<PyTensor> {
        let dtype = dtype_of(dtype)?;
        guard(|| PyTensor(self.0.cast(dtype)))
    }
    #[pyo3(signature = (neg_slope=0.01))]
    fn leaky_relu(&self, neg_slope: f64) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.leaky_relu_with(neg_slope)))
    }
    fn __pow__(&self, rhs: &Bound<PyAny>, _modulo: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.pow(b))
    }
    /// `x` where this (bool) tensor is true, else `y`.
    #[pyo3(name = "where")]
    fn where_(&self, x: &Bound<PyAny>, y: &Bound<PyAny>) -> PyResult<PyTensor> {
        let (x, y) = (Rhs::of(x)?.tensor(&self.0), Rhs::of(y)?.tensor(&self.0));
        guard(|| PyTensor(self.0.where_(&x, &y)))
    }
    #[pyo3(signature = (axis=None, keepdim=false))]
    fn argmax(&self, axis: Option<isize>, keepdim: bool) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.argmax(axis, keepdim)))
    }
    #[pyo3(signature = (start_dim=0, end_dim=-1))]
    fn flatten(&self, start_dim: isize, end_dim: isize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.flatten(start_dim, end_dim)))
    }
    /// This tensor and `others` joined along `dim`.
    #[pyo3(signature = (*others, dim=0))]
    fn cat(&self, others: Vec<PyTensor>, dim: isize) -> PyResult<PyTensor> {
        let all: Vec<&Tensor> = std::iter::once(&self.0).chain(others.iter().map(|t| &t.0)).collect();
        guard(|| PyTensor(Tensor::cat(&all, dim)))
    }
    /// Cross-entropy of these logits (classes last) against integer labels `y`.
    #[pyo3(signature = (y, ignore_index=-1, label_smoothing=0.0, reduction="mean"))]
    fn sparse_categorical_crossentropy(
        &self,
        y: &PyTensor,
        ignore_index: i64,
        label_smoothing: f64,
        reduction: &str,
    ) -> PyResult<PyTensor> {
        let reduction = match reduction {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            "none" => Reduction::None,
            other => return Err(PyValueError::new_err(format!("reduction {other:?}: mean, sum or none"))),
        };
        guard(|| PyTensor(self.0.sparse_categorical_crossentropy(&y.0, ignore_index, label_smoothing, reduction)))
    }
    /// A context manager under which optimizers may step (tinygrad's `with Tensor.train():`).
    #[staticmethod]
    #[pyo3(signature = (mode=true))]
    fn train(mode: bool) -> Training {
        Training { mode, context: None }
    }
    fn to(&self, device: &str) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.to(device)))
    }
}

/// `Tensor.train()`: TRAINING set while the `with` block runs (on this thread).
#[pyclass(unsendable)]
struct Training {
    mode: bool,
    context: Option<Context>,
}

#[pymethods]
impl Training {
    fn __enter__(&mut self) {
        self.context = Some(Context::new(&[("TRAINING", i64::from(self.mode))]));
    }
    fn __exit__(&mut self, _kind: &Bound<PyAny>, _value: &Bound<PyAny>, _traceback: &Bound<PyAny>) -> bool {
        self.context = None;
        false
    }
    /// As a decorator (`@Tensor.train()`): `f` runs with TRAINING set.
    fn __call__(&self, py: Python, f: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let mode = self.mode;
        let wrapped = PyCFunction::new_closure(py, None, None, move |args, kwargs| -> PyResult<Py<PyAny>> {
            let _training = Context::new(&[("TRAINING", i64::from(mode))]);
            Ok(f.bind(args.py()).call(args, kwargs)?.unbind())
        })?;
        Ok(wrapped.into_any().unbind())
    }
}

/// Methods that take nothing and forward to the Rust method of the same name.
macro_rules! forward {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(fn $name(&self) -> PyResult<PyTensor> {
                guard(|| PyTensor(self.0.$name()))
            })*
        }
    };
}

forward!(
    relu, exp, exp2, log, log2, sqrt, rsqrt, reciprocal, sigmoid, tanh, sin, cos, square, abs, sign, floor, ceil,
    round, gelu, contiguous, detach, zeros_like, ones_like, float, half, int, bool,
);

/// Reductions over `axis` (None: every axis; an int; or a tuple), keeping the reduced axes as
/// size 1 with `keepdim`.
macro_rules! reduce {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(#[pyo3(signature = (axis=None, keepdim=false))]
            fn $name(&self, axis: Option<&Bound<PyAny>>, keepdim: bool) -> PyResult<PyTensor> {
                let axes = axes(&self.0, axis)?;
                guard(|| PyTensor(self.0.$name(&axes[..], keepdim)))
            })*
        }
    };
}

reduce!(sum, mean, max, min, prod);

/// More of tinygrad's Tensor: creation, movement, reductions, and the functional ops.
#[pymethods]
impl PyTensor {
    #[staticmethod]
    #[pyo3(signature = (shape, fill_value))]
    fn full(shape: &Bound<PyAny>, fill_value: &Bound<PyAny>) -> PyResult<PyTensor> {
        let shape: Vec<usize> = shape.extract()?;
        let value = scalar(fill_value).ok_or_else(|| PyTypeError::new_err("full: the fill value is a number"))?;
        guard(|| PyTensor(Tensor::full(&shape, value)))
    }
    #[staticmethod]
    fn eye(n: usize) -> PyResult<PyTensor> {
        guard(|| PyTensor(Tensor::eye(n)))
    }
    #[staticmethod]
    #[pyo3(signature = (*shape, low=0.0, high=1.0))]
    fn uniform(shape: &Bound<PyTuple>, low: f64, high: f64) -> PyResult<PyTensor> {
        let shape = sizes(shape)?;
        guard(|| PyTensor(Tensor::uniform(&shape, low, high)))
    }
    #[staticmethod]
    #[pyo3(signature = (*tensors, dim=0))]
    fn stack(tensors: Vec<PyTensor>, dim: isize) -> PyResult<PyTensor> {
        let all: Vec<&Tensor> = tensors.iter().map(|t| &t.0).collect();
        guard(|| PyTensor(Tensor::stack(&all, dim)))
    }
    fn full_like(&self, fill_value: &Bound<PyAny>) -> PyResult<PyTensor> {
        let value = scalar(fill_value).ok_or_else(|| PyTypeError::new_err("full_like: the fill value is a number"))?;
        guard(|| PyTensor(self.0.full_like(value)))
    }

    fn unsqueeze(&self, dim: isize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.unsqueeze(dim)))
    }
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<isize>) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.squeeze(dim)))
    }
    #[pyo3(signature = (*shape))]
    fn expand(&self, shape: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let shape = sizes(shape)?;
        guard(|| PyTensor(self.0.expand(&shape)))
    }
    /// Zeros before and after each axis: one `(before, after)` pair per axis.
    fn pad(&self, padding: Vec<(usize, usize)>) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.pad(&padding)))
    }
    /// The part `[start, end)` of each axis: one pair per axis.
    fn shrink(&self, arg: Vec<(usize, usize)>) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.shrink(&arg)))
    }
    fn flip(&self, axis: &Bound<PyAny>) -> PyResult<PyTensor> {
        let axes = axes(&self.0, Some(axis))?;
        guard(|| PyTensor(self.0.flip(&axes)))
    }
    #[pyo3(signature = (*repeats))]
    fn repeat(&self, repeats: &Bound<PyTuple>) -> PyResult<PyTensor> {
        let repeats = sizes(repeats)?;
        guard(|| PyTensor(self.0.repeat(&repeats)))
    }

    #[pyo3(signature = (axis=None, keepdim=false, correction=1))]
    fn var(&self, axis: Option<&Bound<PyAny>>, keepdim: bool, correction: usize) -> PyResult<PyTensor> {
        let axes = axes(&self.0, axis)?;
        guard(|| PyTensor(self.0.var(&axes[..], keepdim, correction)))
    }
    #[pyo3(signature = (axis=None, keepdim=false, correction=1))]
    fn std(&self, axis: Option<&Bound<PyAny>>, keepdim: bool, correction: usize) -> PyResult<PyTensor> {
        let axes = axes(&self.0, axis)?;
        guard(|| PyTensor(self.0.std(&axes[..], keepdim, correction)))
    }
    #[pyo3(signature = (axis=None, keepdim=false))]
    fn argmin(&self, axis: Option<isize>, keepdim: bool) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.argmin(axis, keepdim)))
    }

    fn maximum(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.maximum(b))
    }
    fn minimum(&self, rhs: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(rhs, false, |a, b| a.minimum(b))
    }
    /// Values below `min_` raised to it and above `max_` lowered to it (either may be None).
    #[pyo3(signature = (min_=None, max_=None))]
    fn clip(&self, min_: Option<f64>, max_: Option<f64>) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.clamp(min_, max_)))
    }

    fn cumsum(&self, axis: isize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.cumsum(axis)))
    }
    /// Values along `dim` at `index` (tinygrad's and torch's `gather`).
    fn gather(&self, dim: isize, index: &PyTensor) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.gather(dim, &index.0)))
    }
    /// Write `x`'s values into this tensor's storage (lazily: in place when realized).
    fn assign(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        let value = Rhs::of(x)?.tensor(&self.0);
        guard(|| PyTensor(self.0.assign(&value)))
    }
    #[pyo3(signature = (weight, bias=None, groups=1, stride=1, dilation=1, padding=0))]
    fn conv2d(
        &self,
        weight: &PyTensor,
        bias: Option<&PyTensor>,
        groups: usize,
        stride: usize,
        dilation: usize,
        padding: usize,
    ) -> PyResult<PyTensor> {
        let opts = conv_opts(groups, stride, dilation, padding);
        guard(|| PyTensor(self.0.conv2d(&weight.0, bias.map(|b| &b.0), &opts)))
    }
    #[pyo3(signature = (kernel_size=2, stride=None))]
    fn avg_pool2d(&self, kernel_size: usize, stride: Option<usize>) -> PyResult<PyTensor> {
        let opts = PoolOpts { stride: stride.map(Into::into), ..PoolOpts::kernel(kernel_size) };
        guard(|| PyTensor(self.0.avg_pool2d(&opts)))
    }
    fn __len__(&self) -> PyResult<usize> {
        self.0.shape().first().copied().ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }

    #[pyo3(signature = (p=0.5))]
    fn dropout(&self, p: f64) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.dropout(p)))
    }
    /// Normalized over `axis` (the last one when None).
    #[pyo3(signature = (axis=None, eps=1e-5))]
    fn layernorm(&self, axis: Option<&Bound<PyAny>>, eps: f64) -> PyResult<PyTensor> {
        let axes = match axis {
            None => vec![-1],
            Some(a) => axes(&self.0, Some(a))?,
        };
        guard(|| PyTensor(self.0.layernorm(&axes[..], eps)))
    }
    #[pyo3(signature = (weight, bias=None))]
    fn linear(&self, weight: &PyTensor, bias: Option<&PyTensor>) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.linear(&weight.0, bias.map(|b| &b.0))))
    }
    fn one_hot(&self, num_classes: usize) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.one_hot(num_classes)))
    }
    #[pyo3(signature = (key, value, attn_mask=None, is_causal=false))]
    fn scaled_dot_product_attention(
        &self,
        key: &PyTensor,
        value: &PyTensor,
        attn_mask: Option<&PyTensor>,
        is_causal: bool,
    ) -> PyResult<PyTensor> {
        let mask = attn_mask.map(|m| &m.0);
        guard(|| PyTensor(self.0.scaled_dot_product_attention(&key.0, &value.0, mask, is_causal)))
    }
}
