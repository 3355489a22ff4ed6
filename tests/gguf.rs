//! The GGUF reader (`nn/gguf.rs`) against tests/fixtures/gguf/small.gguf, written by llama.cpp's
//! `gguf` package (tools/gen_gguf_fixture.py): the metadata of every value type, and each tensor
//! type's values equal to what `gguf.quants.dequantize` gives; every truncation of the file and
//! corrupt headers give `Error::Format`.

use std::path::PathBuf;

use lazygrad::nn::gguf::{gguf_load, gguf_weights, parse_header, GgmlType, GgufValue};
use lazygrad::nn::quantized::{QuantizedTensor, Weight};
use lazygrad::nn::state::safe_load;
use lazygrad::tensor::Tensor;
use lazygrad::uop::Sint;
use lazygrad::{DType, Error};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf").join(name)
}

#[test]
fn metadata_of_every_value_type_reads_back() {
    let bytes = std::fs::read(fixture("small.gguf")).unwrap();
    let header = parse_header(&bytes).unwrap();
    assert_eq!(header.version, 3);
    let m = &header.metadata;
    assert_eq!(m["general.architecture"].as_str(), Some("llama"));
    assert_eq!(m["test.u32"], GgufValue::U32(123456));
    assert_eq!(m["test.i32"], GgufValue::I32(-42));
    assert_eq!(m["test.f32"], GgufValue::F32(0.5));
    assert_eq!(m["test.u64"].as_int(), Some(1 << 40));
    assert_eq!(m["test.bool"], GgufValue::Bool(true));
    assert_eq!(m["test.string"].as_str(), Some("héllo gguf"));
    let strings = ["a", "bc", ""].map(|s| GgufValue::Str(s.into())).to_vec();
    assert_eq!(m["test.strings"], GgufValue::Array(strings));
    assert_eq!(m["test.ints"], GgufValue::Array(vec![GgufValue::I32(1), GgufValue::I32(-2), GgufValue::I32(3)]));
    let types: Vec<(&str, GgmlType, Vec<usize>)> =
        header.tensors.iter().map(|t| (t.name.as_str(), t.ggml_type, t.shape.clone())).collect();
    assert_eq!(types[0], ("f32", GgmlType::F32, vec![3, 5]), "shapes row-major: GGUF lists dims innermost first");
    assert_eq!(types[7], ("q6_k", GgmlType::Q6K, vec![1, 512]));
}

#[test]
fn every_tensor_type_dequantizes_to_ggmls_values() {
    let (_, tensors) = gguf_load(fixture("small.gguf")).unwrap();
    let expected = safe_load(fixture("small.expected.safetensors")).unwrap();
    assert_eq!(tensors.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    for (name, want) in &expected {
        let got = &tensors[name];
        assert_eq!(got.shape(), want.shape(), "{name}");
        let native = match name.as_str() {
            "f32" => DType::FLOAT32,
            "f16" => DType::FLOAT16,
            "bf16" => DType::BFLOAT16,
            _ => DType::FLOAT32,
        };
        assert_eq!(got.dtype(), native, "{name}: plain types as stored, quantized ones as float32");
        let (got, want) = (got.cast(DType::FLOAT32).to_vec::<f32>(), want.to_vec::<f32>());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "{name}[{i}]: {g}, ggml gives {w}");
        }
    }
}

#[test]
fn quantized_weights_multiply_as_their_ggml_values() {
    // Q8_0, Q4_0 and Q4_1 stay quantized: `linear` of one row and of 3 (the fused product) and
    // of 20 (the weight dequantized first) is x @ w.T over ggml's values, and `rows` are theirs;
    // so on two devices, the weight whole on each or split along its rows or its columns
    let (_, mut weights) = gguf_weights(fixture("small.gguf")).unwrap();
    let expected = safe_load(fixture("small.expected.safetensors")).unwrap();
    let devices = ["CPU", "CPU:1"];
    for name in ["q8_0", "q4_0", "q4_1"] {
        let Weight::Quantized(q) = weights.remove(name).unwrap().realize() else {
            panic!("{name} is not kept quantized")
        };
        let want = expected[name].to_vec::<f32>();
        let [out, cols] = [q.shape()[0], q.shape()[1]];
        let check = |q: &QuantizedTensor, how: &str, device: &str| {
            for rows in [1, 3, 20] {
                let xv: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
                let x = Tensor::from_vec(xv.clone(), &[rows, cols]).to(device);
                let got = q.linear(&x).to_vec::<f32>();
                for (r, o) in (0..rows).flat_map(|r| (0..out).map(move |o| (r, o))) {
                    let exact: f64 = (0..cols).map(|c| xv[r * cols + c] as f64 * want[o * cols + c] as f64).sum();
                    let g = got[r * out + o] as f64;
                    let close = (g - exact).abs() <= 1e-5 * (1.0 + exact.abs());
                    assert!(close, "{name} {how}: x[{r}] . w[{o}] = {g}, want {exact}");
                }
            }
            // a row of a matrix split along its rows is a shrink of the split axis: refused
            if !how.ends_with("axis 0") {
                let last = q.rows(Sint::Int(out - 1), Sint::Int(out)).to_vec::<f32>();
                assert_eq!(last, want[(out - 1) * cols..], "{name} {how}: last row");
            }
            assert_eq!(q.dequantize().to_vec::<f32>(), want, "{name} {how}: dequantized");
        };
        check(&q, "on one device", "CPU");
        check(&q.try_shard(&devices, None).unwrap(), "whole on two devices", "CPU,CPU:1");
        // q4_0 is 3 rows of one block: neither splits in two
        for (axis, count) in [(0, out), (1, cols / 32)] {
            match q.try_shard(&devices, Some(axis)) {
                Ok(split) => check(&split, &format!("split along axis {axis}"), "CPU,CPU:1"),
                Err(e) => {
                    assert_eq!(count % 2, 1, "{name} along {axis}: {e}");
                    assert!(matches!(e, Error::Shape { op: "shard", .. }), "{name} along {axis}: {e}");
                }
            }
        }
    }
}

#[test]
fn every_truncation_and_corrupt_header_is_a_format_error() {
    let bytes = std::fs::read(fixture("small.gguf")).unwrap();
    // the last tensor's data (q6_k's 420 bytes, at 800 of the data section, which starts at
    // 704) ends before the file's final alignment padding
    let data_end = 704 + 800 + 420;
    for len in 0..bytes.len() {
        match (parse_header(&bytes[..len]), len < data_end) {
            (Err(Error::Format(_)), true) | (Ok(_), false) => {}
            (other, _) => panic!("truncated to {len} bytes: {other:?}"),
        }
    }
    let corrupt = |at: usize, with: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + with.len()].copy_from_slice(with);
        parse_header(&b).map(|_| ())
    };
    let cases: [(&str, usize, &[u8]); 5] = [
        ("magic", 0, b"GGUG"),
        ("version 1", 4, &1u32.to_le_bytes()),
        ("a tensor count of 2^60", 8, &(1u64 << 60).to_le_bytes()),
        ("a metadata count of 2^60", 16, &(1u64 << 60).to_le_bytes()),
        ("a key length of 2^63", 24, &(1u64 << 63).to_le_bytes()),
    ];
    for (what, at, with) in cases {
        match corrupt(at, with) {
            Err(Error::Format(m)) => assert!(m.starts_with("GGUF"), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // a file whose tensor lies past its end, through gguf_load: the error names the file
    let path = std::env::temp_dir().join(format!("lazygrad-truncated-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes[..data_end - 1]).unwrap();
    let loaded = gguf_load(&path).map(|_| ());
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(&loaded, Err(Error::Format(m)) if m.contains("lazygrad-truncated")), "{loaded:?}");
}

/// A GGUF file (version 3, default alignment) of `kvs` (u32 values) and `tensors` (name, dims
/// innermost first, ggml type id, data offset), with `data` bytes of tensor data.
fn gguf_file(kvs: &[(&str, u32)], tensors: &[(&str, &[u64], u32, u64)], data: usize) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    let string = |b: &mut Vec<u8>, s: &str| {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    };
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kvs.len() as u64).to_le_bytes());
    for (key, value) in kvs {
        string(&mut b, key);
        b.extend(4u32.to_le_bytes());
        b.extend(value.to_le_bytes());
    }
    for (name, dims, ty, offset) in tensors {
        string(&mut b, name);
        b.extend((dims.len() as u32).to_le_bytes());
        dims.iter().for_each(|d| b.extend(d.to_le_bytes()));
        b.extend(ty.to_le_bytes());
        b.extend(offset.to_le_bytes());
    }
    b.resize(b.len().next_multiple_of(32) + data, 0);
    b
}

/// Files that lie about their structure loaded without error: a duplicate tensor name dropped
/// one of the two, a duplicate metadata key kept the last value, rows of quantized tensors that
/// are no whole blocks dequantized blocks across rows, and two tensors could share their data.
#[test]
fn files_that_lie_about_their_structure_are_format_errors() {
    const F32: u32 = 0;
    const Q8_0: u32 = 8;
    let good = gguf_file(&[("a", 1), ("b", 2)], &[("x", &[4, 2], F32, 0), ("y", &[64], Q8_0, 32)], 32 + 68);
    parse_header(&good).expect("a well-formed file");
    let lies: [(&str, Vec<u8>, &str); 4] = [
        ("a key twice", gguf_file(&[("a", 1), ("a", 2)], &[], 0), "`a` appears twice"),
        ("a name twice", gguf_file(&[], &[("x", &[4], F32, 0), ("x", &[4], F32, 32)], 48), "`x` appears twice"),
        ("rows of 48 in blocks of 32", gguf_file(&[], &[("q", &[48, 2], Q8_0, 0)], 102), "not whole blocks of 32"),
        ("shared data", gguf_file(&[], &[("x", &[8], F32, 0), ("y", &[8], F32, 0)], 32), "overlap"),
    ];
    for (what, bytes, says) in lies {
        match parse_header(&bytes) {
            Err(Error::Format(m)) => assert!(m.contains(says), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}
