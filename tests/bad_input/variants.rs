//! The fallible core: each `try_` form reports the caller's mistake as the structured variant
//! that says what is wrong (its op, the shapes, the axis, the dtypes), and its panicking form
//! panics with that error's message, so a caller can match on the kind instead of on text.

use lazygrad::tensor::{ConvOpts, Idx, PadMode, PoolOpts, Reduction, Scalar};
use lazygrad::{s, DType, Error, Tensor, Variable};

use crate::{interp, panic_message};

/// The variant's name and the op it names.
fn kind(e: &Error) -> (&'static str, &'static str) {
    match e {
        Error::Shape { op, .. } => ("Shape", op),
        Error::Axis { op, .. } => ("Axis", op),
        Error::Index { op, .. } => ("Index", op),
        Error::DTypes { op, .. } => ("DTypes", op),
        Error::Unrepresentable { op, .. } => ("Unrepresentable", op),
        Error::Devices { op, .. } => ("Devices", op),
        Error::Value { op, .. } => ("Value", op),
        Error::Size { op, .. } => ("Size", op),
        other => panic!("not a precondition's error: {other:?}"),
    }
}

/// `try_form()` fails with the `variant` naming `op`, and `panicking()` panics with its message.
#[track_caller]
fn refuses<T: std::fmt::Debug, R>(
    variant: &str,
    op: &str,
    try_form: impl FnOnce() -> lazygrad::Result<T>,
    panicking: impl FnOnce() -> R,
) {
    let e = try_form().expect_err("the try_ form returned Ok");
    assert_eq!(kind(&e), (variant, op), "{e}");
    assert_eq!(panic_message(panicking), e.to_string());
}

fn m23() -> Tensor {
    Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])
}

#[test]
fn movement_ops_report_shapes_and_axes() {
    let _d = interp();
    let t = m23();
    refuses("Shape", "reshape", || t.try_reshape(&[4, 2]), || t.reshape(&[4, 2]));
    refuses("Shape", "expand", || t.try_expand(&[4, 3]), || t.expand(&[4, 3]));
    refuses("Shape", "permute", || t.try_permute(&[0, 0]), || t.permute(&[0, 0]));
    refuses("Axis", "permute", || t.try_permute(&[2, 0]), || t.permute(&[2, 0]));
    refuses("Shape", "pad", || t.try_pad(&[(1, 1)]), || t.pad(&[(1, 1)]));
    refuses("Shape", "shrink", || t.try_shrink(&[(0, 3), (0, 3)]), || t.shrink(&[(0, 3), (0, 3)]));
    refuses("Shape", "flip", || t.try_flip(&[0, -2]), || t.flip(&[0, -2]));
    refuses("Axis", "transpose", || t.try_transpose(-3, 0), || t.transpose(-3, 0));
    refuses("Shape", "flatten", || t.try_flatten(1, 0), || t.flatten(1, 0));
    refuses("Axis", "squeeze", || t.try_squeeze(Some(2)), || t.squeeze(Some(2)));
    refuses("Axis", "unsqueeze", || t.try_unsqueeze(3), || t.unsqueeze(3));
    refuses("Shape", "unflatten", || t.try_unflatten(1, &[2, 2]), || t.unflatten(1, &[2, 2]));
    refuses("Shape", "repeat", || t.try_repeat(&[2]), || t.repeat(&[2]));
    refuses("Axis", "repeat_interleave", || t.try_repeat_interleave(2, Some(5)), || t.repeat_interleave(2, Some(5)));
    refuses("Shape", "split", || t.try_split([1, 1], 1), || t.split([1, 1], 1));
    refuses("Value", "chunk", || t.try_chunk(0, 0), || t.chunk(0, 0));
    // pieces of an empty axis, as many as asked: a count past memory aborted the process
    let empty = Tensor::zeros(&[0, 3]);
    refuses("Value", "chunk", || empty.try_chunk(1 << 60, 0), || empty.chunk(1 << 60, 0));
    assert_eq!(empty.chunk(3, 0).len(), 3);
    let other = Tensor::zeros(&[3, 2]);
    refuses("Shape", "cat", || Tensor::try_cat(&[&t, &other], 0), || Tensor::cat(&[&t, &other], 0));
    refuses("Shape", "stack", || Tensor::try_stack(&[&t, &other], 0), || Tensor::stack(&[&t, &other], 0));
    refuses("Value", "meshgrid", || Tensor::try_meshgrid(&[&t], "yx"), || Tensor::meshgrid(&[&t], "yx"));
    refuses("Axis", "roll", || t.try_roll(&[1], &[2]), || t.roll(&[1], &[2]));
    refuses("Shape", "unfold", || t.try_unfold(1, 5, 1), || t.unfold(1, 5, 1));
    refuses("Shape", "diag", || t.try_diag(), || t.diag());
    refuses("Shape", "diagonal", || t.try_diagonal(0, 0, -2), || t.diagonal(0, 0, -2));
    refuses("Shape", "pad_to", || t.try_pad_to(&[Some(1), None], 0), || t.pad_to(&[Some(1), None], 0));
    refuses("Shape", "shrink_to", || t.try_shrink_to(&[Some(1)]), || t.shrink_to(&[Some(1)]));
    let reflect = [(0, 0), (0, 3)];
    refuses(
        "Shape",
        "pad_with",
        || t.try_pad_with(&reflect, PadMode::Reflect, 0),
        || t.pad_with(&reflect, PadMode::Reflect, 0),
    );
    refuses("Shape", "broadcast_to", || t.try_broadcast_to(&[3]), || t.broadcast_to(&[3]));
}

#[test]
fn elementwise_ops_report_shapes_dtypes_and_devices() {
    let _d = interp();
    let (a, b) = (m23(), Tensor::zeros(&[4]));
    refuses("Shape", "add", || a.try_add(&b), || a.add(&b));
    refuses("Shape", "sub", || a.try_sub(&b), || a.sub(&b));
    refuses("Shape", "mul", || a.try_mul(&b), || a.mul(&b));
    refuses("Shape", "div", || a.try_div(&b), || a.div(&b));
    refuses("Shape", "pow", || a.try_pow(&b), || a.pow(&b));
    refuses("Shape", "maximum", || a.try_maximum(&b), || a.maximum(&b));
    refuses("Shape", "minimum", || a.try_minimum(&b), || a.minimum(&b));
    refuses("Shape", "lt", || a.try_lt(&b), || a.lt(&b));
    refuses("Shape", "gt", || a.try_gt(&b), || a.gt(&b));
    refuses("Shape", "eq", || a.try_eq(&b), || a.eq(&b));
    refuses("Shape", "where", || a.try_where(&b, 0.0), || a.where_(&b, 0.0));
    refuses("Shape", "lerp", || a.try_lerp(&b, 0.5), || a.lerp(&b, 0.5));
    refuses("DTypes", "bitwise_and", || a.try_bitwise_and(&a), || a.bitwise_and(&a));
    refuses("DTypes", "lshift", || a.try_lshift(1), || a.lshift(1));
    refuses("DTypes", "bitwise_not", || a.try_bitwise_not(), || a.bitwise_not());
    refuses("DTypes", "bitcast", || a.try_bitcast(DType::INT16), || a.bitcast(DType::INT16));
    refuses("DTypes", "cast", || a.try_cast(DType::VOID), || a.cast(DType::VOID));
    refuses("Value", "pow", || a.int().try_pow(-1), || a.int().pow(-1));
    refuses("Value", "clamp", || a.try_clamp::<f32>(None, None), || a.clamp::<f32>(None, None));
    let cpu = Tensor::zeros(&[2, 3]).to("CPU");
    let Err(Error::Devices { op: "add", devices }) = a.try_add(&cpu) else { panic!("operands on two devices") };
    assert_eq!(devices, ["INTERP", "CPU"]);
    refuses("Devices", "add", || a.try_add(&cpu), || a.add(&cpu));
    refuses("Devices", "matmul", || a.try_matmul(&cpu.T()), || a.matmul(&cpu.T()));
    refuses("Devices", "cat", || Tensor::try_cat(&[&a, &cpu], 0), || Tensor::cat(&[&a, &cpu], 0));
    refuses("Devices", "assign", || a.try_assign(&cpu), || a.assign(&cpu));
}

#[test]
fn broadcast_errors_carry_both_shapes() {
    let _d = interp();
    let Err(Error::Shape { op: "mul", shapes, .. }) = m23().try_mul(Tensor::zeros(&[4])) else {
        panic!("no Shape error")
    };
    assert_eq!(shapes, [vec![2, 3], vec![4]]);
    let Err(Error::Axis { op: "sum", axis: -3, shape }) = m23().try_sum(-3, false) else { panic!("no Axis error") };
    assert_eq!(shape, [2, 3]);
}

#[test]
fn reductions_report_axes() {
    let _d = interp();
    let t = m23();
    refuses("Axis", "sum", || t.try_sum(2, false), || t.sum(2, false));
    refuses("Axis", "max", || t.try_max(2, false), || t.max(2, false));
    refuses("Axis", "min", || t.try_min([0, 5], false), || t.min([0, 5], false));
    refuses("Axis", "mean", || t.try_mean(2, false), || t.mean(2, false));
    refuses("Axis", "prod", || t.try_prod(2, false), || t.prod(2, false));
    refuses("Axis", "any", || t.try_any(2, false), || t.any(2, false));
    refuses("Axis", "all", || t.try_all(2, false), || t.all(2, false));
    refuses("Axis", "var", || t.try_var(2, false, 1), || t.var(2, false, 1));
    refuses("Axis", "std", || t.try_std(2, false, 1), || t.std(2, false, 1));
    refuses("Axis", "var_mean", || t.try_var_mean(2, false, 1), || t.var_mean(2, false, 1));
    refuses("Axis", "std_mean", || t.try_std_mean(2, false, 1), || t.std_mean(2, false, 1));
    refuses("Axis", "softmax", || t.try_softmax(2), || t.softmax(2));
    refuses("Axis", "log_softmax", || t.try_log_softmax(2), || t.log_softmax(2));
    refuses("Axis", "logsumexp", || t.try_logsumexp(2, false), || t.logsumexp(2, false));
    refuses("Axis", "normalize", || t.try_normalize(2.0, 2, 1e-12), || t.normalize(2.0, 2, 1e-12));
    refuses("Axis", "argmax", || t.try_argmax(Some(2), false), || t.argmax(Some(2), false));
    refuses("Axis", "argmin", || t.try_argmin(Some(-3), false), || t.argmin(Some(-3), false));
    let empty = Tensor::zeros(&[2, 0]);
    refuses("Shape", "argmax", || empty.try_argmax(Some(1), false), || empty.argmax(Some(1), false));
    refuses("Axis", "cumsum", || t.try_cumsum(2), || t.cumsum(2));
    refuses("Axis", "cumprod", || t.try_cumprod(2), || t.cumprod(2));
    refuses("Axis", "cummax", || t.try_cummax(2), || t.cummax(2));
    refuses("Axis", "cummin", || t.try_cummin(2), || t.cummin(2));
    refuses("Axis", "logcumsumexp", || t.try_logcumsumexp(2), || t.logcumsumexp(2));
    refuses("Axis", "sort", || t.try_sort(2, false), || t.sort(2, false));
    refuses("Shape", "topk", || t.try_topk(4, 1, true), || t.topk(4, 1, true));
    let other = Tensor::zeros(&[4]);
    refuses("Shape", "isclose", || t.try_isclose(&other, 1e-5, 1e-8, false), || t.isclose(&other, 1e-5, 1e-8, false));
}

#[test]
fn indexing_reports_indices_as_index_errors() {
    let _d = interp();
    let t = m23();
    refuses("Index", "index", || t.try_index(&s![2]), || t.index(&s![2]));
    refuses("Index", "index", || t.try_index(&s![0, 0, 0]), || t.index(&s![0, 0, 0]));
    refuses(
        "Index",
        "index",
        || t.try_index(&[Idx::Ellipsis, Idx::Ellipsis]),
        || t.index(&[Idx::Ellipsis, Idx::Ellipsis]),
    );
    refuses("Index", "index", || t.try_index(&s![Tensor::new([5])]), || t.index(&s![Tensor::new([5])]));
    // a zero step is no index out of range but a bad value (tinygrad's ValueError)
    refuses("Value", "index", || t.try_index(&s![..;0]), || t.index(&s![..;0]));
    refuses("Shape", "set", || t.try_set(&s![.., 0], Tensor::zeros(&[4])), || t.set(&s![.., 0], Tensor::zeros(&[4])));
    let idx = Tensor::new([[0i32], [7]]);
    refuses("Index", "gather", || t.try_gather(1, &idx), || t.gather(1, &idx));
    refuses("DTypes", "gather", || t.try_gather(1, &t), || t.gather(1, &t));
    refuses("Axis", "gather", || t.try_gather(2, &idx), || t.gather(2, &idx));
    refuses("Index", "scatter", || t.try_scatter(1, &idx, &t), || t.scatter(1, &idx, &t));
    refuses("Index", "scatter", || t.try_scatter_value(1, &idx, 1.0), || t.scatter_value(1, &idx, 1.0));
    let ok = Tensor::new([[0i32], [1]]);
    refuses(
        "DTypes",
        "scatter_reduce",
        || t.try_scatter_reduce(1, &ok, &t.int(), lazygrad::tensor::ScatterReduce::Sum, true),
        || t.scatter_reduce(1, &ok, &t.int(), lazygrad::tensor::ScatterReduce::Sum, true),
    );
    let classes = Tensor::new([0i32, 3]);
    refuses("Index", "one_hot", || classes.try_one_hot(3), || classes.one_hot(3));
    refuses("DTypes", "one_hot", || t.try_one_hot(3), || t.one_hot(3));
    let mask = Tensor::new([true, false]);
    refuses("Shape", "masked_fill", || t.try_masked_fill(&mask, 0.0), || t.masked_fill(&mask, 0.0));
    refuses("Shape", "broadcast_to", || t.try_masked_select(&mask), || t.masked_select(&mask));
    let row = Tensor::new([1.0f32]);
    refuses("Shape", "triu", || row.try_triu(0), || row.triu(0));
    refuses("Shape", "tril", || row.try_tril(0), || row.tril(0));
}

#[test]
fn products_convolutions_and_pools_report_shapes_and_options() {
    let _d = interp();
    let a = m23();
    refuses("Shape", "matmul", || a.try_matmul(&a), || a.matmul(&a));
    refuses("Shape", "matmul", || a.try_dot(&Tensor::new(1.0f32)), || a.dot(&Tensor::new(1.0f32)));
    refuses(
        "Shape",
        "einsum",
        || Tensor::try_einsum("ij,jk->ik", &[&a, &a]),
        || Tensor::einsum("ij,jk->ik", &[&a, &a]),
    );
    refuses("Shape", "linear", || a.try_linear(&a, None), || a.linear(&a, None));
    let (x, w) = (Tensor::zeros(&[1, 3, 5, 5]), Tensor::zeros(&[4, 2, 3, 3]));
    refuses(
        "Shape",
        "conv2d",
        || x.try_conv2d(&w, None, &ConvOpts::default()),
        || x.conv2d(&w, None, &ConvOpts::default()),
    );
    let opts = ConvOpts::default().stride([1, 1, 1]);
    let w3 = Tensor::zeros(&[4, 3, 3, 3]);
    refuses("Value", "conv2d", || x.try_conv2d(&w3, None, &opts), || x.conv2d(&w3, None, &opts));
    let wt = Tensor::zeros(&[4, 2, 3, 3]);
    let t_opts = ConvOpts::default();
    refuses(
        "Shape",
        "conv_transpose2d",
        || x.try_conv_transpose2d(&wt, None, &t_opts),
        || x.conv_transpose2d(&wt, None, &t_opts),
    );
    let big = PoolOpts::kernel(7);
    refuses("Shape", "max_pool2d", || x.try_max_pool2d(&big), || x.max_pool2d(&big));
    refuses("Shape", "avg_pool2d", || x.try_avg_pool2d(&big), || x.avg_pool2d(&big));
    refuses("Shape", "max_pool2d", || x.try_max_pool2d_with_indices(&big), || x.max_pool2d_with_indices(&big));
    let zero = PoolOpts::kernel(2).stride(0);
    refuses("Value", "avg_pool2d", || x.try_avg_pool2d(&zero), || x.avg_pool2d(&zero));
    let idx = Tensor::zeros(&[1, 3, 2, 2]).int();
    refuses(
        "Shape",
        "max_unpool2d",
        || x.try_max_unpool2d(&idx, &PoolOpts::default(), None),
        || x.max_unpool2d(&idx, &PoolOpts::default(), None),
    );
    refuses(
        "Shape",
        "interpolate",
        || a.try_interpolate(&[2, 3, 4], "linear", false),
        || a.interpolate(&[2, 3, 4], "linear", false),
    );
    refuses("Value", "interpolate", || a.try_interpolate(&[4], "cubic", false), || a.interpolate(&[4], "cubic", false));
}

#[test]
fn losses_creation_and_random_draws_report_their_arguments() {
    let _d = interp();
    let logits = Tensor::zeros(&[4, 10]);
    let labels = Tensor::new([1i32, 2, 3, 12]);
    refuses(
        "Index",
        "cross_entropy",
        || logits.try_cross_entropy(&labels, Reduction::Mean, 0.0),
        || logits.cross_entropy(&labels, Reduction::Mean, 0.0),
    );
    refuses(
        "Value",
        "cross_entropy",
        || logits.try_cross_entropy(&labels, Reduction::Mean, 2.0),
        || logits.cross_entropy(&labels, Reduction::Mean, 2.0),
    );
    let scce = |y: &Tensor| logits.try_sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
    let short = Tensor::new([1i32, 2]);
    refuses(
        "Shape",
        "sparse_categorical_crossentropy",
        || scce(&short),
        || logits.sparse_categorical_crossentropy(&short, -1, 0.0, Reduction::Mean),
    );
    refuses(
        "DTypes",
        "nll_loss",
        || logits.try_nll_loss(&labels.float(), None, None, Reduction::Mean),
        || logits.nll_loss(&labels.float(), None, None, Reduction::Mean),
    );
    let p = Tensor::zeros(&[4]);
    let y = Tensor::zeros(&[3]);
    refuses(
        "Shape",
        "binary_crossentropy",
        || p.try_binary_crossentropy(&y, Reduction::Mean),
        || p.binary_crossentropy(&y, Reduction::Mean),
    );
    refuses(
        "Shape",
        "Tensor::from_slice",
        || Tensor::try_from_slice(&[1.0f32; 3], &[2, 2]),
        || Tensor::from_slice(&[1.0f32; 3], &[2, 2]),
    );
    refuses(
        "Value",
        "Tensor::new",
        || Tensor::try_new(vec![vec![1.0f32, 2.0], vec![3.0]]),
        || Tensor::new(vec![vec![1.0f32, 2.0], vec![3.0]]),
    );
    refuses(
        "Shape",
        "Tensor::empty",
        || Tensor::try_empty(&[usize::MAX, 2], DType::FLOAT32),
        || Tensor::empty(&[usize::MAX, 2], DType::FLOAT32),
    );
    refuses(
        "DTypes",
        "Tensor::full",
        || Tensor::try_full_dtype(&[2], 1.0, DType::VOID),
        || Tensor::full_dtype(&[2], 1.0, DType::VOID),
    );
    refuses(
        "Value",
        "arange",
        || Tensor::try_arange_step(0.0, 4.0, 0.0, DType::FLOAT32),
        || Tensor::arange_step(0.0, 4.0, 0.0, DType::FLOAT32),
    );
    let (lo, hi, one) = (Scalar::Int(0), Scalar::Int(300), Scalar::Int(1));
    refuses(
        "Unrepresentable",
        "arange",
        || Tensor::try_arange_of(lo, hi, one, Some(DType::INT8)),
        || Tensor::arange_of(lo, hi, one, Some(DType::INT8)),
    );
    let e = Tensor::from_scalars(&[Scalar::Float(f64::NAN)], &[1], Some(DType::UINT8), "INTERP").unwrap_err();
    assert_eq!(kind(&e), ("Unrepresentable", "Tensor"));
    refuses("Value", "randint", || Tensor::try_randint(&[2], 3, 3), || Tensor::randint(&[2], 3, 3));
    refuses(
        "Unrepresentable",
        "randint",
        || Tensor::try_randint(&[2], 0, 1 << 32),
        || Tensor::randint(&[2], 0, 1 << 32),
    );
    let w = Tensor::zeros(&[2, 0]);
    refuses("Shape", "multinomial", || w.try_multinomial(1, true), || w.multinomial(1, true));
    refuses("Value", "dropout", || p.try_dropout(1.5), || p.dropout(1.5));
    refuses("Shape", "item", || m23().try_item::<f32>(), || m23().item::<f32>());
    refuses("DTypes", "to_vec", || m23().try_to_vec::<i32>(), || m23().to_vec::<i32>());
    refuses("Shape", "replace", || m23().try_replace(&p), || m23().replace(&p));
    // variables: a name that is no identifier, an empty range, a value outside it (the last was a
    // panic below the tensor layer, which Python raised as an internal error)
    refuses("Value", "Variable::new", || Variable::try_new("1i", 1, 8), || Variable::new("1i", 1, 8));
    refuses("Value", "Variable::new", || Variable::try_new("i", 8, 1), || Variable::new("i", 8, 1));
    let i = Variable::new("i", 1, 8);
    refuses("Value", "bind", || i.try_bind(0), || i.bind(0));
    refuses("Value", "bind", || i.try_bind(9), || i.bind(9));
}
