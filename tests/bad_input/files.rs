//! What comes from files and the network: state dicts, safetensors, raw bytes, IDX and gzip
//! files, the MNIST search, downloads. Every failure is an `Err` naming the file and the fault.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use lazygrad::helpers::fetch::{download, fetch_with, Checksum, FetchOptions};
use lazygrad::nn::datasets::{mnist_from_dir, parse_idx, read_idx, MnistSearch, MNIST_FILES};
use lazygrad::nn::layers::Linear;
use lazygrad::nn::state::{
    get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save, tensor_from_bytes,
};
use lazygrad::{DType, Error, Tensor};

use crate::common::TempDir;
use crate::{err_with, interp};

#[track_caller]
fn is_format<T: std::fmt::Debug>(needles: &[&str], r: lazygrad::Result<T>) {
    let e = err_with(needles, r);
    assert!(matches!(e, Error::Format(_)), "expected a format error, got {e:?}");
}

#[track_caller]
fn is_io<T: std::fmt::Debug>(needles: &[&str], r: lazygrad::Result<T>) {
    let e = err_with(needles, r);
    assert!(matches!(e, Error::Io(_)), "expected an io error, got {e:?}");
}

#[test]
fn load_state_dict_checks_keys_and_shapes_before_writing() {
    let _d = interp();
    let layer = Linear::new(3, 2, true);
    let before = layer.weight.to_vec::<f32>();
    let mut state: BTreeMap<String, Tensor> = get_state_dict(&layer);
    state.insert("weight".into(), Tensor::ones(&[3, 2]));
    state.insert("extra".into(), Tensor::ones(&[1]));
    state.remove("bias");
    let e = err_with(
        &[
            "missing",
            "\"bias\"",
            "\"extra\"",
            "Shape mismatch in layer `weight`: Expected shape (2, 3), but found (3, 2)",
        ],
        load_state_dict(&layer, &state, true),
    );
    assert!(matches!(e, Error::Value { op: "load_state_dict", .. }), "{e:?}");
    err_with(&["wrong shape", "`weight`"], load_state_dict(&layer, &state, false));
    assert_eq!(layer.weight.to_vec::<f32>(), before, "nothing is written when loading fails");
    state.insert("weight".into(), Tensor::full(&[2, 3], 7).cast(DType::INT32));
    err_with(&["1 key missing", "\"bias\""], load_state_dict(&layer, &state, true));
    load_state_dict(&layer, &state, false).unwrap();
    assert_eq!(layer.weight.to_vec::<f32>(), [7.0; 6], "non-strict loads what fits, cast to the model's dtype");
}

/// A safetensors file: the header's length, the header, `data` zero bytes.
fn safetensors(dir: &TempDir, name: &str, header_len: u64, header: &str, data: usize) -> PathBuf {
    let mut bytes = header_len.to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    let path = dir.path(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn safetensors_loading_reports_corrupt_files() {
    let _d = interp();
    let dir = TempDir::new("safetensors");
    let file = |name: &str, header: &str, data: usize| safetensors(&dir, name, header.len() as u64, header, data);
    is_io(&["missing.safetensors"], safe_load(dir.path("missing.safetensors")));
    let short = dir.path("short");
    std::fs::write(&short, b"abc").unwrap();
    is_format(&["short", "3 bytes", "too short"], safe_load(&short));
    is_format(&["huge", "not a valid safetensors file"], safe_load(safetensors(&dir, "huge", u64::MAX, "{}", 0)));
    is_format(&["long", "not a valid safetensors file"], safe_load(safetensors(&dir, "long", 1 << 20, "{}", 0)));
    is_format(&["json", "not a valid safetensors file"], safe_load(file("json", "{not json", 0)));
    let tensor = |dtype: &str, shape: &str, offsets: &str| {
        format!(r#"{{"w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#)
    };
    is_format(&["dtype", "not a valid"], safe_load(file("dtype", &tensor("Q7", "[2]", "[0,2]"), 2)));
    is_format(
        &["fp8", "tensor `w`", "lazygrad does not support"],
        safe_load(file("fp8", &tensor("F8_E4M3", "[2]", "[0,2]"), 2)),
    );
    is_format(&["past", "not a valid"], safe_load(file("past", &tensor("F32", "[4]", "[0,16]"), 8)));
    is_format(&["shape", "not a valid"], safe_load(file("shape", &tensor("F32", "[3]", "[0,8]"), 8)));
    is_format(&["backwards", "not a valid"], safe_load(file("backwards", &tensor("U8", "[0]", "[4,0]"), 4)));
    is_format(&["huge-shape", "not a valid"], {
        let huge = format!("[{},{}]", u64::MAX, u64::MAX);
        safe_load(file("huge-shape", &tensor("F32", &huge, "[0,4]"), 4))
    });
    is_format(&["meta", "not a valid"], safe_load_metadata(file("meta", "[1, 2]", 0)));
    let t = Tensor::ones(&[2]);
    is_io(&["no-such-folder"], safe_save([("t", &t)], dir.path("no-such-folder/x.safetensors")));
    err_with(&["safe_save", "`t`", "twice"], safe_save([("t", &t), ("t", &t)], dir.path("twice.safetensors")));
}

#[test]
fn tensor_from_bytes_checks_the_length() {
    let _d = interp();
    err_with(&["7 bytes", "float", "[2, 2]"], tensor_from_bytes(&[0; 7], &[2, 2], DType::FLOAT32, "INTERP"));
    err_with(
        &["4 bytes", "[18446744073709551615, 2]"],
        tensor_from_bytes(&[0; 4], &[usize::MAX, 2], DType::UINT8, "INTERP"),
    );
    err_with(&["unknown device \"NOPE\""], tensor_from_bytes(&[0; 4], &[1], DType::FLOAT32, "NOPE"));
}

/// An IDX file of uint8s: magic, dims (big-endian u32), data.
fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    dims.iter().for_each(|d| out.extend_from_slice(&d.to_be_bytes()));
    out.extend_from_slice(data);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn idx_parsing_reports_corrupt_and_truncated_files() {
    is_format(&["IDX", "truncated", "magic"], parse_idx(&[0u8, 0][..]));
    is_format(&["IDX", "bad magic", "[01, 02, 08, 01]"], parse_idx(&[1u8, 2, 8, 1, 0, 0, 0, 0][..]));
    is_format(&["IDX", "element type code 0x07"], parse_idx(&[0u8, 0, 7, 1, 0, 0, 0, 0][..]));
    is_format(&["IDX", "zero dimensions"], parse_idx(&[0u8, 0, 8, 0][..]));
    is_format(&["IDX", "truncated", "dimension sizes"], parse_idx(&[0u8, 0, 8, 2, 0, 0, 0, 1][..]));
    is_format(&["IDX", "truncated", "[2, 3]", "6 bytes", "found 4"], parse_idx(&idx(&[2, 3], &[1; 4])[..]));
    is_format(&["IDX", "trailing bytes"], parse_idx(&idx(&[2], &[1; 3])[..]));
    let huge = idx(&[u32::MAX, u32::MAX, u32::MAX], &[]);
    is_format(&["IDX", "[4294967295, 4294967295, 4294967295]", "more than"], parse_idx(&huge[..]));

    let dir = TempDir::new("idx");
    is_io(&["missing.idx"], read_idx(dir.path("missing.idx")));
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = gzip(&idx(&[2, 3], &[1; 6]));
    assert_eq!(read_idx(write("good.gz", &good)).unwrap().dims, [2, 3]);
    is_format(&["truncated.gz"], read_idx(write("truncated.gz", &good[..good.len() / 2])));
    let mut flipped = good.clone();
    let crc = flipped.len() - 8;
    flipped[crc] ^= 0xff;
    is_format(&["crc.gz"], read_idx(write("crc.gz", &flipped)));
    is_format(&["garbage.gz"], read_idx(write("garbage.gz", &[0x1f, 0x8b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])));
    is_format(&["inner.gz", "truncated"], read_idx(write("inner.gz", &gzip(&idx(&[2, 3], &[1; 5])))));
}

#[test]
fn mnist_loading_reports_missing_and_wrong_files() {
    let _d = interp();
    let dir = TempDir::new("mnist");
    is_io(&["no such folder"], mnist_from_dir(dir.path("absent"), "INTERP"));
    is_io(
        &["missing", "train-images-idx3-ubyte[.gz]", "t10k-labels-idx1-ubyte[.gz]"],
        mnist_from_dir(&dir.0, "INTERP"),
    );
    let write = |files: [Vec<u8>; 4]| {
        for (name, bytes) in MNIST_FILES.iter().zip(files) {
            std::fs::write(dir.path(name), bytes).unwrap();
        }
    };
    let images = |n: u32| idx(&[n, 28, 28], &vec![0; n as usize * 784]);
    let labels = |v: &[u8]| idx(&[v.len() as u32], v);
    write([idx(&[2, 28, 27], &[0; 2 * 28 * 27]), labels(&[1, 2]), images(1), labels(&[3])]);
    is_format(&["train-images-idx3-ubyte", "[N, 28, 28]", "[2, 28, 27]"], mnist_from_dir(&dir.0, "INTERP"));
    write([images(2), labels(&[1, 2, 3]), images(1), labels(&[3])]);
    is_format(&["2 images", "3 labels"], mnist_from_dir(&dir.0, "INTERP"));
    write([images(2), labels(&[1, 2]), images(1), labels(&[10])]);
    is_format(&["t10k-labels-idx1-ubyte", "label 10"], mnist_from_dir(&dir.0, "INTERP"));
    write([images(2), labels(&[1, 2]), images(1), labels(&[3])]);
    assert_eq!(mnist_from_dir(&dir.0, "INTERP").unwrap().x_train.shape(), [2, 1, 28, 28]);

    let mut search = MnistSearch::new(false);
    search.env_dir = Some(("MNIST_DIR".into(), dir.path("absent")));
    let e = err_with(&["$MNIST_DIR=", "absent", "can't be used", "unset it"], search.load());
    assert!(matches!(e, Error::Value { .. }), "{e:?}");
}

#[test]
fn downloads_report_bad_urls_names_and_checksums() {
    let dir = TempDir::new("fetch");
    let source = dir.path("source.bin");
    std::fs::write(&source, b"payload").unwrap();
    let url = format!("file://{}", source.display());
    is_io(&["absent.bin"], download(&format!("file://{}", dir.path("absent.bin").display()), &dir.path("a"), None));
    let md5 = Checksum::Md5("0".repeat(32));
    err_with(&["md5"], download(&url, &dir.path("b"), Some(&md5)));
    assert!(!dir.path("b").exists(), "a download that fails its check leaves nothing behind");
    let opts = |name: &str| FetchOptions { name: Some(name.into()), root: Some(dir.0.clone()), ..Default::default() };
    err_with(&["fetch", "\"../escape\"", "relative path"], fetch_with(&url, &opts("../escape")));
    err_with(&["fetch", "\"/abs\"", "relative path"], fetch_with(&url, &opts("/abs")));
    assert_eq!(std::fs::read(fetch_with(&url, &opts("ok.bin")).unwrap()).unwrap(), b"payload");
}
