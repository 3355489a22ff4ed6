//! Tensor creation as tinygrad's static methods: constants, ranges, random tensors, and `*_like`,
//! each taking tinygrad's `dtype`, `device` and `requires_grad` keywords.

use ::lazygrad::tensor::Scalar;
use ::lazygrad::{DType, Tensor};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyTuple};

use crate::convert::{dtype_arg, finish, number, shape_of, size, sizes};
use crate::pytensor::{tensor_result, tensors, PyTensor};

/// A creation call's shape (`zeros(2, 3)` or `zeros((2, 3))`), dtype, device and requires_grad.
struct Made<'a> {
    shape: Vec<usize>,
    dtype: Option<DType>,
    device: Option<&'a str>,
    requires_grad: Option<bool>,
}

impl<'a> Made<'a> {
    fn of(
        shape: &Bound<PyTuple>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&'a str>,
        requires_grad: Option<bool>,
    ) -> PyResult<Made<'a>> {
        Ok(Made { shape: sizes(shape)?, dtype: dtype_arg(dtype)?, device, requires_grad })
    }
    /// The tensor `f` makes of the shape, then cast, moved and marked as asked.
    fn build(self, f: impl FnOnce(&[usize]) -> Tensor) -> PyResult<PyTensor> {
        let shape = self.shape;
        let t = tensor_result(|| f(&shape))?.0;
        finish(t, self.dtype, self.device, self.requires_grad)
    }
    /// A constant `value` of the shape in the dtype asked for, else the value's own.
    fn constant(self, value: Scalar) -> PyResult<PyTensor> {
        let dtype = self.dtype.unwrap_or(value.default_dtype());
        Made { dtype: None, ..self }.build(|shape| Tensor::full_dtype(shape, value, dtype))
    }
}

/// Random tensors of float dtype: drawn in float32 and cast to `dtype` when given.
macro_rules! random {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty = $default:expr),*) => $rust:expr;)*) => {
        #[pymethods]
        impl PyTensor {
            $($(#[$doc])*
            #[staticmethod]
            #[pyo3(signature = (*shape, $($arg=$default,)* dtype=None, device=None, requires_grad=None))]
            fn $name(
                shape: &Bound<PyTuple>,
                $($arg: $ty,)*
                dtype: Option<&Bound<PyAny>>,
                device: Option<&str>,
                requires_grad: Option<bool>,
            ) -> PyResult<PyTensor> {
                Made::of(shape, dtype, device, requires_grad)?.build(|s| ($rust)(s, $($arg),*))
            })*
        }
    };
}

random! {
    /// Uniform in [0, 1).
    rand() => |s: &[usize]| Tensor::rand(s);
    /// Standard normal.
    randn() => |s: &[usize]| Tensor::randn(s);
    /// Normal with `mean` and `std`.
    normal(mean: f64 = 0.0, std: f64 = 1.0) => |s: &[usize], m, d| Tensor::normal(s, m, d);
    /// Uniform in [low, high).
    uniform(low: f64 = 0.0, high: f64 = 1.0) => |s: &[usize], l, h| Tensor::uniform(s, l, h);
    /// Uniform in [-1, 1) scaled by the inverse square root of the element count.
    scaled_uniform() => |s: &[usize]| Tensor::scaled_uniform(s);
    /// Glorot (Xavier) uniform.
    glorot_uniform() => |s: &[usize]| Tensor::glorot_uniform(s);
    /// Kaiming (He) uniform with negative slope `a`.
    kaiming_uniform(a: f64 = 0.01) => |s: &[usize], a| Tensor::kaiming_uniform(s, a);
    /// Kaiming (He) normal with negative slope `a`.
    kaiming_normal(a: f64 = 0.01) => |s: &[usize], a| Tensor::kaiming_normal(s, a);
}

#[pymethods]
impl PyTensor {
    /// Zeros (float32 unless `dtype`).
    #[staticmethod]
    #[pyo3(signature = (*shape, dtype=None, device=None, requires_grad=None))]
    fn zeros(
        shape: &Bound<PyTuple>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        Made::of(shape, dtype, device, requires_grad)?.constant(Scalar::Float(0.0))
    }
    /// Ones (float32 unless `dtype`).
    #[staticmethod]
    #[pyo3(signature = (*shape, dtype=None, device=None, requires_grad=None))]
    fn ones(
        shape: &Bound<PyTuple>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        Made::of(shape, dtype, device, requires_grad)?.constant(Scalar::Float(1.0))
    }
    /// Storage of the shape whose values are not set (zeros here); a size may be a variable.
    #[staticmethod]
    #[pyo3(signature = (*shape, dtype=None, device=None, requires_grad=None))]
    fn empty(
        shape: &Bound<PyTuple>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        if let Some(dims) = crate::variable::symbolic_shape(shape)? {
            let dtype = dtype_arg(dtype)?.unwrap_or(DType::FLOAT32);
            let t = tensor_result(|| Tensor::empty_sym(&dims, dtype))?.0;
            return finish(t, None, device, requires_grad);
        }
        let made = Made::of(shape, dtype, device, requires_grad)?;
        let dtype = made.dtype.unwrap_or(DType::FLOAT32);
        Made { dtype: None, ..made }.build(|s| Tensor::empty(s, dtype))
    }
    /// A tensor over the host memory at address `ptr`, neither copied nor owned (tinygrad's
    /// `from_blob`; float32 unless `dtype`, on the default device unless `device`, which must be
    /// one whose memory is the host's): what is written there shows in what is computed after.
    /// The memory must outlive the tensor.
    #[staticmethod]
    #[pyo3(signature = (ptr, shape, dtype=None, device=None, requires_grad=None))]
    fn from_blob(
        ptr: usize,
        shape: &Bound<PyAny>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        let (shape, dtype) = (shape_of(shape)?, dtype_arg(dtype)?.unwrap_or(DType::FLOAT32));
        let device = device.map_or_else(::lazygrad::runtime::default_device, str::to_string);
        let t = crate::error::checked(|| {
            // SAFETY: tinygrad's contract for `from_blob`: the caller keeps the memory at `ptr`
            // valid for the tensor's bytes while the tensor lives
            unsafe { Tensor::try_from_blob(ptr as *mut u8, &shape, dtype, &device) }
        })?;
        finish(t, None, None, requires_grad)
    }
    /// `fill_value` everywhere (its dtype from the value unless `dtype`).
    #[staticmethod]
    #[pyo3(signature = (shape, fill_value, dtype=None, device=None, requires_grad=None))]
    fn full(
        shape: &Bound<PyAny>,
        fill_value: &Bound<PyAny>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        let made = Made { shape: shape_of(shape)?, dtype: dtype_arg(dtype)?, device, requires_grad };
        made.constant(number(fill_value, "full")?)
    }
    /// Integers uniform in [low, high) (int32 unless `dtype`).
    #[staticmethod]
    #[pyo3(signature = (*shape, low=0, high=10, dtype=None, device=None, requires_grad=None))]
    fn randint(
        shape: &Bound<PyTuple>,
        low: i64,
        high: i64,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        Made::of(shape, dtype, device, requires_grad)?.build(|s| Tensor::randint(s, low, high))
    }
    /// `start, start+step, ...` below `stop` (`arange(n)` counts from 0): int32 if all three are
    /// ints, else float32, unless `dtype`.
    #[staticmethod]
    #[pyo3(signature = (start, stop=None, step=None, dtype=None, device=None, requires_grad=None))]
    fn arange(
        start: &Bound<PyAny>,
        stop: Option<&Bound<PyAny>>,
        step: Option<&Bound<PyAny>>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        let start = number(start, "arange")?;
        let (start, stop) = match stop {
            Some(stop) if !stop.is_none() => (start, number(stop, "arange")?),
            _ => (Scalar::Int(0), start),
        };
        let step = step.map(|s| number(s, "arange")).transpose()?.unwrap_or(Scalar::Int(1));
        let dtype = dtype_arg(dtype)?;
        let made = Made { shape: vec![], dtype: None, device, requires_grad };
        made.build(|_| Tensor::arange_of(start, stop, step, dtype))
    }
    /// `steps` evenly spaced values from `start` to `stop`, both included (float32 unless
    /// `dtype`; bool is an error).
    #[staticmethod]
    #[pyo3(signature = (start, stop, steps, dtype=None, device=None, requires_grad=None))]
    fn linspace(
        start: f64,
        stop: f64,
        steps: isize,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        let steps = size(steps)?;
        let dtype = dtype_arg(dtype)?.unwrap_or(DType::FLOAT32);
        let t = crate::error::checked(|| Tensor::linspace_as(start, stop, steps, dtype))?;
        finish(t, None, device, requires_grad)
    }
    /// The `n`×`m` matrix (`m` defaults to `n`) with ones on the diagonal.
    #[staticmethod]
    #[pyo3(signature = (n, m=None, dtype=None, device=None, requires_grad=None))]
    fn eye(
        n: isize,
        m: Option<isize>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        let (n, m) = (size(n)?, size(m.unwrap_or(n))?);
        let made = Made { shape: vec![], dtype: dtype_arg(dtype)?, device, requires_grad };
        made.build(|_| Tensor::eye_rect(n, m))
    }
    /// A random permutation of `0..n`.
    #[staticmethod]
    #[pyo3(signature = (n, dtype=None, device=None, requires_grad=None))]
    fn randperm(
        n: isize,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        let n = size(n)?;
        let made = Made { shape: vec![], dtype: dtype_arg(dtype)?, device, requires_grad };
        made.build(|_| Tensor::randperm(n))
    }
    #[staticmethod]
    fn manual_seed(seed: u64) {
        Tensor::manual_seed(seed)
    }
    /// This tensor and `args` joined along `dim` (also `Tensor.cat(a, b)`).
    #[pyo3(signature = (*args, dim=0))]
    fn cat(&self, args: &Bound<PyTuple>, dim: isize) -> PyResult<PyTensor> {
        let mut all = vec![self.clone()];
        all.extend(listed(args)?);
        tensor_result(|| Tensor::cat(&tensors(&all), dim))
    }

    #[pyo3(signature = (fill_value, dtype=None, device=None, requires_grad=None))]
    fn full_like(
        &self,
        fill_value: &Bound<PyAny>,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        self.like(dtype, device, requires_grad)?.constant(number(fill_value, "full_like")?)
    }
    #[pyo3(signature = (dtype=None, device=None, requires_grad=None))]
    fn zeros_like(
        &self,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        self.like(dtype, device, requires_grad)?.constant(Scalar::Int(0))
    }
    #[pyo3(signature = (dtype=None, device=None, requires_grad=None))]
    fn ones_like(
        &self,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        self.like(dtype, device, requires_grad)?.constant(Scalar::Int(1))
    }
    #[pyo3(signature = (dtype=None, device=None, requires_grad=None))]
    fn rand_like(
        &self,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        self.like(dtype, device, requires_grad)?.build(Tensor::rand)
    }
    #[pyo3(signature = (dtype=None, device=None, requires_grad=None))]
    fn randn_like(
        &self,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&str>,
        requires_grad: Option<bool>,
    ) -> PyResult<PyTensor> {
        self.like(dtype, device, requires_grad)?.build(Tensor::randn)
    }
}

impl PyTensor {
    /// A creation call of this tensor's shape, in its dtype unless `dtype`.
    fn like<'a>(
        &self,
        dtype: Option<&Bound<PyAny>>,
        device: Option<&'a str>,
        requires_grad: Option<bool>,
    ) -> PyResult<Made<'a>> {
        let dtype = dtype_arg(dtype)?.unwrap_or(self.0.dtype());
        Ok(Made { shape: self.0.shape(), dtype: Some(dtype), device, requires_grad })
    }
}

/// Tensors given as arguments (`stack(a, b)`) or as one list (`stack([a, b])`); any other form
/// (a list beside a tensor) is an InvalidArgument, as tinygrad's ValueError.
/// `Tensor.stack`, as tinygrad takes it: `t.stack(u, v, dim=1)` (the tensor first),
/// `Tensor.stack(t, u)` and `Tensor.stack((t, u))`. A descriptor, not a method (a method refuses a
/// tuple in `self`'s place): read through a tensor, it stacks that tensor first.
#[pyclass(frozen)]
pub(crate) struct Stack;

#[pymethods]
impl Stack {
    fn __get__(&self, tensor: &Bound<PyAny>, _owner: Option<&Bound<PyAny>>) -> PyResult<Py<PyAny>> {
        let py = tensor.py();
        let first: Option<PyTensor> = match tensor.is_none() {
            true => None,
            false => Some(tensor.cast::<PyTensor>()?.get().clone()),
        };
        let stack = PyCFunction::new_closure(py, Some(c"stack"), None, move |args, kwargs| -> PyResult<Py<PyAny>> {
            let mut dim = 0;
            for (key, value) in kwargs.into_iter().flatten() {
                match key.extract::<String>()?.as_str() {
                    "dim" => dim = value.extract()?,
                    other => return Err(PyTypeError::new_err(format!("stack() got an unexpected keyword {other:?}"))),
                }
            }
            let mut all: Vec<PyTensor> = first.iter().cloned().collect();
            all.extend(listed(args)?);
            let stacked = tensor_result(|| Tensor::stack(&tensors(&all), dim))?;
            Ok(Py::new(args.py(), stacked)?.into_any())
        })?;
        Ok(stack.into_any().unbind())
    }
}

fn listed(args: &Bound<PyTuple>) -> PyResult<Vec<PyTensor>> {
    let given = match args.len() {
        1 if args.get_item(0)?.cast::<PyTensor>().is_err() => args.get_item(0)?.extract(),
        _ => args.extract(),
    };
    given.map_err(|_| crate::error::invalid(format!("expected tensors as arguments or one list of them, got {args}")))
}
