//! State dicts and safetensors: bit-exact round trips for every dtype, `Module` naming,
//! `load_state_dict` errors, and corrupt or truncated files giving errors (never panics).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::TempDir;
use lazygrad::nn::state::{
    get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save, safe_save_with_metadata,
    tensor_from_bytes, Module,
};
use lazygrad::runtime::default_device;
use lazygrad::{module, DType, Error, Tensor};

/// Deterministic pseudo-random bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    common::xorshift(seed).take(n).map(|s| (s >> 24) as u8).collect()
}

fn tensor(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut data = bytes(n * dtype.itemsize(), seed);
    if dtype == DType::BOOL {
        data.iter_mut().for_each(|b| *b &= 1);
    }
    Tensor::from_bytes(&data, shape, dtype, &default_device())
}

fn f32s(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape)
}

fn assert_same(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtype");
    assert_eq!(a.shape(), b.shape(), "{what}: shape");
    assert_eq!(a.raw_bytes().unwrap(), b.raw_bytes().unwrap(), "{what}: bytes");
}

fn expect_err<T: std::fmt::Debug>(r: lazygrad::Result<T>, what: &str) -> String {
    match r {
        Ok(v) => panic!("{what}: expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn round_trip_every_dtype_bit_exact() {
    let dir = TempDir::new("dtypes");
    let shapes: [&[usize]; 4] = [&[], &[7], &[2, 3, 4], &[1, 5, 1]];
    let mut saved = BTreeMap::new();
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, shape) in shapes.iter().enumerate() {
            saved.insert(format!("{}.{j}", dtype.name()), tensor(dtype, shape, (i * 10 + j) as u64));
        }
    }
    // NaN payloads, signed zeros and subnormals must survive untouched.
    let specials = [f32::NAN, -0.0, f32::from_bits(1), f32::INFINITY, f32::from_bits(0x7fc0_1234)];
    saved.insert("specials".into(), f32s(&specials, &[5]));
    let path = dir.path("all.safetensors");
    safe_save(&saved, &path).unwrap();
    let loaded = safe_load(&path).unwrap();
    assert_eq!(loaded.keys().collect::<Vec<_>>(), saved.keys().collect::<Vec<_>>());
    for (k, t) in &saved {
        assert_same(t, &loaded[k], k);
    }
}

#[test]
fn saves_lazy_and_strided_tensors_contiguously() {
    let dir = TempDir::new("lazy");
    let a = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let t = a.permute(&[1, 0]); // [3, 2], not contiguous in `a`'s buffer
    let lazy = &a * 2.0 + 1.0;
    let path = dir.path("lazy.safetensors");
    safe_save([("t", &t), ("lazy", &lazy)], &path).unwrap();
    let loaded = safe_load(&path).unwrap();
    assert_eq!(loaded["t"].shape(), vec![3, 2]);
    assert_eq!(loaded["t"].to_vec::<f32>(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(loaded["lazy"].to_vec::<f32>(), vec![3.0, 5.0, 7.0, 9.0, 11.0, 13.0]);
}

#[test]
fn metadata_round_trips() {
    let dir = TempDir::new("meta");
    let path = dir.path("m.safetensors");
    let meta: BTreeMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    safe_save_with_metadata([("w", &f32s(&[1.0], &[1]))], Some(&meta), &path).unwrap();
    assert_eq!(safe_load_metadata(&path).unwrap(), meta);
    safe_save([("w", &f32s(&[1.0], &[1]))], &path).unwrap();
    assert!(safe_load_metadata(&path).unwrap().is_empty());
}

#[test]
fn empty_and_zero_sized() {
    let dir = TempDir::new("empty");
    let path = dir.path("none.safetensors");
    safe_save(&BTreeMap::<String, Tensor>::new(), &path).unwrap();
    assert!(safe_load(&path).unwrap().is_empty());
    let z = Tensor::from_bytes(&[], &[0, 3], DType::FLOAT32, &default_device());
    safe_save([("z", &z)], &path).unwrap();
    let loaded = safe_load(&path).unwrap();
    assert_eq!(loaded["z"].shape(), vec![0, 3]);
    assert!(loaded["z"].to_vec::<f32>().is_empty());
}

/// A file written by hand from the format's spec loads (not just our own writer's output).
#[test]
fn reads_a_hand_written_file() {
    let dir = TempDir::new("hand");
    let header = br#"{"__metadata__":{"k":"v"},"b":{"dtype":"U8","shape":[2],"data_offsets":[16,18]},"a":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}"#;
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header);
    for v in [1i32, -2, 3, i32::MAX] {
        file.extend_from_slice(&v.to_le_bytes());
    }
    file.extend_from_slice(&[7, 255]);
    let path = dir.path("hand.safetensors");
    std::fs::write(&path, &file).unwrap();
    let loaded = safe_load(&path).unwrap();
    assert_eq!(loaded["a"].shape(), vec![2, 2]);
    assert_eq!(loaded["a"].to_vec::<i32>(), vec![1, -2, 3, i32::MAX]);
    assert_eq!(loaded["b"].to_vec::<u8>(), vec![7, 255]);
    assert_eq!(safe_load_metadata(&path).unwrap()["k"], "v");
}

fn write_file(dir: &TempDir, name: &str, header: &str, data_len: usize) -> PathBuf {
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend(std::iter::repeat_n(0u8, data_len));
    let path = dir.path(name);
    std::fs::write(&path, file).unwrap();
    path
}

fn is_format(e: &lazygrad::Result<BTreeMap<String, Tensor>>) -> bool {
    matches!(e, Err(Error::Format(_)))
}

#[test]
fn corrupt_files_are_errors() {
    let dir = TempDir::new("corrupt");
    let cases: Vec<(&str, PathBuf)> = vec![
        ("empty file", {
            let p = dir.path("empty");
            std::fs::write(&p, b"").unwrap();
            p
        }),
        ("7 bytes", {
            let p = dir.path("short");
            std::fs::write(&p, b"\x05\0\0\0\0\0\0").unwrap();
            p
        }),
        ("huge header length", {
            let p = dir.path("huge-header");
            let mut f = u64::MAX.to_le_bytes().to_vec();
            f.extend_from_slice(b"{}");
            std::fs::write(&p, f).unwrap();
            p
        }),
        ("header longer than the file", {
            let p = dir.path("long-header");
            let mut f = 1000u64.to_le_bytes().to_vec();
            f.extend_from_slice(b"{}");
            std::fs::write(&p, f).unwrap();
            p
        }),
        ("garbage header", write_file(&dir, "garbage", "not json at all", 0)),
        ("non-utf8 header", {
            let p = dir.path("utf8");
            let mut f = 4u64.to_le_bytes().to_vec();
            f.extend_from_slice(&[0xff, 0xfe, 0x7b, 0x7d]);
            std::fs::write(&p, f).unwrap();
            p
        }),
        (
            "wrong shape for offsets",
            write_file(&dir, "shape", r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, 8),
        ),
        ("gap between tensors", {
            let h = r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}"#;
            write_file(&dir, "gap", h, 6)
        }),
        ("overlapping tensors", {
            let h = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#;
            write_file(&dir, "overlap", h, 4)
        }),
        (
            "offsets past the end",
            write_file(&dir, "past", r#"{"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}}"#, 4),
        ),
        (
            "data after the last tensor",
            write_file(&dir, "extra", r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#, 9),
        ),
        (
            "end before start",
            write_file(&dir, "backwards", r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}"#, 4),
        ),
        ("huge declared size", {
            let h = r#"{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#;
            write_file(&dir, "overflow", h, 8)
        }),
        ("huge but consistent size", {
            let h = r#"{"a":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}"#;
            write_file(&dir, "terabyte", h, 8)
        }),
        ("unknown dtype", write_file(&dir, "dtype", r#"{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,1]}}"#, 1)),
        (
            "unsupported dtype",
            write_file(&dir, "fp8", r#"{"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}"#, 2),
        ),
        ("negative shape", write_file(&dir, "neg", r#"{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}"#, 1)),
    ];
    for (what, path) in cases {
        let r = safe_load(&path);
        assert!(is_format(&r), "{what}: expected a format error, got {:?}", r.map(|m| m.len()));
        let msg = expect_err(r, what);
        assert!(msg.contains(&path.display().to_string()), "{what}: message should name the file: {msg}");
    }
    let msg = expect_err(safe_load(dir.path("fp8")), "fp8");
    assert!(msg.contains("F8_E4M3") && msg.contains("`a`"), "{msg}");
    let missing = safe_load(dir.path("no-such-file"));
    assert!(matches!(missing, Err(Error::Io(ref e)) if e.kind() == std::io::ErrorKind::NotFound));
}

/// Every truncation of a valid file and many single-byte corruptions: an error or (for a
/// harmless change) a load, never a panic.
#[test]
fn truncated_and_mutated_files_never_panic() {
    let dir = TempDir::new("fuzz");
    let mut sd = BTreeMap::new();
    sd.insert("w".to_string(), tensor(DType::FLOAT32, &[3, 4], 1));
    sd.insert("b".to_string(), tensor(DType::FLOAT16, &[4], 2));
    sd.insert("i".to_string(), tensor(DType::INT64, &[2], 3));
    let good = dir.path("good.safetensors");
    safe_save(&sd, &good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let bad = dir.path("bad.safetensors");
    for len in 0..bytes.len() {
        std::fs::write(&bad, &bytes[..len]).unwrap();
        assert!(safe_load(&bad).is_err(), "truncated to {len} of {} bytes loaded", bytes.len());
    }
    let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let noise = self::bytes(4 * header_end, 99);
    for (i, pos) in (0..header_end).enumerate() {
        for k in 0..3 {
            let mut m = bytes.clone();
            m[pos] = match k {
                0 => m[pos] ^ 0xff,
                1 => noise[4 * i],
                _ => b"0123456789[]{},:\"-e"[noise[4 * i + 1] as usize % 19],
            };
            std::fs::write(&bad, &m).unwrap();
            if let Ok(loaded) = safe_load(&bad) {
                for t in loaded.values() {
                    t.raw_bytes().unwrap();
                }
            }
        }
    }
}

// ---- Module and state dicts ------------------------------------------------------------------

struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}
module!(Linear { weight, bias });

impl Linear {
    fn new(fan_in: usize, fan_out: usize, bias: bool, seed: u64) -> Linear {
        let w: Vec<f32> = (0..fan_in * fan_out).map(|i| (i as f32 + seed as f32) * 0.25).collect();
        let b: Vec<f32> = (0..fan_out).map(|i| -(i as f32) - seed as f32).collect();
        Linear { weight: f32s(&w, &[fan_out, fan_in]), bias: bias.then(|| f32s(&b, &[fan_out])) }
    }
}

struct Pair(Tensor, Tensor);
module!(Pair { 0, 1 });

struct Wrap<T>(T);
module!(impl<T> Wrap<T> { 0 as "inner" });

struct Net {
    layers: Vec<Linear>,
    head: Linear,
    norms: [Tensor; 2],
    pair: Pair,
    extra: Wrap<Tensor>,
    #[allow(dead_code)]
    not_a_param: usize,
}
module!(Net { layers, head as "fc", norms, pair, extra });

impl Net {
    fn new(seed: u64) -> Net {
        let s = seed as f32;
        Net {
            layers: vec![Linear::new(4, 3, true, seed), Linear::new(3, 3, false, seed + 1)],
            head: Linear::new(3, 2, true, seed + 2),
            norms: [f32s(&[s, s + 1.0], &[2]), f32s(&[s + 2.0], &[1])],
            pair: Pair(f32s(&[s * 3.0], &[1]), f32s(&[s * 4.0; 4], &[2, 2])),
            extra: Wrap(f32s(&[s, -s], &[2])),
            not_a_param: 0,
        }
    }
}

const NET_KEYS: [&str; 10] = [
    "layers.0.weight",
    "layers.0.bias",
    "layers.1.weight",
    "fc.weight",
    "fc.bias",
    "norms.0",
    "norms.1",
    "pair.0",
    "pair.1",
    "extra.inner",
];

#[test]
fn module_names_are_dotted_paths() {
    let net = Net::new(1);
    let names: Vec<String> = net.named_tensors().into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, NET_KEYS);
    let sd = get_state_dict(&net);
    assert_eq!(sd.len(), NET_KEYS.len());
    assert_eq!(sd["fc.weight"].shape(), vec![2, 3]);
    // Containers and trait objects.
    let boxed: Vec<Box<dyn Module>> = vec![Box::new(Linear::new(2, 2, true, 0)), Box::new(f32s(&[1.0], &[1]))];
    let names: Vec<String> = boxed.named_tensors().into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["0.weight", "0.bias", "1"]);
    let map: BTreeMap<String, Linear> = [("enc".to_string(), Linear::new(2, 2, false, 0))].into();
    assert_eq!(get_state_dict(&map).keys().collect::<Vec<_>>(), ["enc.weight"]);
    let t = f32s(&[1.0], &[1]);
    assert_eq!(get_state_dict(&t).keys().collect::<Vec<_>>(), [""]);
}

#[test]
fn parameters_are_listed_once() {
    let net = Net::new(1);
    assert_eq!(get_parameters(&net).len(), NET_KEYS.len());
    // Tied weights: the same realized tensor under two names counts once.
    let w = f32s(&[1.0, 2.0], &[2]);
    let tied = Pair(w.clone(), w);
    assert_eq!(get_state_dict(&tied).len(), 2);
    assert_eq!(get_parameters(&tied).len(), 1);
}

fn values(m: &impl Module) -> Vec<(String, Vec<u8>)> {
    m.named_tensors().into_iter().map(|(k, t)| (k, t.raw_bytes().unwrap())).collect()
}

#[test]
fn state_dict_survives_save_and_load_into_a_fresh_model() {
    let dir = TempDir::new("model");
    let trained = Net::new(5);
    let path = dir.path("net.safetensors");
    safe_save(&get_state_dict(&trained), &path).unwrap();
    let fresh = Net::new(9);
    assert_ne!(values(&fresh), values(&trained));
    let weight_before = fresh.head.weight.clone();
    load_state_dict(&fresh, &safe_load(&path).unwrap(), true).unwrap();
    assert_eq!(values(&fresh), values(&trained));
    // In place: handles taken before the load see the new values.
    assert_same(&weight_before, &trained.head.weight, "fc.weight handle");
    // Loading a model's own state dict into itself is a no-op.
    load_state_dict(&fresh, &get_state_dict(&fresh), true).unwrap();
    assert_eq!(values(&fresh), values(&trained));
}

#[test]
fn strict_errors_name_missing_and_unexpected_keys() {
    let net = Net::new(1);
    let before = values(&net);
    let mut sd = get_state_dict(&Net::new(2));
    sd.remove("fc.bias");
    sd.remove("norms.1");
    sd.insert("stray.weight".into(), f32s(&[0.0], &[1]));
    let msg = expect_err(load_state_dict(&net, &sd, true), "strict");
    for k in ["fc.bias", "norms.1", "stray.weight", "missing", "does not have"] {
        assert!(msg.contains(k), "message lacks {k:?}: {msg}");
    }
    assert_eq!(values(&net), before, "a failed load must not change the model");
    // Non-strict: missing keys are skipped, extra keys ignored, the rest loaded.
    load_state_dict(&net, &sd, false).unwrap();
    let loaded = get_state_dict(&net);
    assert_same(&loaded["fc.weight"], &sd["fc.weight"], "fc.weight");
    assert_eq!(loaded["fc.bias"].raw_bytes().unwrap(), before.iter().find(|(k, _)| k == "fc.bias").unwrap().1);
}

#[test]
fn wrong_shapes_are_always_errors() {
    let net = Net::new(1);
    let before = values(&net);
    let mut sd = get_state_dict(&Net::new(2));
    sd.insert("fc.weight".into(), f32s(&[0.0; 6], &[3, 2]));
    for strict in [true, false] {
        let msg = expect_err(load_state_dict(&net, &sd, strict), "shape");
        let said = "Shape mismatch in layer `fc.weight`: Expected shape (2, 3), but found (3, 2) in state dict.";
        assert!(msg.contains(said), "{msg}");
        assert_eq!(values(&net), before);
    }
}

/// tinygrad loads a scalar into a one-element vector and back (a `num_batches_tracked` saved
/// either way); any other size mismatch stays an error.
#[test]
fn a_scalar_and_a_one_element_vector_load_into_each_other() {
    struct Counter {
        count: Tensor,
    }
    module!(Counter { count });
    let net = Counter { count: Tensor::zeros(&[1]).contiguous().realize() };
    load_state_dict(&net, &[("count".to_string(), f32s(&[7.0], &[]))].into(), true).unwrap();
    assert_eq!(net.count.to_vec::<f32>(), [7.0]);
    let scalar = Counter { count: Tensor::zeros(&[]).contiguous().realize() };
    load_state_dict(&scalar, &[("count".to_string(), f32s(&[3.0], &[1]))].into(), true).unwrap();
    assert_eq!(scalar.count.to_vec::<f32>(), [3.0]);
    let two = [("count".to_string(), f32s(&[1.0, 2.0], &[2]))].into();
    assert!(expect_err(load_state_dict(&net, &two, true), "size 2").contains("Expected shape (1,), but found (2,)"));
}

#[test]
fn dtypes_are_cast_to_the_model() {
    let net = Linear::new(2, 2, true, 0);
    let sd: BTreeMap<String, Tensor> = [
        ("weight".to_string(), f32s(&[0.5, -1.5, 2.0, 1024.0], &[2, 2]).cast(DType::FLOAT16)),
        ("bias".to_string(), Tensor::from_slice(&[3i32, -4], &[2])),
    ]
    .into();
    load_state_dict(&net, &sd, true).unwrap();
    assert_eq!(net.weight.dtype(), DType::FLOAT32);
    assert_eq!(net.weight.to_vec::<f32>(), vec![0.5, -1.5, 2.0, 1024.0]);
    assert_eq!(net.bias.as_ref().unwrap().to_vec::<f32>(), vec![3.0, -4.0]);
}

#[test]
fn loads_into_unrealized_parameters() {
    let net = Linear { weight: Tensor::zeros(&[2, 2]), bias: Some(Tensor::zeros(&[2])) };
    let src = Linear::new(2, 2, true, 3);
    load_state_dict(&net, &get_state_dict(&src), true).unwrap();
    assert_eq!(values(&net), values(&src));
}

#[test]
fn tensor_from_bytes_checks_lengths() {
    let dev = default_device();
    assert!(tensor_from_bytes(&[0; 7], &[2], DType::FLOAT32, &dev).is_err());
    assert!(tensor_from_bytes(&[0; 8], &[usize::MAX, 2], DType::FLOAT32, &dev).is_err());
    let t = tensor_from_bytes(&1.5f32.to_le_bytes(), &[], DType::FLOAT32, &dev).unwrap();
    assert_eq!(t.shape(), Vec::<usize>::new());
    assert_eq!(t.item::<f32>(), 1.5);
}

/// A safetensors file of `header` (JSON) and `data` bytes.
fn safetensors_file(dir: &TempDir, name: &str, header: &str, data: usize) -> PathBuf {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    let path = dir.path(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A safetensors header that lies about the data is an error naming the file, not a tensor that
/// silently reads another one's bytes or drops one: a name given twice, tensors sharing bytes,
/// bytes no tensor claims, a size that is not its shape's, offsets past the end.
#[test]
fn headers_that_lie_about_their_data_are_format_errors() {
    let dir = TempDir::new("lying-safetensors");
    let f32s = |offsets: &str, shape: &str| format!(r#"{{"dtype":"F32","shape":{shape},"data_offsets":{offsets}}}"#);
    let good = format!(r#"{{"a":{},"b":{}}}"#, f32s("[0,8]", "[2]"), f32s("[8,16]", "[2]"));
    assert_eq!(safe_load(safetensors_file(&dir, "good.safetensors", &good, 16)).unwrap().len(), 2);
    let lies = [
        ("twice", format!(r#"{{"a":{},"a":{}}}"#, f32s("[0,8]", "[2]"), f32s("[8,16]", "[2]")), 16),
        ("shared", format!(r#"{{"a":{},"b":{}}}"#, f32s("[0,8]", "[2]"), f32s("[0,8]", "[2]")), 8),
        ("unclaimed", format!(r#"{{"a":{}}}"#, f32s("[0,8]", "[2]")), 16),
        ("misshapen", format!(r#"{{"a":{}}}"#, f32s("[0,8]", "[3]")), 8),
        ("past the end", format!(r#"{{"a":{}}}"#, f32s("[0,16]", "[4]")), 8),
    ];
    for (what, header, data) in lies {
        let path = safetensors_file(&dir, &format!("{what}.safetensors"), &header, data);
        let m = expect_err(safe_load(&path), what);
        assert!(m.contains(&format!("{what}.safetensors")), "{what}: {m}");
    }
}
