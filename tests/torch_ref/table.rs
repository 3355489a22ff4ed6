//! The op table: every op key of `tools/gen_reference.py` mapped to the lazygrad calls that compute
//! it from the case's inputs (already through their `pre` views) and parameters. A key missing
//! here is reported as "missing" by the runner, so ops can be added as the API grows.

use std::collections::HashMap;

use lazygrad::nn::layers::{
    BatchNorm, Conv2d, ConvTranspose2d, Embedding, GroupNorm, LSTMCell, LayerNorm, Linear, RMSNorm,
};
use lazygrad::tensor::{ConvOpts, Idx, PadMode, PoolOpts, Reduction, RoundingMode};
use lazygrad::{Context, DType, Tensor};

use super::fixture::dtype_from_name;
use super::params::{Json, Params};

/// An op: inputs and parameters to its outputs (most ops have one).
pub type OpFn = Box<dyn Fn(&[Tensor], &Params) -> Vec<Tensor> + Send + Sync>;

/// What an op closure may return.
pub trait IntoOuts {
    fn outs(self) -> Vec<Tensor>;
}
impl IntoOuts for Tensor {
    fn outs(self) -> Vec<Tensor> {
        vec![self]
    }
}
impl IntoOuts for Vec<Tensor> {
    fn outs(self) -> Vec<Tensor> {
        self
    }
}
impl IntoOuts for (Tensor, Tensor) {
    fn outs(self) -> Vec<Tensor> {
        vec![self.0, self.1]
    }
}

fn op<R: IntoOuts>(f: impl Fn(&[Tensor], &Params) -> R + Send + Sync + 'static) -> OpFn {
    Box::new(move |x, p| f(x, p).outs())
}

/// Call a reduction with the case's `axis` (absent/null: all axes) and any further arguments.
macro_rules! over_axes {
    ($x:expr, $method:ident, $p:expr $(, $arg:expr)*) => {
        match $p.axis() {
            None => $x.$method(None::<isize> $(, $arg)*),
            Some(a) => $x.$method(a.as_slice() $(, $arg)*),
        }
    };
}

fn refs(x: &[Tensor]) -> Vec<&Tensor> {
    x.iter().collect()
}

fn reduction(p: &Params) -> Reduction {
    match p.opt("reduction").map(Json::as_str) {
        None | Some("mean") => Reduction::Mean,
        Some("sum") => Reduction::Sum,
        Some("none") => Reduction::None,
        Some(r) => panic!("unknown reduction {r:?}"),
    }
}

/// The index spec of `index`/`setitem` (see `idx_tuple` in the generator) as lazygrad `Idx`s.
fn index_spec(p: &Params, x: &[Tensor]) -> Vec<Idx> {
    let spec = p.opt("idx").expect("idx parameter").as_arr();
    spec.iter()
        .map(|s| match s {
            Json::Int(i) => Idx::I(*i as isize),
            Json::Arr(r) => {
                let bound = |v: &Json| (*v != Json::Null).then(|| v.as_i64() as isize);
                Idx::R(bound(&r[0]), bound(&r[1]), bound(&r[2]).unwrap_or(1))
            }
            Json::Str(s) if s == "new" => Idx::NewAxis,
            Json::Str(s) if s == "..." => Idx::Ellipsis,
            Json::Str(s) if s == ":" => Idx::Full,
            Json::Obj(_) => Idx::Tensor(x[s.get("t").expect("tensor index").as_i64() as usize].clone()),
            other => panic!("bad index entry {other:?}"),
        })
        .collect()
}

fn pad_mode(p: &Params) -> PadMode {
    match p.opt("mode").map_or("constant", Json::as_str) {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        m => panic!("unknown pad mode {m:?}"),
    }
}

fn conv_opts(p: &Params) -> ConvOpts {
    let mut o = ConvOpts::default().groups(p.opt("groups").map_or(1, |g| g.as_i64() as usize));
    if let Some(v) = p.spatial("stride") {
        o = o.stride(v);
    }
    if let Some(v) = p.spatial("padding") {
        o = o.padding(v);
    }
    if let Some(v) = p.spatial("dilation") {
        o = o.dilation(v);
    }
    if let Some(v) = p.spatial("output_padding") {
        o = o.output_padding(v);
    }
    o
}

fn pool_opts(p: &Params) -> PoolOpts {
    let mut o = PoolOpts::kernel(p.spatial("kernel").unwrap_or(vec![2]));
    if let Some(v) = p.spatial("stride") {
        o = o.stride(v);
    }
    if let Some(v) = p.spatial("padding") {
        o = o.padding(v);
    }
    if let Some(v) = p.spatial("dilation") {
        o = o.dilation(v);
    }
    o.ceil_mode(p.b("ceil_mode")).count_include_pad(p.opt("count_include_pad") != Some(&Json::Bool(false)))
}

fn dtype(p: &Params) -> DType {
    dtype_from_name(p.s("dtype"))
}

/// Every op key the lazygrad API covers.
pub fn table() -> HashMap<&'static str, OpFn> {
    let ops: Vec<(&'static str, OpFn)> = vec![
        // creation
        ("arange", op(|_, p| Tensor::arange_step(p.f("start"), p.f("stop"), p.f("step"), dtype(p)))),
        ("linspace", op(|_, p| Tensor::linspace(p.f("start"), p.f("stop"), p.u("steps")).cast(dtype(p)))),
        ("eye", op(|_, p| Tensor::eye(p.u("n")))),
        ("eye_nm", op(|_, p| Tensor::eye_rect(p.u("n"), p.u("m")))),
        ("full", op(|_, p| Tensor::full_dtype(&p.us("shape"), p.scalar("value"), dtype(p)))),
        ("zeros", op(|_, p| Tensor::zeros(&p.us("shape")))),
        ("ones", op(|_, p| Tensor::ones(&p.us("shape")))),
        ("zeros_like", op(|x, _| x[0].zeros_like())),
        ("ones_like", op(|x, _| x[0].ones_like())),
        ("full_like", op(|x, p| x[0].full_like(p.scalar("value")))),
        // unary math
        ("neg", op(|x, _| x[0].neg())),
        ("log", op(|x, _| x[0].log())),
        ("log2", op(|x, _| x[0].log2())),
        ("exp", op(|x, _| x[0].exp())),
        ("exp2", op(|x, _| x[0].exp2())),
        ("sqrt", op(|x, _| x[0].sqrt())),
        ("rsqrt", op(|x, _| x[0].rsqrt())),
        ("sin", op(|x, _| x[0].sin())),
        ("cos", op(|x, _| x[0].cos())),
        ("tan", op(|x, _| x[0].tan())),
        ("asin", op(|x, _| x[0].asin())),
        ("acos", op(|x, _| x[0].acos())),
        ("atan", op(|x, _| x[0].atan())),
        ("trunc", op(|x, _| x[0].trunc())),
        ("ceil", op(|x, _| x[0].ceil())),
        ("floor", op(|x, _| x[0].floor())),
        ("round", op(|x, _| x[0].round())),
        ("isinf", op(|x, _| x[0].isinf())),
        ("isnan", op(|x, _| x[0].isnan())),
        ("isfinite", op(|x, _| x[0].isfinite())),
        ("square", op(|x, _| x[0].square())),
        ("sign", op(|x, _| x[0].sign())),
        ("abs", op(|x, _| x[0].abs())),
        ("reciprocal", op(|x, _| x[0].reciprocal())),
        ("logical_not", op(|x, _| x[0].logical_not())),
        ("lerp", op(|x, p| if x.len() > 2 { x[0].lerp(&x[1], &x[2]) } else { x[0].lerp(&x[1], p.f("weight")) })),
        ("clamp", op(|x, p| x[0].clamp(p.opt("min").map(Json::as_f64), p.opt("max").map(Json::as_f64)))),
        // activations
        ("relu", op(|x, _| x[0].relu())),
        ("sigmoid", op(|x, _| x[0].sigmoid())),
        ("logsigmoid", op(|x, _| x[0].logsigmoid())),
        ("hardsigmoid", op(|x, _| x[0].hardsigmoid())),
        ("elu", op(|x, _| x[0].elu())),
        ("celu", op(|x, _| x[0].celu())),
        ("selu", op(|x, _| x[0].selu())),
        ("silu", op(|x, _| x[0].silu())),
        ("swish", op(|x, _| x[0].swish())),
        ("relu6", op(|x, _| x[0].relu6())),
        ("hardswish", op(|x, _| x[0].hardswish())),
        ("tanh", op(|x, _| x[0].tanh())),
        ("sinh", op(|x, _| x[0].sinh())),
        ("cosh", op(|x, _| x[0].cosh())),
        ("atanh", op(|x, _| x[0].atanh())),
        ("asinh", op(|x, _| x[0].asinh())),
        ("acosh", op(|x, _| x[0].acosh())),
        ("hardtanh", op(|x, _| x[0].hardtanh())),
        ("erf", op(|x, _| x[0].erf())),
        ("gelu", op(|x, _| x[0].gelu())),
        ("quick_gelu", op(|x, _| x[0].quick_gelu())),
        ("leaky_relu", op(|x, _| x[0].leaky_relu())),
        ("mish", op(|x, _| x[0].mish())),
        ("softplus", op(|x, _| x[0].softplus())),
        ("softsign", op(|x, _| x[0].softsign())),
        ("elu_alpha", op(|x, p| x[0].elu_with(p.f("alpha")))),
        ("celu_alpha", op(|x, p| x[0].celu_with(p.f("alpha")))),
        ("leaky_relu_slope", op(|x, p| x[0].leaky_relu_with(p.f("slope")))),
        ("softplus_beta", op(|x, p| x[0].softplus_with(p.f("beta")))),
        ("hardtanh_range", op(|x, p| x[0].hardtanh_with(p.f("min"), p.f("max")))),
        // binary
        ("add", op(|x, _| x[0].add(&x[1]))),
        ("sub", op(|x, _| x[0].sub(&x[1]))),
        ("mul", op(|x, _| x[0].mul(&x[1]))),
        ("div", op(|x, _| x[0].div(&x[1]))),
        ("maximum", op(|x, _| x[0].maximum(&x[1]))),
        ("minimum", op(|x, _| x[0].minimum(&x[1]))),
        ("copysign", op(|x, _| x[0].copysign(&x[1]))),
        ("logaddexp", op(|x, _| x[0].logaddexp(&x[1]))),
        ("pow", op(|x, _| x[0].pow(&x[1]))),
        ("mod", op(|x, _| x[0].mod_(&x[1]))),
        ("fmod", op(|x, _| x[0].fmod(&x[1]))),
        ("bitwise_and", op(|x, _| x[0].bitwise_and(&x[1]))),
        ("bitwise_or", op(|x, _| x[0].bitwise_or(&x[1]))),
        ("bitwise_xor", op(|x, _| x[0].bitwise_xor(&x[1]))),
        ("lt", op(|x, _| x[0].lt(&x[1]))),
        ("gt", op(|x, _| x[0].gt(&x[1]))),
        ("le", op(|x, _| x[0].le(&x[1]))),
        ("ge", op(|x, _| x[0].ge(&x[1]))),
        ("eq", op(|x, _| x[0].eq(&x[1]))),
        ("ne", op(|x, _| x[0].ne(&x[1]))),
        ("add_scalar", op(|x, p| x[0].add(p.scalar("value")))),
        ("mul_scalar", op(|x, p| x[0].mul(p.scalar("value")))),
        ("sub_rscalar", op(|x, p| p.f("value") - &x[0])),
        ("div_rscalar", op(|x, p| p.f("value") / &x[0])),
        ("pow_scalar", op(|x, p| x[0].pow(p.scalar("value")))),
        ("rpow_scalar", op(|x, p| x[0].full_like(p.f("value")).pow(&x[0]))),
        ("maximum_scalar", op(|x, p| x[0].maximum(p.scalar("value")))),
        ("lt_scalar", op(|x, p| x[0].lt(p.scalar("value")))),
        (
            "div_rounding",
            op(|x, p| {
                let mode = if p.s("mode") == "trunc" { RoundingMode::Trunc } else { RoundingMode::Floor };
                x[0].div_mode(&x[1], Some(mode))
            }),
        ),
        ("where", op(|x, _| x[0].where_(&x[1], &x[2]))),
        ("where_scalar", op(|x, p| x[0].where_(&x[1], p.scalar("value")))),
        ("bitwise_not", op(|x, _| x[0].bitwise_not())),
        ("lshift", op(|x, p| x[0].lshift(p.scalar("bits")))),
        ("rshift", op(|x, p| x[0].rshift(p.scalar("bits")))),
        // casting
        ("cast", op(|x, p| x[0].cast(dtype(p)))),
        ("bitcast", op(|x, p| x[0].bitcast(dtype(p)))),
        ("float", op(|x, _| x[0].float())),
        ("half", op(|x, _| x[0].half())),
        ("bfloat16", op(|x, _| x[0].bfloat16())),
        ("double", op(|x, _| x[0].double())),
        ("int", op(|x, _| x[0].int())),
        ("long", op(|x, _| x[0].long())),
        ("bool", op(|x, _| x[0].bool())),
        // movement
        ("reshape", op(|x, p| x[0].reshape(&p.is("shape")))),
        ("expand", op(|x, p| x[0].expand(&p.us("shape")))),
        ("permute", op(|x, p| x[0].permute(&p.is("order")))),
        ("flip", op(|x, p| x[0].flip(&p.is("axes")))),
        (
            "shrink",
            op(|x, p| {
                x[0].shrink(&p.pairs("bounds").iter().map(|&(s, e)| (s as usize, e as usize)).collect::<Vec<_>>())
            }),
        ),
        ("pad", op(|x, p| x[0].pad_with(&p.pairs("pads"), pad_mode(p), p.f_or("value", 0.0)))),
        ("index", op(|x, p| x[0].index(&index_spec(p, x)))),
        ("setitem", op(|x, p| x[0].set(&index_spec(p, x), &x[1]))),
        ("gather", op(|x, p| x[0].gather(p.i("dim"), &x[1]))),
        ("scatter", op(|x, p| x[0].scatter(p.i("dim"), &x[1], &x[2]))),
        ("cat", op(|x, p| Tensor::cat(&refs(x), p.i("dim")))),
        ("stack", op(|x, p| Tensor::stack(&refs(x), p.i("dim")))),
        ("repeat", op(|x, p| x[0].repeat(&p.us("repeats")))),
        (
            "repeat_interleave",
            op(|x, p| x[0].repeat_interleave(p.u("repeats"), p.opt("dim").map(|d| d.as_i64() as isize))),
        ),
        (
            "split",
            op(|x, p| match p.opt("sizes") {
                Some(Json::Arr(_)) => x[0].split(p.us("sizes"), p.i("dim")),
                _ => x[0].split(p.u("sizes"), p.i("dim")),
            }),
        ),
        ("chunk", op(|x, p| x[0].chunk(p.u("chunks"), p.i("dim")))),
        ("unfold", op(|x, p| x[0].unfold(p.i("dim"), p.u("size"), p.u("step")))),
        ("meshgrid", op(|x, p| Tensor::meshgrid(&refs(x), p.s("indexing")))),
        ("squeeze", op(|x, p| x[0].squeeze(p.opt("dim").map(|d| d.as_i64() as isize)))),
        ("unsqueeze", op(|x, p| x[0].unsqueeze(p.i("dim")))),
        ("transpose", op(|x, p| x[0].transpose(p.i("dim0"), p.i("dim1")))),
        ("flatten", op(|x, p| x[0].flatten(p.i("start"), p.i("end")))),
        ("unflatten", op(|x, p| x[0].unflatten(p.i("dim"), &p.is("sizes")))),
        ("diag", op(|x, _| x[0].diag())),
        ("diagonal", op(|x, p| x[0].diagonal(p.i("offset"), p.i("dim1"), p.i("dim2")))),
        ("roll", op(|x, p| x[0].roll(&p.is("shifts"), &p.is("dims")))),
        ("tril", op(|x, p| x[0].tril(p.i("diagonal")))),
        ("triu", op(|x, p| x[0].triu(p.i("diagonal")))),
        // reduce
        ("sum", op(|x, p| over_axes!(x[0], sum, p, p.b("keepdim")))),
        ("prod", op(|x, p| over_axes!(x[0], prod, p, p.b("keepdim")))),
        ("max", op(|x, p| over_axes!(x[0], max, p, p.b("keepdim")))),
        ("min", op(|x, p| over_axes!(x[0], min, p, p.b("keepdim")))),
        ("any", op(|x, p| over_axes!(x[0], any, p, p.b("keepdim")))),
        ("all", op(|x, p| over_axes!(x[0], all, p, p.b("keepdim")))),
        ("mean", op(|x, p| over_axes!(x[0], mean, p, p.b("keepdim")))),
        ("var", op(|x, p| over_axes!(x[0], var, p, p.b("keepdim"), correction(p)))),
        ("std", op(|x, p| over_axes!(x[0], std, p, p.b("keepdim"), correction(p)))),
        ("var_mean", op(|x, p| over_axes!(x[0], var_mean, p, p.b("keepdim"), correction(p)))),
        ("std_mean", op(|x, p| over_axes!(x[0], std_mean, p, p.b("keepdim"), correction(p)))),
        ("softmax", op(|x, p| x[0].softmax(p.i("axis")))),
        ("log_softmax", op(|x, p| x[0].log_softmax(p.i("axis")))),
        ("logsumexp", op(|x, p| over_axes!(x[0], logsumexp, p, p.b("keepdim")))),
        ("logcumsumexp", op(|x, p| x[0].logcumsumexp(p.i("axis")))),
        ("argmax", op(|x, p| x[0].argmax(p.opt("axis").map(|a| a.as_i64() as isize), p.b("keepdim")))),
        ("argmin", op(|x, p| x[0].argmin(p.opt("axis").map(|a| a.as_i64() as isize), p.b("keepdim")))),
        ("cumsum", op(|x, p| x[0].cumsum(p.i("axis")))),
        ("cumprod", op(|x, p| x[0].cumprod(p.i("axis")))),
        ("cummax", op(|x, p| x[0].cummax(p.i("axis")))),
        ("isclose", op(|x, p| x[0].isclose(&x[1], p.f("rtol"), p.f("atol"), p.b("equal_nan")))),
        ("allclose", op(|x, p| Tensor::new(x[0].allclose(&x[1], p.f("rtol"), p.f("atol"), p.b("equal_nan"))))),
        // processing
        ("matmul", op(|x, _| x[0].matmul(&x[1]))),
        ("dot", op(|x, _| x[0].dot(&x[1]))),
        ("einsum", op(|x, p| Tensor::einsum(p.s("formula"), &refs(x)))),
        ("conv2d", op(|x, p| x[0].conv2d(&x[1], x.get(2), &conv_opts(p)))),
        ("conv_transpose2d", op(|x, p| x[0].conv_transpose2d(&x[1], x.get(2), &conv_opts(p)))),
        ("avg_pool2d", op(|x, p| x[0].avg_pool2d(&pool_opts(p)))),
        ("max_pool2d", op(|x, p| x[0].max_pool2d(&pool_opts(p)))),
        (
            "interpolate",
            op(|x, p| {
                x[0].interpolate(&p.us("size"), p.opt("mode").map_or("linear", Json::as_str), p.b("align_corners"))
            }),
        ),
        ("sort", op(|x, p| x[0].sort(p.i("dim"), p.b("descending")))),
        ("argsort", op(|x, p| x[0].argsort(p.i("dim"), p.b("descending")))),
        ("topk", op(|x, p| x[0].topk(p.u("k"), p.i("dim"), p.b("largest")))),
        ("masked_fill", op(|x, p| x[0].masked_fill(&x[1], p.scalar("value")))),
        ("masked_select", op(|x, _| x[0].masked_select(&x[1]))),
        ("one_hot", op(|x, p| x[0].one_hot(p.u("num_classes")))),
        // functional
        ("linear", op(|x, _| x[0].linear(&x[1], x.get(2)))),
        ("layernorm", op(|x, p| x[0].layernorm(p.axis().unwrap_or(vec![-1]).as_slice(), p.f_or("eps", 1e-5)))),
        ("batchnorm", op(|x, _| x[0].batchnorm(Some(&x[1]), Some(&x[2]), &x[3], &x[4]))),
        (
            "scaled_dot_product_attention",
            op(|x, p| x[0].scaled_dot_product_attention(&x[1], &x[2], x.get(3), p.b("is_causal"))),
        ),
        ("binary_crossentropy", op(|x, p| x[0].binary_crossentropy(&x[1], reduction(p)))),
        ("binary_crossentropy_logits", op(|x, p| x[0].binary_crossentropy_logits(&x[1], reduction(p), None))),
        (
            "sparse_categorical_crossentropy",
            op(|x, p| {
                let ignore = p.opt("ignore_index").map_or(-1, Json::as_i64);
                x[0].sparse_categorical_crossentropy(&x[1], ignore, p.f_or("label_smoothing", 0.0), reduction(p))
            }),
        ),
        ("cross_entropy", op(|x, p| x[0].cross_entropy(&x[1], reduction(p), p.f_or("label_smoothing", 0.0)))),
        ("nll_loss", op(|x, p| x[0].nll_loss(&x[1], x.get(2), p.opt("ignore_index").map(Json::as_i64), reduction(p)))),
        // nn layers: torch's module tensors (the inputs after the call's arguments) loaded into the layer
        (
            "nn.Linear",
            op(|x, p| {
                let mut l = Linear::new(p.u("in"), p.u("out"), x.len() > 2);
                load(&mut l.weight, &x[1]);
                load_opt(&mut l.bias, x.get(2));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.Conv2d",
            op(|x, p| {
                let mut l = Conv2d::new(p.u("in"), p.u("out"), p.u("kernel"), conv_opts(p), x.len() > 2);
                load(&mut l.weight, &x[1]);
                load_opt(&mut l.bias, x.get(2));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.ConvTranspose2d",
            op(|x, p| {
                let mut l = ConvTranspose2d::new(p.u("in"), p.u("out"), p.u("kernel"), conv_opts(p), x.len() > 2);
                load(&mut l.weight, &x[1]);
                load_opt(&mut l.bias, x.get(2));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.LayerNorm",
            op(|x, p| {
                let mut l = LayerNorm::new(&p.us("shape"), p.f("eps"), x.len() > 1);
                load_opt(&mut l.weight, x.get(1));
                load_opt(&mut l.bias, x.get(2));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.RMSNorm",
            op(|x, p| {
                let mut l = RMSNorm::new(x[0].shape()[x[0].ndim() - 1], p.f("eps"), x.len() > 1);
                load_opt(&mut l.weight, x.get(1));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.GroupNorm",
            op(|x, p| {
                let mut l = GroupNorm::new(p.u("groups"), x[0].shape()[1], p.f("eps"), x.len() > 1);
                load_opt(&mut l.weight, x.get(1));
                load_opt(&mut l.bias, x.get(2));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.InstanceNorm",
            op(|x, p| {
                let mut l = GroupNorm::instance(x[0].shape()[1], p.f("eps"), x.len() > 1);
                load_opt(&mut l.weight, x.get(1));
                load_opt(&mut l.bias, x.get(2));
                l.forward(&x[0])
            }),
        ),
        (
            "nn.Embedding",
            op(|x, _| {
                let mut l = Embedding::new(x[1].shape()[0], x[1].shape()[1]);
                load(&mut l.weight, &x[1]);
                l.forward(&x[0])
            }),
        ),
        ("nn.LSTMCell", op(lstm_cell)),
        ("nn.BatchNorm", op(batchnorm_steps)),
    ];
    let n = ops.len();
    let map: HashMap<_, _> = ops.into_iter().collect();
    assert_eq!(map.len(), n, "an op key is mapped twice");
    map
}

fn correction(p: &Params) -> usize {
    p.opt("correction").map_or(1, |c| c.as_i64() as usize)
}

/// `t` as the layer parameter in `slot`: torch's tensor must have the shape lazygrad's layer gave
/// it (the layer stores its parameters in torch's layout).
fn load(slot: &mut Tensor, t: &Tensor) {
    assert_eq!(slot.shape(), t.shape(), "the layer's parameter layout differs from torch's");
    *slot = t.clone();
}

/// `load` for an optional parameter, which the layer must have exactly when torch's module does.
fn load_opt(slot: &mut Option<Tensor>, t: Option<&Tensor>) {
    match (slot, t) {
        (Some(s), Some(t)) => load(s, t),
        (None, None) => {}
        (s, t) => panic!("the layer has the parameter: {}, torch's module: {}", s.is_some(), t.is_some()),
    }
}

/// `LSTMCell` on `x` and, with `state`, `(h, c)`; then its weights and biases. Outputs `(h, c)`.
fn lstm_cell(x: &[Tensor], p: &Params) -> (Tensor, Tensor) {
    let n = if p.b("state") { 3 } else { 1 };
    let mut l = LSTMCell::new(p.u("in"), p.u("hidden"), x.len() - n == 4);
    load(&mut l.weight_ih, &x[n]);
    load(&mut l.weight_hh, &x[n + 1]);
    load_opt(&mut l.bias_ih, x.get(n + 2));
    load_opt(&mut l.bias_hh, x.get(n + 3));
    l.forward(&x[0], p.b("state").then(|| (&x[1], &x[2])))
}

/// `BatchNorm`: a training step on each of the first `batches` inputs (statistics realized after
/// each, as an optimizer step does), then eval mode on the last input. Outputs the last training
/// output, the running mean and variance, the batches tracked and the eval output.
fn batchnorm_steps(x: &[Tensor], p: &Params) -> Vec<Tensor> {
    let (batches, rest) = x.split_at(p.u("batches"));
    let mut bn = BatchNorm::new(rest[0].shape()[0], p.f("eps"), true, true, p.f("momentum"));
    load_opt(&mut bn.weight, Some(&rest[0]));
    load_opt(&mut bn.bias, Some(&rest[1]));
    let stats = |bn: &BatchNorm| {
        let running = |t: &Option<Tensor>| t.clone().expect("running statistics");
        vec![running(&bn.running_mean), running(&bn.running_var), bn.num_batches_tracked.clone()]
    };
    let training = Context::new(&[("TRAINING", 1)]);
    let mut outs = vec![];
    for b in batches {
        outs = vec![bn.forward(b)];
        Tensor::realize_all(&stats(&bn)).expect("realizing the running statistics");
    }
    drop(training);
    outs.extend(stats(&bn));
    outs.push(bn.forward(&rest[2]));
    outs
}
