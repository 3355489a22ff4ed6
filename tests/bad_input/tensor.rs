//! The Tensor API: creation, movement, indexing, reductions, elementwise ops, matmul and einsum,
//! convolutions and pools, sorting and selection, random draws, losses, data access, autograd.

use lazygrad::tensor::{ConvOpts, Idx, PadMode, PoolOpts, Reduction};
use lazygrad::{s, DType, Error, Tensor};

use crate::{err_with, interp, panics_with};

/// `[[1, 2, 3], [4, 5, 6]]` as float32.
fn m23() -> Tensor {
    Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])
}

fn ints(v: &[i32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape)
}

#[test]
fn creation_checks_data_lengths_and_shapes() {
    let _d = interp();
    panics_with(&["Tensor::from_slice", "3 elements", "[2, 2]"], || Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]));
    panics_with(&["Tensor::from_vec", "5 elements", "[2, 2]"], || Tensor::from_vec(vec![0i32; 5], &[2, 2]));
    panics_with(&["Tensor::new", "ragged"], || Tensor::new(vec![vec![1.0f32, 2.0], vec![3.0]]));
    panics_with(&["Tensor::from_bytes", "7 bytes", "[2, 2]", "float"], || {
        Tensor::from_bytes(&[0; 7], &[2, 2], DType::FLOAT32, "INTERP")
    });
    panics_with(&["device error", "unknown device", "NOPE"], || {
        Tensor::from_bytes(&[0; 4], &[1], DType::FLOAT32, "NOPE")
    });
    // sizes whose bytes overflow usize used to wrap (release builds) into a buffer too small
    let huge = [usize::MAX, 2];
    panics_with(&["Tensor::empty", "[18446744073709551615, 2]", "overflow usize bytes"], || {
        Tensor::empty(&huge, DType::FLOAT32)
    });
    panics_with(&["Tensor::empty", "[4611686018427387904]", "float"], || Tensor::empty(&[1 << 62], DType::FLOAT32));
    panics_with(&["Tensor::full", "[18446744073709551615, 2]"], || Tensor::full(&huge, 1.0f32));
    panics_with(&["Tensor::full", "[18446744073709551615, 2]"], || Tensor::zeros(&huge));
    let one = Tensor::ones(&[1, 1]);
    panics_with(&["expand", "[4611686018427387904, 4]", "overflow usize bytes"], || one.expand(&[1 << 62, 4]));
    panics_with(&["pad", "overflow", "[1, 1]"], || one.pad(&[(usize::MAX, 0), (0, 0)]));
    panics_with(&["pad", "[4611686018427387905, 1]", "overflow usize bytes"], || one.pad(&[(1 << 62, 0), (0, 0)]));
    // a size that fits usize but no memory: the allocation fails with an error, not a crash
    let e = err_with(
        &["cannot allocate 1125899906842624 bytes"],
        Tensor::empty(&[1 << 50], DType::UINT8).try_to_vec::<u8>(),
    );
    assert!(matches!(e, Error::Device(_) | Error::Io(_)), "{e:?}");
    // dtypes that exist only inside kernels
    panics_with(&["Tensor::from_bytes", "void", "not a tensor dtype"], || {
        Tensor::from_bytes(&[], &[2], DType::VOID, "INTERP")
    });
    panics_with(&["Tensor::empty", "index", "not a tensor dtype"], || Tensor::empty(&[2], DType::INDEX));
    panics_with(&["Tensor::full", "float.vec(4)"], || Tensor::full_dtype(&[2], 1.0, DType::FLOAT32.vec(4)));
    panics_with(&["arange", "index"], || Tensor::arange_step(0.0, 4.0, 1.0, DType::INDEX));
    panics_with(&["arange", "step 0"], || Tensor::arange_step(0.0, 4.0, 0.0, DType::FLOAT32));
    panics_with(&["arange", "stop inf"], || Tensor::arange_step(0.0, f64::INFINITY, 1.0, DType::FLOAT32));
    panics_with(&["arange", "stop NaN"], || Tensor::arange_step(0.0, f64::NAN, 1.0, DType::FLOAT32));
    panics_with(&["arange", "to 1000000000000000000000000000000 by 1", "exceed int32"], || {
        Tensor::arange_step(0.0, 1e30, 1.0, DType::FLOAT32)
    });
}

#[test]
fn reshape_and_its_relatives_check_sizes_and_axes() {
    let _d = interp();
    let t = m23();
    panics_with(&["reshape", "[2, 3]", "[4, 2]"], || t.reshape(&[4, 2]));
    panics_with(&["reshape", "only one -1"], || t.reshape(&[-1, -1]));
    panics_with(&["reshape", "[-2, 3]"], || t.reshape(&[-2, 3]));
    panics_with(&["reshape", "cannot infer", "[-1, 4]"], || t.reshape(&[-1, 4]));
    err_with(&["reshape", "[2, 3]", "[3, 3]"], t.try_reshape(&[3, 3]));
    let big = 1usize << 40;
    err_with(&["reshape", "more elements than usize holds"], t.try_reshape(&[big, big, 0]));
    assert_eq!(t.try_reshape(&[-1]).unwrap().shape(), [6], "-1 is inferred, as in tinygrad");
    // an underflowed `0 - 1` as usize wrapped to -1, and reshape inferred it
    err_with(&["reshape", "bad shape", "[2, 3]"], t.try_reshape(&[usize::MAX, 2]));
    panics_with(&["unflatten", "axis 1", "[2, 3]", "[2, 2]"], || t.unflatten(1, &[2, 2]));
    panics_with(&["unflatten", "axis 2 out of range", "[2, 3]"], || t.unflatten(2, &[3, 1]));
    panics_with(&["flatten", "start axis 1", "end axis 0", "[2, 3]"], || t.flatten(1, 0));
    panics_with(&["flatten", "axis 2 out of range", "[2, 3]"], || t.flatten(0, 2));
    assert_eq!(t.flatten(-2, -1).shape(), [6], "negative axes count from the end");
    panics_with(&["squeeze", "axis 2 out of range", "[2, 3]"], || t.squeeze(Some(2)));
    panics_with(&["unsqueeze", "axis 3 out of range", "[2, 3]"], || t.unsqueeze(3));
    panics_with(&["unsqueeze", "axis -4 out of range", "[2, 3]"], || t.unsqueeze(-4));
    assert_eq!(t.unsqueeze(-1).shape(), [2, 3, 1]);
}

#[test]
fn movement_ops_check_their_arguments() {
    let _d = interp();
    let t = m23();
    panics_with(&["expand", "[2, 3]", "[4, 3]"], || t.expand(&[4, 3]));
    panics_with(&["expand", "[2, 3]", "[1, 2, 3]"], || t.expand(&[1, 2, 3]));
    panics_with(&["permute", "[0, 0]", "not a permutation", "[2, 3]"], || t.permute(&[0, 0]));
    panics_with(&["permute", "[0]", "[2, 3]"], || t.permute(&[0]));
    panics_with(&["permute", "axis 2 out of range", "[2, 3]"], || t.permute(&[2, 0]));
    panics_with(&["pad", "1 pairs", "[2, 3]"], || t.pad(&[(1, 1)]));
    panics_with(&["shrink", "[(0, 3), (0, 3)]", "[2, 3]"], || t.shrink(&[(0, 3), (0, 3)]));
    panics_with(&["shrink", "[(2, 1), (0, 3)]", "[2, 3]"], || t.shrink(&[(2, 1), (0, 3)]));
    panics_with(&["flip", "axis 2 out of range", "[2, 3]"], || t.flip(&[2]));
    panics_with(&["transpose", "axis -3 out of range", "[2, 3]"], || t.transpose(-3, 0));
    panics_with(&["pad_with", "1 pairs", "[2, 3]"], || t.pad_with(&[(1, 1)], PadMode::Constant, 0.0));
    panics_with(&["pad_with", "(0, -5)", "crop more than", "[2, 3]"], || {
        t.pad_with(&[(0, 0), (0, -5)], PadMode::Constant, 0.0)
    });
    panics_with(&["pad_with", "reflect", "(0, 3)", "[2, 3]"], || t.pad_with(&[(0, 0), (0, 3)], PadMode::Reflect, 0));
    panics_with(&["pad_with", "circular", "(4, 0)", "[2, 3]"], || t.pad_with(&[(0, 0), (4, 0)], PadMode::Circular, 0));
    panics_with(&["pad_with", "replicate", "[0, 3]"], || {
        Tensor::zeros(&[0, 3]).pad_with(&[(1, 0), (0, 0)], PadMode::Replicate, 0)
    });
}

#[test]
fn joining_and_splitting_check_shapes_and_axes() {
    let _d = interp();
    let t = m23();
    panics_with(&["repeat", "[2]", "[2, 3]"], || t.repeat(&[2]));
    panics_with(&["repeat_interleave", "axis 5 out of range", "[2, 3]"], || t.repeat_interleave(2, Some(5)));
    panics_with(&["split", "[1, 1]", "axis 1", "[2, 3]"], || t.split([1, 1], 1));
    panics_with(&["split", "axis 2 out of range", "[2, 3]"], || t.split(1, 2));
    panics_with(&["chunk", "chunks must be positive, got 0"], || t.chunk(0, 0));
    err_with(&["cat", "no tensors"], Tensor::try_cat(&[], 0));
    let other = Tensor::zeros(&[2, 2, 1]);
    err_with(&["cat", "[2, 3]", "[2, 2, 1]"], Tensor::try_cat(&[&t, &other], 0));
    err_with(&["cat", "[2, 3]", "[3, 2]"], Tensor::try_cat(&[&t, &Tensor::zeros(&[3, 2])], 0));
    err_with(&["cat", "axis 2 out of range", "[2, 3]"], Tensor::try_cat(&[&t, &t], 2));
    let elsewhere = Tensor::zeros(&[2, 3]).to("CPU");
    err_with(&["cat", "different devices"], Tensor::try_cat(&[&t, &elsewhere], 0));
    panics_with(&["cat", "[2, 3]", "[3, 2]"], || Tensor::cat(&[&t, &Tensor::zeros(&[3, 2])], 1));
    assert_eq!(Tensor::cat(&[&t, &t], -1).shape(), [2, 6], "a negative axis counts from the end");
    panics_with(&["stack", "no tensors"], || Tensor::stack(&[], 0));
    panics_with(&["stack", "[2, 3]", "[3, 2]"], || Tensor::stack(&[&t, &Tensor::zeros(&[3, 2])], 0));
    panics_with(&["stack", "axis 3 out of range", "[2, 3]"], || Tensor::stack(&[&t, &t], 3));
    panics_with(&["meshgrid", "\"ab\""], || Tensor::meshgrid(&[&t], "ab"));
    panics_with(&["roll", "[1, 2]", "[0]"], || t.roll(&[1, 2], &[0]));
    panics_with(&["roll", "exactly one shift", "[1, 2]"], || t.roll(&[1, 2], &[]));
    panics_with(&["roll", "axis 2 out of range", "[2, 3]"], || t.roll(&[1], &[2]));
    panics_with(&["unfold", "size 5", "axis 1", "[2, 3]"], || t.unfold(1, 5, 1));
    panics_with(&["unfold", "step 0", "[2, 3]"], || t.unfold(1, 2, 0));
    panics_with(&["diag", "1-D", "[2, 3]"], || t.diag());
    panics_with(&["diagonal", "axis 0", "[2, 3]"], || t.diagonal(0, 0, -2));
    panics_with(&["diagonal", "axis 2 out of range", "[2, 3]"], || t.diagonal(0, 0, 2));
    panics_with(&["tril", "[3]"], || Tensor::zeros(&[3]).tril(0));
    panics_with(&["triu", "[3]"], || Tensor::zeros(&[3]).triu(0));
    // a 0-d tensor has an axis 0 to flip or transpose, but none to cut or join along (these
    // indexed its empty shape and panicked with "index out of bounds")
    let scalar = Tensor::new(2.0f32);
    assert_eq!(scalar.flip(&[0]).to_vec::<f32>(), [2.0]);
    assert_eq!(scalar.transpose(0, -1).to_vec::<f32>(), [2.0]);
    assert_eq!(scalar.roll(&[1], &[0]).to_vec::<f32>(), [2.0]);
    assert_eq!(scalar.repeat_interleave(2, Some(0)).to_vec::<f32>(), [2.0, 2.0]);
    err_with(&["cat", "axis 0 out of range", "[]"], Tensor::try_cat(&[&scalar, &scalar], 0));
    panics_with(&["split", "at least 1 dimension", "[]"], || scalar.split(1, 0));
    panics_with(&["chunk", "at least 1 dimension", "[]"], || scalar.chunk(1, 0));
    panics_with(&["unflatten", "at least 1 dimension", "[]"], || scalar.unflatten(0, &[1]));
    panics_with(&["unfold", "at least 1 dimension", "[]"], || scalar.unfold(0, 1, 1));
    panics_with(&["roll", "axis 1 out of range", "[]"], || scalar.roll(&[1], &[1]));
    panics_with(&["roll", "axis 2 out of range", "[0, 3]"], || Tensor::zeros(&[0, 3]).roll(&[1], &[2]));
}

#[test]
fn indexing_reports_bad_indices() {
    let _d = interp();
    let t = m23();
    err_with(&["index", "index 2", "axis 0 of size 2", "[2, 3]"], t.try_index(&s![2]));
    err_with(&["index", "index -4", "axis 1 of size 3"], t.try_index(&s![.., -4]));
    err_with(&["index", "3 indices", "2 dims"], t.try_index(&s![0, 0, 0]));
    err_with(&["index", "single ellipsis", "got 2"], t.try_index(&[Idx::Ellipsis, Idx::Ellipsis]));
    err_with(&["index", "step of 0", "axis 1"], t.try_index(&[Idx::Full, Idx::R(None, None, 0)]));
    err_with(&["index", "int tensors", "[2, 3]"], t.try_index(&[Idx::Tensor(m23())]));
    err_with(&["index", "index 5", "-2..2", "[2]"], t.try_index(&[ints(&[0, 5], &[2]).into()]));
    err_with(&["index", "must be int tensors on INTERP"], t.try_index(&[ints(&[0], &[1]).to("CPU").into()]));
    let (a, b) = (ints(&[0, 1], &[2]), ints(&[0, 1, 2], &[3]));
    err_with(&["index", "[[2], [3]]", "do not broadcast"], t.try_index(&[a.into(), b.into()]));
    panics_with(&["index", "index 2", "axis 0 of size 2", "[2, 3]"], || t.index(&s![2]));
    assert_eq!(t.index(&s![-1, ..;-1]).to_vec::<f32>(), [6.0, 5.0, 4.0], "negative indices and steps are valid");
    err_with(&["set", "[4]", "[2]"], t.try_set(&s![.., 0], Tensor::zeros(&[4])));
    err_with(&["index", "index 3", "axis 1 of size 3"], t.try_set(&s![.., 3], 0.0));
    panics_with(&["set", "[4]", "[2]"], || t.set(&s![.., 0], Tensor::zeros(&[4])));
    panics_with(&["Idx::step", "I(3)", "not a range"], || Idx::I(3).step(2));
}

#[test]
fn gather_scatter_and_one_hot_check_indices() {
    let _d = interp();
    let t = m23();
    let idx = ints(&[0, 1, 0], &[1, 3]);
    panics_with(&["gather", "integer tensor", "float"], || t.gather(0, &m23()));
    panics_with(&["gather", "[3, 3]", "[2, 3]"], || t.gather(1, &Tensor::zeros(&[3, 3]).int()));
    panics_with(&["gather", "[3]", "[2, 3]"], || t.gather(0, &ints(&[0, 1, 0], &[3])));
    panics_with(&["gather", "index 2", "0..2", "[1, 3]"], || t.gather(0, &ints(&[0, 2, 0], &[1, 3])));
    panics_with(&["gather", "index -1", "0..3"], || t.gather(1, &ints(&[-1, 0, 0], &[1, 3])));
    panics_with(&["gather", "axis 2 out of range", "[2, 3]"], || t.gather(2, &idx));
    let scalar = Tensor::new(2.0f32);
    panics_with(&["gather", "at least 1 dimension", "[]"], || scalar.gather(0, &Tensor::new(0i32)));
    panics_with(&["scatter", "at least 1 dimension", "[]"], || scalar.scatter(0, &Tensor::new(0i32), &scalar));
    panics_with(&["scatter", "index 5", "0..2", "[1, 3]"], || t.scatter(0, &ints(&[5, 0, 0], &[1, 3]), &t));
    panics_with(&["scatter", "[1, 3]", "[1, 2]"], || t.scatter(0, &idx, &Tensor::zeros(&[1, 2])));
    panics_with(&["scatter", "integer tensor", "float"], || t.scatter(0, &idx.float(), &t));
    panics_with(&["scatter", "index 2"], || t.scatter_value(0, &ints(&[2, 0, 0], &[1, 3]), 1.0));
    err_with(&["gather", "index 2", "0..2", "[1, 3]"], t.try_gather(0, &ints(&[0, 2, 0], &[1, 3])));
    err_with(&["gather", "[3, 3]", "[2, 3]"], t.try_gather(1, &Tensor::zeros(&[3, 3]).int()));
    err_with(&["gather", "axis -3 out of range"], t.try_gather(-3, &idx));
    assert_eq!(t.try_gather(0, &idx).unwrap().to_vec::<f32>(), [1.0, 5.0, 3.0]);
    err_with(&["one_hot", "index 3", "0..3"], ints(&[0, 3], &[2]).try_one_hot(3));
    err_with(&["one_hot", "integer tensor", "float"], t.try_one_hot(3));
    panics_with(&["one_hot", "integer tensor", "float"], || t.one_hot(3));
    panics_with(&["one_hot", "index 3", "0..3", "[2]"], || ints(&[0, 3], &[2]).one_hot(3));
    panics_with(&["one_hot", "index -1", "0..3"], || ints(&[-1, 0], &[2]).one_hot(3));
    panics_with(&["masked_fill", "[2]", "[2, 3]"], || t.masked_fill(&Tensor::new([true, false]), 0.0));
    panics_with(&["broadcast_to", "[2]", "[2, 3]"], || t.masked_select(&Tensor::new([true, false])));
}

#[test]
fn reductions_check_axes() {
    let _d = interp();
    let t = m23();
    panics_with(&["sum", "axis 2 out of range", "[2, 3]"], || t.sum(2, false));
    panics_with(&["sum", "axis -3 out of range", "[2, 3]"], || t.sum([0, -3], false));
    panics_with(&["prod", "axis 2 out of range"], || t.prod(2, false));
    panics_with(&["mean", "axis 2 out of range"], || t.mean(2, false));
    panics_with(&["max", "axis 2 out of range"], || t.max(2, false));
    panics_with(&["min", "axis 2 out of range"], || t.min(2, false));
    panics_with(&["any", "axis 2 out of range"], || t.any(2, false));
    panics_with(&["all", "axis 2 out of range"], || t.all(2, false));
    panics_with(&["var", "axis 2 out of range"], || t.var(2, false, 1));
    panics_with(&["std", "axis 2 out of range"], || t.std(2, false, 1));
    panics_with(&["var_mean", "axis 2 out of range"], || t.var_mean(2, false, 1));
    panics_with(&["logsumexp", "axis 2 out of range"], || t.logsumexp(2, false));
    panics_with(&["softmax", "axis 2 out of range"], || t.softmax(2));
    panics_with(&["softmax", "axis -3 out of range"], || t.log_softmax(-3));
    panics_with(&["argmax", "axis -3 out of range", "[2, 3]"], || t.argmax(Some(-3), false));
    panics_with(&["argmin", "axis 2 out of range", "[2, 3]"], || t.argmin(Some(2), false));
    panics_with(&["layernorm", "axis 2 out of range"], || t.layernorm(2, 1e-5));
    let empty = Tensor::zeros(&[0, 3]);
    panics_with(&["argmax", "axis 0 of size 0", "[0, 3]"], || empty.argmax(Some(0), false));
    panics_with(&["argmin", "axis 0 of size 0", "[0, 3]"], || empty.argmin(Some(0), false));
    // scans resolved their axis only after returning early for 0-d and empty tensors
    let scalar = Tensor::new(1.0f32);
    panics_with(&["cumsum", "axis 5 out of range", "[]"], || scalar.cumsum(5));
    panics_with(&["cumsum", "axis 5 out of range", "[0, 3]"], || empty.cumsum(5));
    panics_with(&["cumprod", "axis -3 out of range", "[0, 3]"], || empty.cumprod(-3));
    panics_with(&["cummax", "axis 1 out of range", "[]"], || scalar.cummax(1));
    panics_with(&["logcumsumexp", "axis 5 out of range", "[]"], || scalar.logcumsumexp(5));
    panics_with(&["cumsum", "axis 2 out of range", "[2, 3]"], || t.cumsum(2));
    // as in PyTorch, axis 0 or -1 of a 0-d tensor is valid, and reducing over it changes nothing
    // (these indexed the empty shape and panicked with "index out of bounds")
    for axis in [0, -1] {
        assert_eq!(scalar.sum(axis, false).to_vec::<f32>(), [1.0], "sum over axis {axis} of a 0-d tensor");
        assert_eq!(scalar.max(axis, true).to_vec::<f32>(), [1.0]);
        assert_eq!(scalar.softmax(axis).to_vec::<f32>(), [1.0]);
        assert_eq!(scalar.argmax(Some(axis), false).to_vec::<i32>(), [0]);
        assert_eq!(scalar.argmin(Some(axis), false).to_vec::<i32>(), [0]);
        assert_eq!(scalar.cumsum(axis).to_vec::<f32>(), [1.0]);
    }
    panics_with(&["mean", "axis 1 out of range", "[]"], || scalar.mean(1, false));
}

#[test]
fn elementwise_ops_name_themselves_and_both_shapes() {
    let _d = interp();
    let (a, b) = (m23(), Tensor::zeros(&[4]));
    type Binary = fn(&Tensor, &Tensor) -> Tensor;
    let ops: [(&str, Binary); 16] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("maximum", |a, b| a.maximum(b)),
        ("minimum", |a, b| a.minimum(b)),
        ("pow", |a, b| a.pow(b)),
        ("lt", |a, b| a.lt(b)),
        ("gt", |a, b| a.gt(b)),
        ("ge", |a, b| a.ge(b)),
        ("le", |a, b| a.le(b)),
        ("eq", |a, b| a.eq(b)),
        ("ne", |a, b| a.ne(b)),
        ("mod", |a, b| a.mod_(b)),
        ("fmod", |a, b| a.fmod(b)),
        ("copysign", |a, b| a.copysign(b)),
    ];
    for (name, op) in ops {
        panics_with(&[&format!("{name}: shapes do not broadcast (shapes [2, 3], [4])")], || op(&a, &b));
    }
    panics_with(&["idiv", "[2, 3]", "[4]"], || a.int().idiv(b.int()));
    panics_with(&["where", "[2]", "[2, 3]"], || Tensor::new([true, false]).where_(&a, 0.0));
    panics_with(&["add", "different devices", "INTERP", "CPU"], || &a + &Tensor::zeros(&[3]).to("CPU"));
    for (name, op) in [
        ("bitwise_and", (|a, b| a.bitwise_and(b)) as Binary),
        ("bitwise_or", |a, b| a.bitwise_or(b)),
        ("bitwise_xor", |a, b| a.bitwise_xor(b)),
        ("lshift", |a, b| a.lshift(b)),
        ("rshift", |a, b| a.rshift(b)),
    ] {
        panics_with(&[name, "integer", "float"], || op(&a, &a));
    }
    panics_with(&["bitwise_not", "float"], || a.bitwise_not());
    panics_with(&["bitcast", "float", "short", "differ in size"], || a.bitcast(DType::INT16));
    panics_with(&["bitcast", "float.vec(2)", "not a tensor dtype"], || a.double().bitcast(DType::FLOAT32.vec(2)));
    panics_with(&["cast", "void", "not a tensor dtype"], || a.cast(DType::VOID));
    panics_with(&["cast", "float.vec(4)", "not a tensor dtype"], || a.cast(DType::FLOAT32.vec(4)));
    panics_with(&["broadcast_to", "[2, 3]", "[3]"], || a.broadcast_to(&[3]));
    panics_with(&["clamp", "min", "max"], || a.clamp::<f32>(None, None));
}

#[test]
fn matmul_and_einsum_check_operands() {
    let _d = interp();
    let a = m23();
    panics_with(&["matmul", "inner dimensions differ (shapes [2, 3], [2, 3])"], || a.matmul(&a));
    panics_with(&["matmul", "[]", "[2, 3]"], || Tensor::new(1.0f32).matmul(&a));
    panics_with(&["matmul", "batch dimensions do not broadcast", "[2, 3, 4], [5, 4, 6]"], || {
        Tensor::zeros(&[2, 3, 4]).matmul(&Tensor::zeros(&[5, 4, 6]))
    });
    assert_eq!(Tensor::zeros(&[2, 3, 4]).matmul(&Tensor::zeros(&[1, 4, 6])).shape(), [2, 3, 6], "batch dims broadcast");
    panics_with(&["matmul", "inner dimensions differ", "[3], [2]"], || Tensor::zeros(&[3]).dot(&Tensor::zeros(&[2])));
    panics_with(&["einsum", "names 2 operands", "[2, 3]"], || Tensor::einsum("ij,jk->ik", &[&a]));
    panics_with(&["einsum", "\"ijk\"", "[2, 3]"], || Tensor::einsum("ijk->i", &[&a]));
    panics_with(&["einsum", "'j'", "3 and 2"], || Tensor::einsum("ij,jk->ik", &[&a, &a]));
    panics_with(&["einsum", "output \"iz\""], || Tensor::einsum("ij->iz", &[&a]));
    panics_with(&["einsum", "repeated letter 'i'", "2 and 3"], || Tensor::einsum("ii->i", &[&a]));
    panics_with(&["einsum", "more letters", "[2, 3]"], || Tensor::einsum("...ijk->i", &[&a]));
}

#[test]
fn convolutions_check_channels_kernels_and_options() {
    let _d = interp();
    let x = Tensor::zeros(&[1, 3, 5, 5]);
    let w = Tensor::zeros(&[4, 3, 3, 3]);
    let conv = |x: &Tensor, w: &Tensor, opts: ConvOpts| x.conv2d(w, None, &opts);
    panics_with(&["conv2d", "[1, 3, 5]", "[4, 3, 3, 3]", "same rank"], || {
        conv(&Tensor::zeros(&[1, 3, 5]), &w, ConvOpts::default())
    });
    panics_with(&["conv2d", "[1, 3, 5, 5]", "[4, 2, 3, 3]", "groups=1"], || {
        conv(&x, &Tensor::zeros(&[4, 2, 3, 3]), ConvOpts::default())
    });
    panics_with(&["conv2d", "groups=0"], || conv(&x, &w, ConvOpts::default().groups(0)));
    panics_with(&["conv2d", "[4, 1, 3, 3]", "groups=3"], || {
        conv(&x, &Tensor::zeros(&[4, 1, 3, 3]), ConvOpts::default().groups(3))
    });
    panics_with(&["conv2d", "kernel [7, 7]", "larger than the input", "[1, 3, 5, 5]"], || {
        conv(&x, &Tensor::zeros(&[4, 3, 7, 7]), ConvOpts::default())
    });
    assert_eq!(conv(&x, &Tensor::zeros(&[4, 3, 7, 7]), ConvOpts::default().padding(1)).shape(), [1, 4, 1, 1]);
    panics_with(&["conv2d", "kernel [3, 3]", "dilation [3, 3]", "larger than"], || {
        conv(&x, &w, ConvOpts::default().dilation(3))
    });
    panics_with(&["conv2d", "stride [0, 0]", "positive"], || conv(&x, &w, ConvOpts::default().stride(0)));
    panics_with(&["conv2d", "dilation [1, 0]", "positive"], || conv(&x, &w, ConvOpts::default().dilation([1, 0])));
    panics_with(&["conv2d", "kernel [0, 3]", "positive"], || {
        conv(&x, &Tensor::zeros(&[4, 3, 0, 3]), ConvOpts::default())
    });
    panics_with(&["conv2d", "stride", "3 values", "2 spatial"], || conv(&x, &w, ConvOpts::default().stride([1, 1, 1])));
    panics_with(&["conv2d", "padding", "3 values", "2 spatial"], || {
        conv(&x, &w, ConvOpts::default().padding([1, 1, 1]))
    });
    panics_with(&["conv2d", "a bias for 4 output channels", "[3]", "4 output channels"], || {
        x.conv2d(&w, Some(&Tensor::zeros(&[3])), &ConvOpts::default())
    });

    let wt = Tensor::zeros(&[3, 2, 3, 3]);
    let convt = |x: &Tensor, w: &Tensor, opts: ConvOpts| x.conv_transpose2d(w, None, &opts);
    panics_with(&["conv_transpose2d", "[1, 3, 5]", "same rank"], || {
        convt(&Tensor::zeros(&[1, 3, 5]), &wt, ConvOpts::default())
    });
    panics_with(&["conv_transpose2d", "[1, 4, 5, 5]", "channels are not the weight's", "[3, 2, 3, 3]"], || {
        convt(&Tensor::zeros(&[1, 4, 5, 5]), &wt, ConvOpts::default())
    });
    panics_with(&["conv_transpose2d", "[3, 2, 3, 3]", "2 groups"], || convt(&x, &wt, ConvOpts::default().groups(2)));
    panics_with(&["conv_transpose2d", "kernel [0, 3]", "positive"], || {
        convt(&x, &Tensor::zeros(&[3, 2, 0, 3]), ConvOpts::default())
    });
    panics_with(&["conv_transpose2d", "stride [0, 0]", "positive"], || convt(&x, &wt, ConvOpts::default().stride(0)));
    panics_with(&["conv_transpose2d", "output_padding [2, 2]", "stride [2, 2]"], || {
        convt(&x, &wt, ConvOpts::default().stride(2).output_padding(2))
    });
    panics_with(&["conv_transpose2d", "padding", "output size [-3, -3]"], || {
        convt(&x, &wt, ConvOpts::default().padding(5))
    });
    panics_with(&["conv_transpose2d", "a bias for 2 output channels", "[3]"], || {
        x.conv_transpose2d(&wt, Some(&Tensor::zeros(&[3])), &ConvOpts::default())
    });
}

#[test]
fn pools_check_kernels_strides_and_ranks() {
    let _d = interp();
    let x = Tensor::zeros(&[1, 1, 3, 3]);
    type Pool = fn(&Tensor, &PoolOpts) -> Tensor;
    for (name, pool) in [("max_pool2d", Tensor::max_pool2d as Pool), ("avg_pool2d", Tensor::avg_pool2d)] {
        panics_with(&[name, "kernel [5, 5]", "larger than the input", "[1, 1, 3, 3]"], || {
            pool(&x, &PoolOpts::kernel(5))
        });
        panics_with(&[name, "stride [0, 0]", "positive"], || pool(&x, &PoolOpts::kernel(2).stride(0)));
        panics_with(&[name, "stride [0, 0]", "positive"], || pool(&x, &PoolOpts::kernel(2).stride(0).ceil_mode(true)));
        panics_with(&[name, "kernel [0, 0]", "positive"], || pool(&x, &PoolOpts::kernel(0)));
        panics_with(&[name, "dilation [3, 3]", "larger than"], || pool(&x, &PoolOpts::kernel(2).dilation(3)));
        panics_with(&[name, "fewer than 2 dimensions", "[3]"], || pool(&Tensor::zeros(&[3]), &PoolOpts::default()));
        panics_with(&[name, "stride", "3 values", "2 spatial"], || pool(&x, &PoolOpts::kernel(2).stride([1, 1, 1])));
        assert_eq!(pool(&x, &PoolOpts::kernel(5).padding(1)).shape(), [1, 1, 1, 1], "padding makes room");
    }
}

#[test]
fn sorting_interpolation_and_selection_check_arguments() {
    let _d = interp();
    let t = m23();
    panics_with(&["sort", "axis 2 out of range", "[2, 3]"], || t.sort(2, false));
    panics_with(&["sort", "axis 1 out of range", "[]"], || Tensor::new(1.0f32).sort(1, false));
    panics_with(&["sort", "axis -3 out of range"], || t.argsort(-3, true));
    panics_with(&["topk", "k=4", "[2, 3]"], || t.topk(4, 1, true));
    panics_with(&["topk", "k=2", "[]"], || Tensor::new(1.0f32).topk(2, 0, true));
    panics_with(&["topk", "axis 2 out of range"], || t.topk(1, 2, true));
    panics_with(&["interpolate", "[2, 3, 4]", "[2, 3]"], || t.interpolate(&[2, 3, 4], "linear", false));
    panics_with(&["interpolate", "[]", "[2, 3]"], || t.interpolate(&[], "linear", false));
    panics_with(&["interpolate", "\"cubic\""], || t.interpolate(&[4], "cubic", false));
    panics_with(&["interpolate", "align_corners"], || t.interpolate(&[4], "nearest", true));
    // an empty axis has nothing to interpolate from (this gave zeros)
    panics_with(&["interpolate", "[2, 0]", "[3]"], || Tensor::zeros(&[2, 0]).interpolate(&[3], "linear", false));
}

#[test]
fn random_draws_check_ranges() {
    let _d = interp();
    panics_with(&["randint", "[5, 5)"], || Tensor::randint(&[2], 5, 5));
    panics_with(&["randint", "[0, 4294967296)", "not representable in dtypes.int"], || {
        Tensor::randint(&[2], 0, 1 << 32)
    });
    let w = Tensor::ones(&[2, 3]);
    panics_with(&["multinomial", "[2, 2, 2]", "1-D or 2-D"], || Tensor::ones(&[2, 2, 2]).multinomial(1, true));
    panics_with(&["multinomial", "num_samples must be positive"], || w.multinomial(0, true));
    panics_with(&["multinomial", "without replacement"], || w.multinomial(2, false));
    panics_with(&["multinomial", "[2, 0]", "at least one category"], || Tensor::ones(&[2, 0]).multinomial(1, true));
    panics_with(&["dropout", "p=1.5", "[0, 1]"], || w.dropout(1.5));
    panics_with(&["dropout", "p=NaN"], || w.dropout(f64::NAN));
}

#[test]
fn losses_check_labels_and_shapes() {
    let _d = interp();
    let logits = Tensor::zeros(&[4, 10]);
    let labels = ints(&[1, 2, 3, 4], &[4]);
    let scce = |y: &Tensor, smoothing: f64| logits.sparse_categorical_crossentropy(y, -1, smoothing, Reduction::Mean);
    panics_with(&["sparse_categorical_crossentropy", "[4, 10]", "[5]"], || scce(&ints(&[1; 5], &[5]), 0.0));
    panics_with(&["sparse_categorical_crossentropy", "integer", "float"], || scce(&labels.float(), 0.0));
    panics_with(&["sparse_categorical_crossentropy", "index 10", "0..10"], || scce(&ints(&[1, 2, 3, 10], &[4]), 0.0));
    panics_with(&["sparse_categorical_crossentropy", "label_smoothing"], || scce(&labels, 1.5));
    panics_with(&["sparse_categorical_crossentropy", "class axis"], || {
        Tensor::new(1.0f32).sparse_categorical_crossentropy(&labels, -1, 0.0, Reduction::Mean)
    });
    panics_with(&["cross_entropy", "[4, 10]", "[2]"], || {
        logits.cross_entropy(&ints(&[1, 2], &[2]), Reduction::Mean, 0.0)
    });
    panics_with(&["cross_entropy", "index -1", "0..10"], || {
        logits.cross_entropy(&ints(&[1, 2, 3, -1], &[4]), Reduction::Mean, 0.0)
    });
    panics_with(&["cross_entropy", "label_smoothing"], || logits.cross_entropy(&labels, Reduction::Mean, -0.1));
    panics_with(&["nll_loss", "[4, 10]", "[3]"], || {
        logits.nll_loss(&ints(&[1, 2, 3], &[3]), None, None, Reduction::Mean)
    });
    panics_with(&["nll_loss", "a weight per class", "[3]", "[4, 10]"], || {
        logits.nll_loss(&labels, Some(&Tensor::ones(&[3])), None, Reduction::Mean)
    });
    panics_with(&["nll_loss", "index 12"], || logits.nll_loss(&ints(&[1, 2, 3, 12], &[4]), None, None, Reduction::Sum));
    let p = Tensor::full(&[4], 0.5f32);
    panics_with(&["binary_crossentropy", "[4]", "[3]"], || {
        p.binary_crossentropy(&Tensor::zeros(&[3]), Reduction::Mean)
    });
    panics_with(&["binary_crossentropy_logits", "[4]", "[3]"], || {
        p.binary_crossentropy_logits(&Tensor::zeros(&[3]), Reduction::Mean, None)
    });
    let x = Tensor::zeros(&[2, 4, 3]);
    panics_with(&["batchnorm", "statistics that do not fit", "[2, 4, 3], [3]"], || {
        x.batchnorm(None, None, &Tensor::zeros(&[3]), &Tensor::ones(&[4]))
    });
    panics_with(&["batchnorm", "statistics that do not fit", "[2, 4, 3], [5]"], || {
        x.batchnorm(Some(&Tensor::ones(&[5])), None, &Tensor::zeros(&[4]), &Tensor::ones(&[4]))
    });
    let (q, k) = (Tensor::zeros(&[2, 3, 4]), Tensor::zeros(&[2, 5, 8]));
    panics_with(&["scaled_dot_product_attention", "[2, 3, 4]", "[2, 5, 8]"], || {
        q.scaled_dot_product_attention(&k, &k, None, false)
    });
    panics_with(&["scaled_dot_product_attention", "do not broadcast", "[2, 3, 3], [5, 5]"], || {
        q.scaled_dot_product_attention(&q, &q, Some(&Tensor::ones(&[5, 5]).bool()), false)
    });
    panics_with(&["scaled_dot_product_attention", "exclusive"], || {
        q.scaled_dot_product_attention(&q, &q, Some(&Tensor::ones(&[3, 3])), true)
    });
}

#[test]
fn data_access_checks_dtypes_shapes_and_devices() {
    let _d = interp();
    let t = m23();
    panics_with(&["to_vec", "float", "asked for", "int"], || t.to_vec::<i32>());
    assert!(
        matches!(t.try_to_vec::<i32>(), Err(Error::DTypes { op: "to_vec", dtypes, .. }) if dtypes == [DType::FLOAT32, DType::INT32])
    );
    panics_with(&["to_vec", "float", "double"], || t.tolist::<f64>());
    panics_with(&["item", "[2, 3]", "6 elements"], || t.item::<f32>());
    panics_with(&["assign", "[2, 3]", "[3, 2]"], || t.assign(&Tensor::zeros(&[3, 2])));
    panics_with(&["assign", "different devices", "INTERP", "CPU"], || t.assign(&Tensor::zeros(&[2, 3]).to("CPU")));
    let row = Tensor::new([1.0f32, 2.0, 3.0]).reshape(&[1, 3]).expand(&[2, 3]);
    panics_with(&["assign", "target expands", "[1, 3], [2, 3]"], || row.assign(&m23()));
    let lost = t.to("NOPE");
    assert!(matches!(lost.try_realize(), Err(Error::Device(m)) if m.contains("unknown device \"NOPE\"")));
    panics_with(&["device error", "unknown device \"NOPE\""], || lost.to_vec::<f32>());
}

#[test]
fn autograd_checks_the_loss_and_its_targets() {
    let _d = interp();
    let x = m23().requires_grad(true);
    panics_with(&["backward", "scalar", "[2, 3]"], || (&x * 2.0).backward());
    let loss = (&x * 2.0).sum(None::<isize>, false);
    let unrelated = Tensor::zeros(&[3, 2]).requires_grad(true);
    err_with(&["gradient", "does not depend", "[3, 2]"], loss.try_gradient(&[&unrelated]));
    panics_with(&["gradient", "does not depend", "[3, 2]"], || loss.gradient(&[&unrelated]));
    err_with(&["backward", "scalar", "[2, 3]"], (&x * 2.0).try_gradient(&[&x]));
}
