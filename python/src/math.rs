//! Elementwise math: unary ops, casts and activations that take nothing (one forwarding macro),
//! those with tinygrad's keyword arguments, and the ternary ops.

use ::lazygrad::tensor::Scalar;
use pyo3::prelude::*;

use crate::convert::{number, Rhs};
use crate::pytensor::{tensor_result, PyTensor};

/// Methods that take nothing and forward to the Rust method of the same name.
macro_rules! forward {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(fn $name(&self) -> PyResult<PyTensor> {
                tensor_result(|| self.0.$name())
            })*
        }
    };
}

forward!(
    relu,
    exp,
    exp2,
    log,
    log2,
    log10,
    sqrt,
    rsqrt,
    reciprocal,
    sigmoid,
    tanh,
    sin,
    cos,
    tan,
    asin,
    acos,
    atan,
    sinh,
    cosh,
    asinh,
    acosh,
    atanh,
    erf,
    erfc,
    expm1,
    log1p,
    square,
    abs,
    sign,
    floor,
    ceil,
    round,
    trunc,
    neg,
    logical_not,
    bitwise_not,
    isnan,
    isfinite,
    quick_gelu,
    silu,
    swish,
    relu6,
    hardswish,
    mish,
    softsign,
    logsigmoid,
    float,
    half,
    int,
    bool,
    double,
    long,
    bfloat16,
);

/// Activations with one float parameter, named and defaulted as tinygrad names them.
macro_rules! with_param {
    ($($name:ident($arg:ident = $default:expr) => $rust:ident;)*) => {
        #[pymethods]
        impl PyTensor {
            $(#[pyo3(signature = ($arg=$default))]
            fn $name(&self, $arg: f64) -> PyResult<PyTensor> {
                tensor_result(|| self.0.$rust($arg))
            })*
        }
    };
}

with_param! {
    elu(alpha = 1.0) => elu_with;
    celu(alpha = 1.0) => celu_with;
    leaky_relu(neg_slope = 0.01) => leaky_relu_with;
    softplus(beta = 1.0) => softplus_with;
}

#[pymethods]
impl PyTensor {
    /// GELU: tinygrad's tanh approximation, or with `approximate="none"` the exact erf form.
    #[pyo3(signature = (approximate="tanh"))]
    fn gelu(&self, approximate: &str) -> PyResult<PyTensor> {
        match approximate {
            "tanh" => tensor_result(|| self.0.gelu()),
            "none" => tensor_result(|| self.0.gelu_exact()),
            other => Err(pyo3::exceptions::PyValueError::new_err(format!("gelu: approximate={other:?}"))),
        }
    }
    #[pyo3(signature = (alpha=1.673_263_242_354_377_3, gamma=1.050_700_987_355_480_5))]
    fn selu(&self, alpha: f64, gamma: f64) -> PyResult<PyTensor> {
        tensor_result(|| self.0.selu_with(alpha, gamma))
    }
    #[pyo3(signature = (min_val=-1.0, max_val=1.0))]
    fn hardtanh(&self, min_val: f64, max_val: f64) -> PyResult<PyTensor> {
        tensor_result(|| self.0.hardtanh_with(min_val, max_val))
    }
    #[pyo3(signature = (alpha=1.0/6.0, beta=0.5))]
    fn hardsigmoid(&self, alpha: f64, beta: f64) -> PyResult<PyTensor> {
        tensor_result(|| self.0.hardsigmoid_with(alpha, beta))
    }
    /// Whether each element is infinite (of the signs asked for).
    #[pyo3(signature = (detect_positive=true, detect_negative=true))]
    fn isinf(&self, detect_positive: bool, detect_negative: bool) -> PyResult<PyTensor> {
        tensor_result(|| match (detect_positive, detect_negative) {
            (true, true) => self.0.isinf(),
            (true, false) => self.0.eq(f64::INFINITY),
            (false, true) => self.0.eq(f64::NEG_INFINITY),
            (false, false) => self.0.eq(f64::NAN),
        })
    }
    /// Values below `min_` raised to it and above `max_` lowered to it (either may be None).
    #[pyo3(signature = (min_=None, max_=None))]
    fn clamp(&self, min_: Option<&Bound<PyAny>>, max_: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let bound = |b: Option<&Bound<PyAny>>| -> PyResult<Option<Scalar>> {
            b.filter(|b| !b.is_none()).map(|b| number(b, "clamp")).transpose()
        };
        let (lo, hi) = (bound(min_)?, bound(max_)?);
        tensor_result(|| self.0.clamp(lo, hi))
    }
    #[pyo3(signature = (min_=None, max_=None))]
    fn clip(&self, min_: Option<&Bound<PyAny>>, max_: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        self.clamp(min_, max_)
    }
    /// `x` where this (bool) tensor is true, else `y` (tensors or numbers).
    #[pyo3(name = "where")]
    fn where_(&self, x: &Bound<PyAny>, y: &Bound<PyAny>) -> PyResult<PyTensor> {
        let (x, y) = (Rhs::of(x)?, Rhs::of(y)?);
        tensor_result(|| self.0.where_(x, y))
    }
    /// `self + (end - self) * weight`.
    fn lerp(&self, end: &PyTensor, weight: &Bound<PyAny>) -> PyResult<PyTensor> {
        let weight = Rhs::of(weight)?;
        tensor_result(|| self.0.lerp(&end.0, weight))
    }
    fn copysign(&self, other: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(other, false, |a, b| a.copysign(b))
    }
    fn logaddexp(&self, other: &Bound<PyAny>) -> PyResult<PyTensor> {
        self.binary(other, false, |a, b| a.logaddexp(b))
    }
}
