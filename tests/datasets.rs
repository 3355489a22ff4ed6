//! IDX parsing (raw and gzipped, valid and corrupt), the MNIST search order, downloads through
//! `fetch` from `file://` URLs and from a loopback HTTP server (no internet needed; HTTP needs curl
//! or wget, which `tools/setup.sh` installs, and fails without them), MNIST downloads from
//! `file://` mirrors, and the real Fashion-MNIST system package (an ignored test: run it with
//! `--ignored` after `tools/setup.sh --demo`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::TempDir;
use flate2::write::GzEncoder;
use flate2::Compression;
use lazygrad::helpers::cache::sha256_hex;
use lazygrad::helpers::fetch::{download, fetch_with, md5_hex, Checksum, FetchOptions};
use lazygrad::nn::datasets::{mnist_from_dir, parse_idx, read_idx, MnistSearch, FASHION_SYSTEM_DIR, MNIST_FILES};
use lazygrad::runtime::default_device;
use lazygrad::{DType, Error};

/// An IDX file: type code, dims, big-endian element bytes.
fn idx(code: u8, dims: &[u32], data_be: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, code, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&d.to_be_bytes());
    }
    out.extend_from_slice(data_be);
    out
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn format_err<T: std::fmt::Debug>(r: lazygrad::Result<T>, what: &str) -> String {
    match r {
        Err(Error::Format(m)) => m,
        other => panic!("{what}: expected a format error, got {other:?}"),
    }
}

#[test]
fn parses_every_idx_type_raw_and_gzipped() {
    let dir = TempDir::new("types");
    let i16s: Vec<u8> = [1i16, -2, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
    let i32s: Vec<u8> = [7i32, -70000].iter().flat_map(|v| v.to_be_bytes()).collect();
    let f32s: Vec<u8> = [1.5f32, -0.25, f32::MAX, 0.0].iter().flat_map(|v| v.to_be_bytes()).collect();
    let f64s: Vec<u8> = [std::f64::consts::PI].iter().flat_map(|v| v.to_be_bytes()).collect();
    let cases = [
        (idx(0x08, &[2, 3], &[0, 1, 2, 253, 254, 255]), DType::UINT8, vec![2, 3]),
        (idx(0x09, &[2], &[0x80, 0x7f]), DType::INT8, vec![2]),
        (idx(0x0B, &[3], &i16s), DType::INT16, vec![3]),
        (idx(0x0C, &[1, 2], &i32s), DType::INT32, vec![1, 2]),
        (idx(0x0D, &[2, 2], &f32s), DType::FLOAT32, vec![2, 2]),
        (idx(0x0E, &[1, 1, 1], &f64s), DType::FLOAT64, vec![1, 1, 1]),
        (idx(0x08, &[0, 28], &[]), DType::UINT8, vec![0, 28]),
    ];
    for (i, (file, dtype, dims)) in cases.iter().enumerate() {
        let raw = parse_idx(&file[..]).unwrap();
        assert_eq!((raw.dtype, &raw.dims), (*dtype, dims));
        for (name, bytes) in [(format!("{i}.idx"), file.clone()), (format!("{i}.idx.gz"), gz(file))] {
            let p = dir.path(&name);
            std::fs::write(&p, bytes).unwrap();
            assert_eq!(read_idx(&p).unwrap(), raw, "{name}");
        }
    }
    let dev = default_device();
    let t = |i: usize| parse_idx(&cases[i].0[..]).unwrap().to_tensor(&dev).unwrap();
    assert_eq!(t(0).to_vec::<u8>(), vec![0, 1, 2, 253, 254, 255]);
    assert_eq!(t(1).to_vec::<i8>(), vec![-128, 127]);
    assert_eq!(t(2).to_vec::<i16>(), vec![1, -2, 300]);
    assert_eq!(t(3).to_vec::<i32>(), vec![7, -70000]);
    assert_eq!(t(4).to_vec::<f32>(), vec![1.5, -0.25, f32::MAX, 0.0]);
    assert_eq!(t(5).to_vec::<f64>(), vec![std::f64::consts::PI]);
    assert_eq!(t(6).shape(), vec![0, 28]);
}

#[test]
fn corrupt_idx_files_are_errors() {
    let good = idx(0x08, &[2, 2], &[1, 2, 3, 4]);
    let mut bad_magic = good.clone();
    bad_magic[0] = 1;
    let mut bad_type = good.clone();
    bad_type[2] = 0x0A;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "truncated"),
        ("short magic", vec![0, 0, 8], "truncated"),
        ("bad magic", bad_magic, "magic"),
        ("bad type", bad_type, "type code 0x0a"),
        ("no dims", vec![0, 0, 8, 0], "zero dimensions"),
        ("truncated dims", vec![0, 0, 8, 2, 0, 0, 0, 2, 0], "truncated"),
        ("truncated data", idx(0x08, &[2, 2], &[1, 2, 3]), "need 4 bytes of data, found 3"),
        ("trailing data", idx(0x08, &[2, 2], &[1, 2, 3, 4, 5]), "trailing"),
        ("huge dims", idx(0x0E, &[u32::MAX, u32::MAX, u32::MAX], &[]), "more than"),
        ("huge, short", idx(0x08, &[60000, 28, 28], &[0; 100]), "need 47040000 bytes"),
    ];
    let dir = TempDir::new("corrupt");
    for (what, bytes, needle) in &cases {
        let msg = format_err(parse_idx(&bytes[..]), what);
        assert!(msg.contains(needle), "{what}: {msg:?} lacks {needle:?}");
        // The same through a file, raw and gzipped; messages name the file.
        for (name, data) in [(format!("{what}.raw"), bytes.clone()), (format!("{what}.gz"), gz(bytes))] {
            let p = dir.path(&name);
            std::fs::write(&p, data).unwrap();
            let msg = format_err(read_idx(&p), &name);
            assert!(msg.contains(&name), "{name}: {msg}");
        }
    }
    // Broken gzip: cut short, and a flipped CRC.
    let z = gz(&good);
    for (what, data) in [
        ("cut", z[..z.len() - 6].to_vec()),
        ("cut early", z[..12].to_vec()),
        ("crc", {
            let mut c = z.clone();
            let n = c.len();
            c[n - 6] ^= 0xff;
            c
        }),
    ] {
        let p = dir.path(&format!("{what}.gz"));
        std::fs::write(&p, data).unwrap();
        format_err(read_idx(&p), what);
    }
    assert!(matches!(read_idx(dir.path("nope")), Err(Error::Io(_))));
}

/// Write a tiny MNIST-shaped data set (`n_train`, `n_test` images) into `dir`.
fn write_mnist(dir: &Path, n_train: u32, n_test: u32, gzipped: bool, seed: u8) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, stem) in MNIST_FILES.iter().enumerate() {
        let n = if i < 2 { n_train } else { n_test };
        let data = if i % 2 == 0 {
            let px: Vec<u8> = (0..n * 784).map(|p| (p as u8).wrapping_mul(7).wrapping_add(seed)).collect();
            idx(0x08, &[n, 28, 28], &px)
        } else {
            let labels: Vec<u8> = (0..n).map(|l| ((l + seed as u32) % 10) as u8).collect();
            idx(0x08, &[n], &labels)
        };
        let (name, bytes) = if gzipped { (format!("{stem}.gz"), gz(&data)) } else { (stem.to_string(), data) };
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

fn search(cache: &Path) -> MnistSearch {
    MnistSearch {
        fashion: false,
        env_dir: None,
        cache_dir: cache.to_path_buf(),
        system_dir: None,
        mirrors: vec![],
        md5: None,
        device: default_device(),
    }
}

#[test]
fn mnist_from_a_folder_raw_or_gzipped() {
    let dir = TempDir::new("folder");
    for gzipped in [false, true] {
        let d = dir.path(if gzipped { "gz" } else { "raw" });
        write_mnist(&d, 5, 3, gzipped, 1);
        let m = mnist_from_dir(&d, &default_device()).unwrap();
        assert_eq!(m.x_train.shape(), vec![5, 1, 28, 28]);
        assert_eq!(m.x_train.dtype(), DType::UINT8);
        assert_eq!(m.y_train.shape(), vec![5]);
        assert_eq!(m.y_train.dtype(), DType::UINT8);
        assert_eq!(m.x_test.shape(), vec![3, 1, 28, 28]);
        assert_eq!(m.y_test.to_vec::<u8>(), vec![1, 2, 3]);
        assert_eq!(&m.x_train.to_vec::<u8>()[..3], &[1, 8, 15]);
    }
}

#[test]
fn mnist_checks_what_it_loads() {
    let dir = TempDir::new("checks");
    let cases: [(&str, usize, Vec<u8>, &str); 4] = [
        ("label 10", 1, idx(0x08, &[2], &[3, 10]), "label 10"),
        ("wrong image size", 0, idx(0x08, &[2, 28, 27], &[0; 2 * 28 * 27]), "[N, 28, 28]"),
        ("count mismatch", 1, idx(0x08, &[3], &[1, 2, 3]), "holds 2 images but"),
        ("int labels", 3, idx(0x0C, &[1], &[0, 0, 0, 1]), "uint8 labels"),
    ];
    for (what, file, data, needle) in cases {
        let d = dir.path(what);
        write_mnist(&d, 2, 1, false, 0);
        std::fs::write(d.join(MNIST_FILES[file]), data).unwrap();
        let msg = format_err(mnist_from_dir(&d, &default_device()), what);
        assert!(msg.contains(needle), "{what}: {msg}");
    }
}

#[test]
fn search_order_env_then_cache_then_system() {
    let dir = TempDir::new("order");
    let (env, cache, system) = (dir.path("env"), dir.path("cache"), dir.path("system"));
    write_mnist(&env, 2, 1, true, 1);
    write_mnist(&cache, 3, 1, false, 2);
    write_mnist(&system, 4, 1, true, 3);
    let mut s = search(&cache);
    s.system_dir = Some(system.clone());
    s.env_dir = Some(("MNIST_DIR".into(), env.clone()));
    assert_eq!(s.load().unwrap().y_train.shape(), vec![2], "the env var's folder comes first");
    s.env_dir = None;
    assert_eq!(s.load().unwrap().y_train.shape(), vec![3], "then the cache");
    std::fs::remove_file(cache.join(MNIST_FILES[0])).unwrap();
    assert_eq!(s.load().unwrap().y_train.shape(), vec![4], "then the system install");
    // A set env var is authoritative: a broken folder is an error, not skipped.
    s.env_dir = Some(("MNIST_DIR".into(), dir.path("missing")));
    let msg = s.load().unwrap_err().to_string();
    assert!(msg.contains("$MNIST_DIR=") && msg.contains("unset it"), "{msg}");
}

#[test]
fn cached_files_are_checked_against_the_published_md5_sums() {
    // the standard search knows MNIST's sums (the .gz files', and the raw digit files' that
    // tools/setup.sh --demo installs): a damaged cache is passed over, and the reason listed
    let dir = TempDir::new("md5");
    let (cache, system) = (dir.path("cache"), dir.path("system"));
    write_mnist(&cache, 3, 1, false, 2);
    write_mnist(&system, 4, 1, true, 3);
    let mut s = search(&cache);
    s.system_dir = Some(system);
    assert_eq!(s.load().unwrap().y_train.shape(), vec![3], "no sums: the cache is used");
    s.md5 = MnistSearch::new(false).md5;
    assert_eq!(s.load().unwrap().y_train.shape(), vec![4], "a raw file that is not MNIST's is passed over");
    std::fs::remove_dir_all(dir.path("system")).unwrap();
    let msg = s.load().unwrap_err().to_string();
    assert!(msg.contains("MD5 differs from the published 6bbc9ace898e44ae57da46a324031adb"), "{msg}");
}

#[test]
#[ignore = "needs the MNIST digits in the user cache (tools/setup.sh --demo installs them); run with --ignored"]
fn mnist_digits_from_the_user_cache() {
    let mut s = MnistSearch::new(false);
    s.env_dir = None;
    s.mirrors = vec![];
    let m = s.load().unwrap();
    assert_eq!(m.x_train.shape(), vec![60000, 1, 28, 28]);
    assert_eq!(m.x_test.shape(), vec![10000, 1, 28, 28]);
    let mut counts = [0usize; 10];
    m.y_test.to_vec::<u8>().iter().for_each(|&l| counts[l as usize] += 1);
    // MNIST's test set: 980 zeros, 1135 ones, ... (its published class counts)
    assert_eq!(counts, [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]);
}

#[test]
fn nothing_found_lists_what_was_tried() {
    let dir = TempDir::new("none");
    let cache = dir.path("cache");
    write_mnist(&cache, 2, 1, false, 0);
    std::fs::remove_file(cache.join(MNIST_FILES[3])).unwrap();
    let mut s = search(&cache);
    s.fashion = true;
    s.system_dir = Some(dir.path("not-installed"));
    let e = s.load().unwrap_err();
    assert!(matches!(e, Error::Io(ref io) if io.kind() == std::io::ErrorKind::NotFound));
    let msg = e.to_string();
    for needle in [
        "Fashion-MNIST data set not found",
        "1. $FASHION_MNIST_DIR: not set",
        "2. the user cache",
        "missing t10k-labels-idx1-ubyte[.gz]",
        "3. the system install",
        "4. a download",
        "apt-get install dataset-fashion-mnist",
    ] {
        assert!(msg.contains(needle), "message lacks {needle:?}:\n{msg}");
    }
    s.fashion = false;
    s.system_dir = None;
    let msg = s.load().unwrap_err().to_string();
    assert!(msg.contains("MNIST data set not found") && msg.contains("$MNIST_DIR: not set"), "{msg}");
    assert!(msg.contains("no Debian package ships the MNIST digits"), "{msg}");
}

// ---- downloads over loopback -----------------------------------------------------------------

/// A tiny HTTP/1.1 server on 127.0.0.1 serving `files` (path -> body), `/moved/<x>` as a 302 to
/// `/<x>`, and 404 otherwise; counts requests. Stops when the test process ends.
struct Server {
    base: String,
    hits: Arc<AtomicUsize>,
}

fn serve(files: Vec<(String, Vec<u8>)>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(200) {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) && line.trim() != "" {
                line.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            let response = if let Some(rest) = path.strip_prefix("/moved/") {
                format!("HTTP/1.1 302 Found\r\nLocation: /{rest}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .into_bytes()
            } else if let Some((_, body)) = files.iter().find(|(p, _)| *p == path) {
                let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
                    .into_bytes();
                r.extend_from_slice(body);
                r
            } else {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found".to_vec()
            };
            let _ = stream.write_all(&response);
        }
    });
    Server { base, hits }
}

/// Panics unless curl or wget is installed: `fetch` runs one of them for HTTP.
fn require_curl_or_wget() {
    let ok =
        |t: &str| std::process::Command::new(t).arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok("curl") || ok("wget"), "downloads over HTTP need curl or wget: run tools/setup.sh (it installs curl)");
}

#[test]
fn fetch_downloads_once_and_checks_sums() {
    require_curl_or_wget();
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let server = serve(vec![("/data.bin".into(), body.clone())]);
    let dir = TempDir::new("fetch");
    let url = format!("{}/data.bin", server.base);
    let opts = FetchOptions {
        name: Some("data.bin".into()),
        subdir: Some("sub".into()),
        checksum: Some(Checksum::Sha256(sha256_hex(&body))),
        root: Some(dir.0.clone()),
    };
    let path = fetch_with(&url, &opts).unwrap();
    assert_eq!(path, dir.path("sub/data.bin"));
    assert_eq!(std::fs::read(&path).unwrap(), body);
    let hits = server.hits.load(Ordering::SeqCst);
    assert_eq!(fetch_with(&url, &opts).unwrap(), path);
    assert_eq!(server.hits.load(Ordering::SeqCst), hits, "a cached file is not downloaded again");
    // Default name: the MD5 of the URL. Redirects are followed.
    let moved = format!("{}/moved/data.bin", server.base);
    let p = fetch_with(&moved, &FetchOptions { root: Some(dir.0.clone()), ..Default::default() }).unwrap();
    assert_eq!(p, dir.path(&md5_hex(moved.as_bytes())));
    assert_eq!(std::fs::read(&p).unwrap(), body);
    // A wrong checksum is an error and leaves nothing behind.
    let dest = dir.path("bad/data.bin");
    let e = download(&url, &dest, Some(&Checksum::Md5("0".repeat(32)))).unwrap_err();
    assert!(matches!(e, Error::Format(ref m) if m.contains("checksum mismatch")), "{e}");
    assert!(std::fs::read_dir(dir.path("bad")).unwrap().next().is_none(), "no partial file may remain");
    // 404 and a refused connection are errors that say what failed.
    let e = download(&format!("{}/missing", server.base), &dest, None).unwrap_err().to_string();
    assert!(e.contains("/missing") && e.contains("404"), "{e}");
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let e = download(&format!("http://{closed}/x"), &dest, None).unwrap_err().to_string();
    assert!(e.contains("download of http://") && e.contains("failed"), "{e}");
    assert!(!dest.exists());
    // A corrupt cached file (wrong checksum) is fetched again.
    std::fs::write(&path, b"garbage").unwrap();
    assert_eq!(std::fs::read(fetch_with(&url, &opts).unwrap()).unwrap(), body);
}

#[test]
fn fetch_copies_file_urls_once_and_checks_sums() {
    let dir = TempDir::new("file-url");
    let src = dir.path("src.bin");
    std::fs::write(&src, b"local").unwrap();
    let local = format!("file://{}", src.display());
    let opts = FetchOptions {
        name: Some("local".into()),
        checksum: Some(Checksum::Sha256(sha256_hex(b"local"))),
        root: Some(dir.0.clone()),
        ..Default::default()
    };
    let p = fetch_with(&local, &opts).unwrap();
    assert_eq!(p, dir.path("local"));
    assert_eq!(std::fs::read(&p).unwrap(), b"local");
    // The cached copy answers while its checksum holds; a corrupt one is copied again.
    std::fs::write(&src, b"changed").unwrap();
    let p = fetch_with(&local, &FetchOptions { checksum: None, ..opts.clone() }).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"local", "a cached file is not fetched again");
    std::fs::write(&src, b"local").unwrap();
    std::fs::write(&p, b"garbage").unwrap();
    assert_eq!(std::fs::read(fetch_with(&local, &opts).unwrap()).unwrap(), b"local");
    // A wrong checksum or a missing source is an error and leaves nothing behind.
    let dest = dir.path("bad/local");
    let e = download(&local, &dest, Some(&Checksum::Md5("0".repeat(32)))).unwrap_err();
    assert!(matches!(e, Error::Format(ref m) if m.contains("checksum mismatch")), "{e}");
    let e = download(&format!("file://{}", dir.path("missing").display()), &dest, None).unwrap_err();
    assert!(matches!(e, Error::Io(ref io) if io.kind() == std::io::ErrorKind::NotFound), "{e}");
    assert!(std::fs::read_dir(dir.path("bad")).unwrap().next().is_none(), "no partial file may remain");
    let e = download("ftp://example.invalid/x", &dest, None).unwrap_err().to_string();
    assert!(e.contains("unsupported URL"), "{e}");
}

#[test]
fn mnist_downloads_into_the_cache_with_md5_checks() {
    let dir = TempDir::new("download");
    let mirror = dir.path("mirror");
    write_mnist(&mirror, 4, 2, true, 5);
    let md5: [String; 4] =
        std::array::from_fn(|i| md5_hex(&std::fs::read(mirror.join(format!("{}.gz", MNIST_FILES[i]))).unwrap()));
    let cache = dir.path("cache");
    let mut s = search(&cache);
    // The first mirror lacks the files; the second has them.
    s.mirrors = vec![format!("file://{}", dir.path("nothing-here").display()), format!("file://{}/", mirror.display())];
    s.md5 = Some(md5.clone());
    let m = s.load().unwrap();
    assert_eq!(m.y_train.to_vec::<u8>(), vec![5, 6, 7, 8]);
    assert_eq!(m.x_test.shape(), vec![2, 1, 28, 28]);
    for stem in MNIST_FILES {
        assert!(cache.join(format!("{stem}.gz")).is_file());
    }
    // Wrong published checksums: the download fails and says so.
    let mut bad = search(&dir.path("cache2"));
    bad.mirrors = vec![format!("file://{}", mirror.display())];
    let mut wrong = md5;
    wrong[1] = "0".repeat(32);
    bad.md5 = Some(wrong);
    let msg = bad.load().unwrap_err().to_string();
    assert!(msg.contains("4. a download into the cache") && msg.contains("checksum mismatch"), "{msg}");
    // Next time the cache answers without the mirror.
    std::fs::remove_dir_all(&mirror).unwrap();
    assert_eq!(s.load().unwrap().y_train.to_vec::<u8>(), vec![5, 6, 7, 8]);
}

#[test]
fn the_standard_search_looks_in_the_documented_places() {
    for fashion in [false, true] {
        let s = MnistSearch::new(fashion);
        let sub = if fashion { "fashion-mnist" } else { "mnist" };
        assert!(s.cache_dir.ends_with(Path::new("datasets").join(sub)), "{:?}", s.cache_dir);
        assert_eq!(s.system_dir, fashion.then(|| Path::new(FASHION_SYSTEM_DIR).to_path_buf()));
        assert!(!s.mirrors.is_empty() && s.mirrors.iter().all(|m| m.starts_with("http")), "{:?}", s.mirrors);
        assert!(s.md5.as_ref().is_some_and(|m| m.iter().all(|h| h.len() == 32)));
    }
}

#[test]
#[ignore = "needs Debian's dataset-fashion-mnist (tools/setup.sh --demo installs it); run with --ignored"]
fn fashion_mnist_from_the_debian_package() {
    let dir = Path::new(FASHION_SYSTEM_DIR);
    assert!(
        dir.join("train-images-idx3-ubyte.gz").is_file(),
        "{FASHION_SYSTEM_DIR} is not there: apt-get install dataset-fashion-mnist (or tools/setup.sh --demo)"
    );
    let empty = TempDir::new("fashion");
    let mut s = search(&empty.path("cache"));
    s.fashion = true;
    s.system_dir = Some(dir.to_path_buf());
    let m = s.load().unwrap();
    assert_eq!(m.x_train.shape(), vec![60000, 1, 28, 28]);
    assert_eq!(m.x_test.shape(), vec![10000, 1, 28, 28]);
    for (labels, per_class) in [(&m.y_train, 6000), (&m.y_test, 1000)] {
        let mut counts = [0usize; 10];
        labels.to_vec::<u8>().iter().for_each(|&l| counts[l as usize] += 1);
        assert_eq!(counts, [per_class; 10], "Fashion-MNIST is balanced");
    }
    let px = m.x_test.to_vec::<u8>();
    assert!(px.contains(&255) && px.contains(&0));
}
