//! `Tensor`: construction from Python data, its properties, reading its values, autograd, the
//! operators, indexing, and `Tensor.train()`'s scope. The ops live beside it, one file per
//! group as tinygrad's docs group them (creation, movement, math, reduce, functional).

use ::lazygrad::tensor::RoundingMode;
use ::lazygrad::{Context, DType, Tensor};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyTuple};

use crate::convert::{data, dtype_arg, indices, nest, to_numpy, Rhs};
use crate::dtype::{dtype_of, PyDType};
use crate::error::{checked, guard};
use crate::pytensor::{tensor_result, tensors, PyTensor};

impl PyTensor {
    /// `op(self, rhs)`, or with `reverse` `op(rhs, self)`, for a Tensor or number `rhs`.
    pub(crate) fn binary(
        &self,
        rhs: &Bound<PyAny>,
        reverse: bool,
        op: fn(&Tensor, Rhs) -> Tensor,
    ) -> PyResult<PyTensor> {
        let rhs = Rhs::of(rhs)?;
        tensor_result(|| match (reverse, rhs) {
            (false, rhs) => op(&self.0, rhs),
            (true, rhs) => {
                let lhs = rhs.tensor(&self.0);
                op(&lhs, Rhs::Tensor(self.0.clone()))
            }
        })
    }
}

/// tinygrad's `rounding_mode` argument.
fn rounding(mode: Option<&str>) -> PyResult<Option<RoundingMode>> {
    match mode {
        None => Ok(None),
        Some("trunc") => Ok(Some(RoundingMode::Trunc)),
        Some("floor") => Ok(Some(RoundingMode::Floor)),
        Some(other) => Err(crate::error::invalid(format!("rounding_mode={other:?}: None, 'trunc' or 'floor'"))),
    }
}

/// How pickle rebuilds a tensor: the class, called with its values, device and dtype name.
type Rebuild = (Py<PyAny>, (Py<PyAny>, String, String));

#[pymethods]
impl PyTensor {
    /// `Tensor(data, device=None, dtype=None, requires_grad=None)`: data is None, a number,
    /// nested lists or tuples, bytes or a numpy array (tinygrad's kinds).
    #[new]
    #[pyo3(signature = (data, device=None, dtype=None, requires_grad=None))]
    fn new(
        data: &Bound<PyAny>,
        device: Option<&str>,
        dtype: Option<&Bound<PyAny>>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        if let Ok(t) = data.cast::<PyTensor>() {
            return crate::convert::finish(t.get().0.clone(), dtype_arg(dtype)?, device, requires_grad);
        }
        if let Ok(u) = data.cast::<crate::uop::PyUOp>() {
            let u = u.get().0.clone();
            let t = match device {
                Some(device) => tensor_result(|| Tensor::from_uop(u, device))?.0,
                None => tensor_result(|| Tensor::from_graph(u))?.0,
            };
            return crate::convert::finish(t, dtype_arg(dtype)?, None, requires_grad);
        }
        let t = self::data(data, dtype_arg(dtype)?, device)?;
        crate::convert::finish(t, None, None, requires_grad)
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.shape())
    }
    /// The shape with each variable at its largest value (tinygrad's `max_shape`).
    #[getter]
    fn max_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.shape())
    }
    /// The element count of `max_shape`.
    fn max_numel(&self) -> usize {
        self.0.numel()
    }
    /// The graph node this tensor is now (tinygrad's `uop`).
    #[getter]
    fn uop(&self, py: Python) -> PyResult<Py<crate::uop::PyUOp>> {
        crate::uop::PyUOp::of(py, self.0.uop())
    }
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType(self.0.dtype())
    }
    /// Where the tensor lives: a name, a tuple of names for a tensor on several devices, or None
    /// for a deviceless one (`Tensor(UOp.const(2.0))`).
    #[getter]
    fn device(&self, py: Python) -> PyResult<Py<PyAny>> {
        match self.0.placed_device() {
            Some(device) => crate::device::device_value(py, device),
            None => Ok(py.None()),
        }
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.0.ndim()
    }
    fn numel(&self) -> usize {
        self.0.numel()
    }
    fn element_size(&self) -> usize {
        self.0.dtype().itemsize()
    }
    fn nbytes(&self) -> usize {
        self.0.numel() * self.0.dtype().itemsize()
    }
    fn is_floating_point(&self) -> bool {
        self.0.dtype().is_float()
    }
    /// The size of axis `dim`, or the shape.
    #[pyo3(signature = (dim=None))]
    fn size(&self, py: Python, dim: Option<isize>) -> PyResult<Py<PyAny>> {
        let shape = self.0.shape();
        match dim {
            None => Ok(PyTuple::new(py, shape)?.into_any().unbind()),
            Some(d) => {
                let axis = if d < 0 { d + shape.len() as isize } else { d };
                let n = usize::try_from(axis).ok().and_then(|a| shape.get(a)).ok_or_else(|| {
                    PyIndexError::new_err(format!("size: dimension {d} out of range for shape {shape:?}"))
                })?;
                Ok(n.into_pyobject(py)?.into_any().unbind())
            }
        }
    }
    #[getter]
    fn requires_grad(&self) -> Option<bool> {
        self.0.requires_grad_flag()
    }
    #[setter(requires_grad)]
    fn set_requires_grad(&self, flag: bool) {
        self.0.requires_grad(flag);
    }
    /// The gradient `backward` left, or None.
    #[getter]
    fn grad(&self) -> Option<PyTensor> {
        self.0.grad().map(PyTensor)
    }
    #[setter(grad)]
    fn set_grad(&self, grad: Option<PyTensor>) {
        self.0.set_grad(grad.map(|g| g.0))
    }
    /// This tensor with gradients recorded (`requires_grad_()` in tinygrad and torch).
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_(&self, requires_grad: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.requires_grad(requires_grad))
    }

    /// Compute the value now, together with `others` in one schedule (errors from compilers and
    /// devices are `RuntimeError`s).
    #[pyo3(signature = (*others))]
    fn realize(&self, others: Vec<PyTensor>) -> PyResult<PyTensor> {
        let all: Vec<Tensor> = std::iter::once(self.0.clone()).chain(others.into_iter().map(|t| t.0)).collect();
        checked(|| Tensor::realize_all(&all))?;
        Ok(self.clone())
    }
    /// The values as nested lists of Python numbers.
    fn tolist(&self, py: Python) -> PyResult<Py<PyAny>> {
        let t = &self.0;
        let shape = t.bound_shape();
        let d = t.dtype();
        match () {
            _ if d.is_float() => nest(py, &checked(|| t.cast(DType::FLOAT64).try_to_vec::<f64>())?, &shape),
            _ if d.is_bool() => nest(py, &checked(|| t.try_to_vec::<bool>())?, &shape),
            _ if d == DType::UINT64 => nest(py, &checked(|| t.try_to_vec::<u64>())?, &shape),
            _ => nest(py, &checked(|| t.cast(DType::INT64).try_to_vec::<i64>())?, &shape),
        }
    }
    /// The value of a one-element tensor as a Python number.
    fn item(&self, py: Python) -> PyResult<Py<PyAny>> {
        if self.0.numel() != 1 {
            let shape = self.0.shape();
            return Err(PyValueError::new_err(format!("item: a tensor of shape {shape:?} has no single value")));
        }
        PyTensor(guard(|| self.0.reshape(&[] as &[isize]))?).tolist(py)
    }
    /// The values as a numpy array of the tensor's shape and dtype (numpy must be installed).
    fn numpy(&self, py: Python) -> PyResult<Py<PyAny>> {
        to_numpy(py, &self.0)
    }
    /// The values as bytes (little-endian).
    fn data(&self, py: Python) -> PyResult<Py<PyAny>> {
        let bytes = checked(|| self.0.raw_bytes())?;
        Ok(pyo3::types::PyBytes::new(py, &bytes).into_any().unbind())
    }
    /// Gradients, left in `.grad`, of this tensor with respect to every float tensor it depends
    /// on, seeded with `gradient` (needed unless this tensor has one element).
    #[pyo3(signature = (gradient=None))]
    fn backward(&self, gradient: Option<&PyTensor>) -> PyResult<PyTensor> {
        checked(|| self.0.backward_with(gradient.map(|g| &g.0))).map(PyTensor)
    }
    /// tinygrad's `is_param`: whether `backward` and optimizers take this tensor (False for
    /// buffers such as running statistics); lazygrad's `requires_grad` opt-out.
    #[getter]
    fn is_param(&self) -> bool {
        self.0.requires_grad_flag() != Some(false)
    }
    #[setter(is_param)]
    fn set_is_param(&self, is_param: bool) {
        self.0.requires_grad(is_param);
    }
    /// Set `is_param`; returns this tensor.
    #[pyo3(signature = (is_param=true))]
    fn is_param_(&self, is_param: bool) -> PyTensor {
        PyTensor(self.0.requires_grad(is_param))
    }
    /// Pickling (and `copy.deepcopy`): the values, device and dtype, rebuilt as a new tensor.
    fn __reduce__(slf: &Bound<Self>) -> PyResult<Rebuild> {
        let (py, t) = (slf.py(), &slf.get().0);
        let class = py.get_type::<PyTensor>().into_any().unbind();
        Ok((class, (to_numpy(py, t)?, t.device().to_string(), t.dtype().name().to_string())))
    }
    /// The gradients of this tensor with respect to `targets` (tinygrad's `gradient`): zeros for
    /// a target it does not depend on; `gradient` seeds a tensor that is not a scalar.
    #[pyo3(signature = (*targets, gradient=None))]
    fn gradient(&self, targets: Vec<PyTensor>, gradient: Option<&PyTensor>) -> PyResult<Vec<PyTensor>> {
        let grads = checked(|| self.0.gradient_with(&tensors(&targets), gradient.map(|g| &g.0)))?;
        Ok(grads.into_iter().map(PyTensor).collect())
    }

    /// tinygrad's form: `<Tensor <UOp DEVICE SHAPE DTYPE> on DEVICE with grad GRAD>`, the device
    /// None for a deviceless tensor and the gradient's node or None.
    fn __repr__(&self) -> String {
        let shape = match &self.0.shape()[..] {
            [one] => format!("({one},)"),
            all => format!("({})", all.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
        };
        let u = self.0.uop();
        let uop_device = ::lazygrad::schedule::graph_device(&u).unwrap_or_else(|| "None".into());
        let device = self.0.placed_device().unwrap_or("None");
        let grad = self.0.grad().map_or("None".into(), |g| crate::uop::PyUOp(g.uop()).__repr__());
        format!("<Tensor <UOp {uop_device} {shape} {}> on {device} with grad {grad}>", self.0.dtype().name())
    }
    /// As in tinygrad: a tensor has no truth value (`if t:` is a TypeError; compare `.item()`).
    fn __bool__(&self) -> PyResult<bool> {
        Err(PyTypeError::new_err("__bool__ on Tensor is not defined"))
    }
    fn __len__(&self) -> PyResult<usize> {
        self.0.shape().first().copied().ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }
    /// The rows along the first axis (a 0-d tensor has none: a TypeError, as torch raises; the
    /// fallback through `__getitem__` gave an empty iteration).
    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyIterator>> {
        let t = &slf.get().0;
        let n = slf.get().__len__()?;
        let rows = (0..n)
            .map(|i| checked(|| t.try_index(&[::lazygrad::tensor::Idx::I(i as isize)])).map(PyTensor))
            .collect::<PyResult<Vec<_>>>()?;
        pyo3::types::PyList::new(slf.py(), rows)?.try_iter()
    }
    /// By identity (`==` compares elements), so tensors can key dicts and fill sets.
    fn __hash__(slf: &Bound<Self>) -> isize {
        slf.as_ptr() as isize
    }

    #[pyo3(signature = (x, reverse=false))]
    fn add(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.add(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn sub(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.sub(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn mul(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.mul(b))
    }
    /// True division, or with `rounding_mode` ("trunc", "floor") rounded.
    #[pyo3(signature = (x, reverse=false, rounding_mode=None))]
    fn div(&self, x: &Bound<PyAny>, reverse: bool, rounding_mode: Option<&str>) -> PyResult<PyTensor> {
        match rounding(rounding_mode)? {
            None => self.binary(x, reverse, |a, b| a.div(b)),
            Some(RoundingMode::Trunc) => self.binary(x, reverse, |a, b| a.div_mode(b, Some(RoundingMode::Trunc))),
            Some(RoundingMode::Floor) => self.binary(x, reverse, |a, b| a.div_mode(b, Some(RoundingMode::Floor))),
        }
    }
    #[pyo3(signature = (x, reverse=false))]
    fn idiv(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.div_mode(b, Some(RoundingMode::Trunc)))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn r#mod(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.mod_(b))
    }
    fn fmod(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.fmod(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn pow(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.pow(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn bitwise_and(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.bitwise_and(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn bitwise_or(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.bitwise_or(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn bitwise_xor(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.bitwise_xor(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn lshift(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.lshift(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn rshift(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.rshift(b))
    }
    fn maximum(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.maximum(b))
    }
    fn minimum(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.minimum(b))
    }
    fn eq(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.eq(b))
    }
    fn ne(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.ne(b))
    }
    #[pyo3(signature = (x, reverse=false))]
    fn matmul(&self, x: &Bound<PyAny>, reverse: bool) -> PyResult<PyTensor> {
        self.binary(x, reverse, |a, b| a.matmul(&b.tensor(a)))
    }
    fn dot(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.dot(&b.tensor(a)))
    }

    fn __add__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.add(b))
    }
    fn __radd__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, true, |a, b| a.add(b))
    }
    fn __sub__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.sub(x, false)
    }
    fn __rsub__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.sub(x, true)
    }
    fn __mul__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.mul(x, false)
    }
    fn __rmul__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.mul(x, true)
    }
    fn __truediv__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.div(x, false, None)
    }
    fn __rtruediv__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.div(x, true, None)
    }
    fn __floordiv__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.div(x, false, Some("floor"))
    }
    fn __rfloordiv__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.div(x, true, Some("floor"))
    }
    fn __mod__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.r#mod(x, false)
    }
    fn __rmod__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.r#mod(x, true)
    }
    fn __pow__(&self, x: &Bound<PyAny>, _modulo: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        self.pow(x, false)
    }
    fn __rpow__(&self, x: &Bound<PyAny>, _modulo: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        self.pow(x, true)
    }
    fn __matmul__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.matmul(x, false)
    }
    fn __rmatmul__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.matmul(x, true)
    }
    fn __and__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.bitwise_and(x, false)
    }
    fn __rand__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.bitwise_and(x, true)
    }
    fn __or__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.bitwise_or(x, false)
    }
    fn __ror__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.bitwise_or(x, true)
    }
    fn __xor__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.bitwise_xor(x, false)
    }
    fn __rxor__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.bitwise_xor(x, true)
    }
    fn __lshift__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.lshift(x, false)
    }
    fn __rlshift__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.lshift(x, true)
    }
    fn __rshift__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.rshift(x, false)
    }
    fn __rrshift__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.rshift(x, true)
    }
    fn __neg__(&self) -> PyResult<PyTensor> {
        tensor_result(|| self.0.neg())
    }
    fn __invert__(&self) -> PyResult<PyTensor> {
        tensor_result(|| self.0.bitwise_not())
    }
    fn __lt__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.lt(b))
    }
    fn __gt__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.gt(b))
    }
    fn __le__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.le(b))
    }
    fn __ge__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(x, false, |a, b| a.ge(b))
    }
    /// Elementwise, as in tinygrad: `(pred == y).mean()`.
    fn __eq__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.eq(x)
    }
    fn __ne__(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.ne(x)
    }

    // in place, as tinygrad: `t += x` assigns `t + x` into t
    fn __iadd__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__add__(x)?)
    }
    fn __isub__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__sub__(x)?)
    }
    fn __imul__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__mul__(x)?)
    }
    fn __itruediv__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__truediv__(x)?)
    }
    fn __ipow__(&self, x: &Bound<PyAny>, _modulo: Option<&Bound<PyAny>>) -> PyResult<()> {
        self.assign_from(self.pow(x, false)?)
    }
    fn __iand__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__and__(x)?)
    }
    fn __ior__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__or__(x)?)
    }
    fn __ixor__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__xor__(x)?)
    }
    fn __ilshift__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__lshift__(x)?)
    }
    fn __irshift__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__rshift__(x)?)
    }
    fn __imatmul__(&self, x: &Bound<PyAny>) -> PyResult<()> {
        self.assign_from(self.__matmul__(x)?)
    }

    /// Indexing with ints, slices, None, Ellipsis, lists and integer tensors (which gather), or a
    /// tuple of them; an index past an axis is an IndexError.
    fn __getitem__(&self, index: &Bound<PyAny>) -> PyResult<PyTensor> {
        if let Some(bounds) = crate::variable::symbolic_slices(index, &self.0.dims()) {
            return tensor_result(|| self.0.shrink_sym(&bounds));
        }
        let idx = indices(index)?;
        checked(|| self.0.try_index(&idx)).map(PyTensor)
    }
    /// `t[index] = value`: the value (a tensor or a number) written into the view at once.
    fn __setitem__(&self, index: &Bound<PyAny>, value: &Bound<PyAny>) -> PyResult<()> {
        let (idx, value) = (indices(index)?, Rhs::of(value)?);
        checked(|| self.0.try_setitem(&idx, &value.tensor(&self.0)))
    }
    /// Write `x`'s values into this tensor's storage (lazily: in place when realized).
    fn assign(&self, x: &Bound<PyAny>) -> PyResult<PyTensor> {
        let value = Rhs::of(x)?.tensor(&self.0);
        tensor_result(|| self.0.assign(&value.cast(self.0.dtype()).broadcast_to(&self.0.shape())))
    }
    /// Point this tensor at `x`'s graph (same shape).
    fn replace(&self, x: &PyTensor) -> PyResult<PyTensor> {
        tensor_result(|| self.0.replace(&x.0))
    }
    /// A copy with storage of its own (on `device` when given), its gradient copied too.
    #[pyo3(name = "clone", signature = (device=None))]
    fn clone_storage(&self, device: Option<&str>) -> PyResult<PyTensor> {
        tensor_result(|| self.0.clone_to(device))
    }
    /// This tensor on `device`: a name, or a tuple of names to hold a whole copy on each.
    fn to(&self, device: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let device = device.map(crate::device::device_spec).transpose()?;
        tensor_result(|| device.map_or_else(|| self.0.clone(), |d| self.0.to(&d)))
    }
    /// Move this tensor (and its gradient) to `device` in place.
    fn to_(&self, device: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let device = device.map(crate::device::device_spec).transpose()?;
        tensor_result(|| device.map_or_else(|| self.0.clone(), |d| self.0.to_(&d)))
    }
    /// This tensor split along `axis` over `devices`, a part on each (all of it on each when
    /// `axis` is None).
    #[pyo3(signature = (devices, axis=None))]
    fn shard(&self, devices: Vec<String>, axis: Option<isize>) -> PyResult<PyTensor> {
        let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
        checked(|| self.0.try_shard(&devices, axis)).map(PyTensor)
    }
    /// `shard` in place.
    #[pyo3(signature = (devices, axis=None))]
    fn shard_(&self, devices: Vec<String>, axis: Option<isize>) -> PyResult<PyTensor> {
        let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
        checked(|| self.0.try_shard_(&devices, axis)).map(PyTensor)
    }
    fn cast(&self, dtype: &Bound<PyAny>) -> PyResult<PyTensor> {
        let dtype = dtype_of(dtype)?;
        tensor_result(|| self.0.cast(dtype))
    }
    fn bitcast(&self, dtype: &Bound<PyAny>) -> PyResult<PyTensor> {
        let dtype = dtype_of(dtype)?;
        tensor_result(|| self.0.bitcast(dtype))
    }
    /// `layers` applied in order (each a callable: a layer, `Tensor.relu`, a lambda).
    fn sequential(slf: &Bound<Self>, ll: &Bound<PyAny>) -> PyResult<Py<PyAny>> {
        let mut x = slf.clone().into_any();
        for layer in ll.try_iter()? {
            x = layer?.call1((x,))?;
        }
        Ok(x.unbind())
    }
    /// A context manager under which optimizers may step (tinygrad's `with Tensor.train():`).
    #[staticmethod]
    #[pyo3(signature = (mode=true))]
    fn train(mode: bool) -> Training {
        Training { mode, context: None }
    }
    /// `Tensor.train(False)`.
    #[staticmethod]
    fn test() -> Training {
        Training { mode: false, context: None }
    }
}

impl PyTensor {
    fn assign_from(&self, value: PyTensor) -> PyResult<()> {
        guard(|| self.0.assign(&value.0.cast(self.0.dtype()))).map(|_| ())
    }
}

/// `Tensor.train()`: TRAINING set while the `with` block runs (on this thread).
#[pyclass(unsendable)]
pub(crate) struct Training {
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
