//! Shared helpers for the integration tests: the numpy fixture reader (format in
//! `tools/gen_fixtures.py`), host-side arrays, tolerant comparison, the parser for case
//! expressions, a little-endian byte cursor and a self-removing temp folder.

// Each test crate that declares `mod common;` uses only part of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use lazygrad::runtime::default_device;
use lazygrad::{DType, Tensor};

/// The devices the suites run every case on: the compiled device under test (`DEV`, e.g. `CL`;
/// CPU when unset) and the INTERP oracle.
pub fn devices() -> [&'static str; 2] {
    static UNDER_TEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dev = UNDER_TEST.get_or_init(|| {
        std::env::var("DEV").map(|d| lazygrad::runtime::canonical_device(&d)).unwrap_or_else(|_| "CPU".into())
    });
    [dev.as_str(), "INTERP"]
}

/// Run `f` with each of `devices()` the default device in turn.
pub fn on_each_device(f: impl Fn(&str)) {
    for device in devices() {
        let _default = lazygrad::runtime::DefaultDevice::scoped(device);
        f(device);
    }
}

/// Whether `device` computes in `dtype`, as tinygrad's `is_dtype_supported` says: WebGPU has no
/// 64-bit types, so the suites run such cases only on the devices that have them (INTERP always).
pub fn supports(device: &str, dtype: DType) -> bool {
    lazygrad::runtime::get_device(device).map(|d| d.target().computes_in(dtype)).unwrap_or(true)
}

/// The devices of `devices()` that compute in every dtype of `dtypes`.
pub fn devices_for(dtypes: &[DType]) -> Vec<&'static str> {
    devices().into_iter().filter(|d| dtypes.iter().all(|t| supports(d, *t))).collect()
}

/// A host array: dtype, shape and row-major little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// One fixture case: an expression over `inputs` and numpy's result for it.
#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub group: String,
    /// The expression as the generator wrote it, and parsed.
    pub text: String,
    pub expr: Expr,
    pub tol: Tol,
    pub inputs: Vec<Array>,
    pub expected: Array,
}

/// Float tolerance: `|got - want| <= atol + rtol * |want|`. Integers and bools always compare exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tol {
    pub atol: f64,
    pub rtol: f64,
}

/// The dtype numpy calls `name`.
pub fn dtype_from_name(name: &str) -> DType {
    DType::from_name(name).unwrap_or_else(|| panic!("unknown dtype name {name:?}"))
}

/// A little-endian byte cursor over a binary fixture file; `what` names the file in panics.
pub struct Reader<'a> {
    data: &'a [u8],
    what: String,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8], what: &str) -> Reader<'a> {
        Reader { data, what: what.to_string(), pos: 0 }
    }
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        assert!(self.pos + n <= self.data.len(), "{} truncated at byte {}", self.what, self.pos);
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    pub fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take(2).try_into().unwrap())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    pub fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    /// A string: u16 byte length, then UTF-8.
    pub fn str(&mut self) -> String {
        let n = self.u16() as usize;
        String::from_utf8(self.take(n).to_vec()).unwrap_or_else(|_| panic!("{}: string is not UTF-8", self.what))
    }
    /// An array: dtype name, u8 ndim, u32 dims, u32 byte count, then the bytes.
    pub fn array(&mut self) -> Array {
        let name = self.str();
        let dtype = DType::from_name(&name).unwrap_or_else(|| panic!("{}: unknown dtype {name:?}", self.what));
        let ndim = self.u8() as usize;
        let shape: Vec<usize> = (0..ndim).map(|_| self.u32() as usize).collect();
        let n = self.u32() as usize;
        let bytes = self.take(n).to_vec();
        assert_eq!(n, shape.iter().product::<usize>() * dtype.itemsize(), "{}: array size mismatch", self.what);
        Array { dtype, shape, bytes }
    }
    /// Panic unless every byte has been read.
    pub fn finish(&self) {
        assert_eq!(self.pos, self.data.len(), "{}: trailing bytes", self.what);
    }
}

/// A deterministic stream of pseudo-random 64-bit values (xorshift) for test data.
pub fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    std::iter::repeat_with(move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// A fresh folder under the system temp dir (named after the test crate and `tag`), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lazygrad-{}-{tag}-{}-{}",
            env!("CARGO_CRATE_NAME"),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    /// `name` inside the folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Parse a fixture file.
pub fn parse_fixtures(data: &[u8]) -> Vec<Case> {
    let mut r = Reader::new(data, "fixture");
    assert_eq!(r.take(4), b"LGFX", "not a lazygrad fixture file");
    assert_eq!(r.u32(), 1, "unknown fixture version");
    let n = r.u32() as usize;
    let cases = (0..n)
        .map(|_| {
            let (name, group, text) = (r.str(), r.str(), r.str());
            let expr = parse_expr(&text).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let tol = Tol { atol: r.f64(), rtol: r.f64() };
            let inputs = (0..r.u8()).map(|_| r.array()).collect();
            Case { name, group, text, expr, tol, inputs, expected: r.array() }
        })
        .collect();
    r.finish();
    cases
}

/// The dtypes `text` names, by numpy's names (`int64`) or tinygrad's (`long`).
pub fn dtypes_named(text: &str) -> Vec<DType> {
    let named = |word: &str| DType::from_name(word).or_else(|| DType::ALL.into_iter().find(|d| d.name() == word));
    text.split(|c: char| !c.is_ascii_alphanumeric()).filter_map(named).collect()
}

impl Case {
    /// Every dtype the case names: its inputs', its result's and those its expression casts to.
    pub fn dtypes(&self) -> Vec<DType> {
        let arrays = self.inputs.iter().chain([&self.expected]).map(|a| a.dtype);
        arrays.chain(dtypes_named(&self.text)).collect()
    }
}

/// Decoded element values, widened so one comparison serves every dtype.
#[derive(Debug, PartialEq)]
pub enum Values {
    Float(Vec<f64>),
    Int(Vec<i128>),
    Bool(Vec<bool>),
}

impl Array {
    /// The values of `t`, read back through `to_vec` in its own element type.
    pub fn from_tensor(t: &Tensor) -> Array {
        fn bytes<T: lazygrad::dtype::Element>(t: &Tensor) -> Vec<u8> {
            let mut out = vec![];
            t.to_vec::<T>().into_iter().for_each(|v| v.write_le(&mut out));
            out
        }
        let dtype = t.dtype();
        let bytes = match dtype {
            DType::BOOL => bytes::<bool>(t),
            DType::INT8 => bytes::<i8>(t),
            DType::INT16 => bytes::<i16>(t),
            DType::INT32 => bytes::<i32>(t),
            DType::INT64 => bytes::<i64>(t),
            DType::UINT8 => bytes::<u8>(t),
            DType::UINT16 => bytes::<u16>(t),
            DType::UINT32 => bytes::<u32>(t),
            DType::UINT64 => bytes::<u64>(t),
            DType::FLOAT16 => bytes::<half::f16>(t),
            DType::FLOAT32 => bytes::<f32>(t),
            DType::FLOAT64 => bytes::<f64>(t),
            other => panic!("no element type for {other:?}"),
        };
        Array { dtype, shape: t.shape(), bytes }
    }
    /// A tensor holding this array on the current default device.
    pub fn to_tensor(&self) -> Tensor {
        Tensor::from_bytes(&self.bytes, &self.shape, self.dtype, &default_device())
    }
    pub fn values(&self) -> Values {
        let chunks = self.bytes.chunks_exact(self.dtype.itemsize());
        let le = |c: &[u8]| -> [u8; 8] {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            b
        };
        match self.dtype {
            DType::BOOL => Values::Bool(chunks.map(|c| c[0] != 0).collect()),
            DType::FLOAT16 => Values::Float(chunks.map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect()),
            DType::FLOAT32 => Values::Float(chunks.map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect()),
            DType::FLOAT64 => Values::Float(chunks.map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()),
            d if d.is_unsigned() => Values::Int(chunks.map(|c| u64::from_le_bytes(le(c)) as i128).collect()),
            d if d.is_signed() => {
                let shift = 64 - d.bits();
                Values::Int(chunks.map(|c| ((i64::from_le_bytes(le(c)) << shift) >> shift) as i128).collect())
            }
            other => panic!("cannot decode {other:?}"),
        }
    }
}

/// Whether float `got` matches `want` within `tol`: NaN only NaN, an infinity only itself, a finite
/// value `|got - want| <= atol + rtol * |want|`.
pub fn close(got: f64, want: f64, tol: Tol) -> bool {
    match () {
        _ if want.is_nan() => got.is_nan(),
        _ if want.is_infinite() => got == want,
        _ => (got - want).abs() <= tol.atol + tol.rtol * want.abs(),
    }
}

/// Check `got` against `want`: dtype and shape exactly, ints and bools exactly, floats within `tol`
/// (NaN matches NaN, infinities must match exactly). The error names the first few mismatches.
pub fn compare(got: &Array, want: &Array, tol: Tol) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!("got {:?} {:?}, want {:?} {:?}", got.dtype, got.shape, want.dtype, want.shape));
    }
    let bad: Vec<String> = match (got.values(), want.values()) {
        (Values::Float(g), Values::Float(w)) => mismatches(&g, &w, |g, w| close(g, w, tol)),
        (Values::Int(g), Values::Int(w)) => mismatches(&g, &w, |g, w| g == w),
        (Values::Bool(g), Values::Bool(w)) => mismatches(&g, &w, |g, w| g == w),
        _ => unreachable!("same dtype decodes to the same kind"),
    };
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{} mismatches: {}", bad.len(), bad.into_iter().take(4).collect::<Vec<_>>().join(", ")))
    }
}

fn mismatches<T: Copy + std::fmt::Debug>(got: &[T], want: &[T], ok: impl Fn(T, T) -> bool) -> Vec<String> {
    got.iter()
        .zip(want)
        .enumerate()
        .filter(|&(_, (&g, &w))| !ok(g, w))
        .map(|(i, (g, w))| format!("[{i}] got {g:?} want {w:?}"))
        .collect()
}

/// A case expression: `add(permute(x0,[1,0]),x1)`, `sum(x0,[0,2],true)`, `cast(x0,int32)`.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `x<i>`: the i-th input.
    Input(usize),
    Call(String, Vec<Expr>),
    Int(i64),
    Float(f64),
    List(Vec<i64>),
    /// A bare name: a dtype, `true`, `false` or `none`.
    Name(String),
}

/// Parse one expression (whitespace not allowed; the generator writes none).
pub fn parse_expr(s: &str) -> Result<Expr, String> {
    let mut p = Parser { s: s.as_bytes(), pos: 0 };
    let e = p.expr()?;
    if p.pos != s.len() {
        return Err(format!("trailing text at {} in {s:?}", p.pos));
    }
    Ok(e)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }
    fn eat(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at {}", c as char, self.pos))
        }
    }
    fn token(&mut self, ok: impl Fn(u8) -> bool) -> &str {
        let start = self.pos;
        while self.peek().is_some_and(&ok) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.s[start..self.pos]).unwrap()
    }
    /// Items separated by `,` up to `close` (the opening bracket already eaten).
    fn items<T>(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Result<T, String>) -> Result<Vec<T>, String> {
        let mut out = vec![];
        while self.peek() != Some(close) {
            if !out.is_empty() {
                self.eat(b',')?;
            }
            out.push(item(self)?);
        }
        self.eat(close)?;
        Ok(out)
    }
    fn number(&mut self) -> Result<Expr, String> {
        let t = self.token(|c| c.is_ascii_digit() || b"-+.e".contains(&c));
        if t.contains(['.', 'e']) {
            t.parse().map(Expr::Float).map_err(|e| format!("bad float {t:?}: {e}"))
        } else {
            t.parse().map(Expr::Int).map_err(|e| format!("bad int {t:?}: {e}"))
        }
    }
    fn expr(&mut self) -> Result<Expr, String> {
        match self.peek() {
            Some(b'[') => {
                self.pos += 1;
                let items = self.items(b']', |p| match p.number()? {
                    Expr::Int(i) => Ok(i),
                    other => Err(format!("list item {other:?} is not an integer")),
                })?;
                Ok(Expr::List(items))
            }
            Some(c) if c.is_ascii_digit() || c == b'-' => self.number(),
            Some(c) if c.is_ascii_alphabetic() => {
                let name = self.token(|c| c.is_ascii_alphanumeric() || c == b'_').to_string();
                if self.peek() == Some(b'(') {
                    self.pos += 1;
                    return Ok(Expr::Call(name, self.items(b')', Self::expr)?));
                }
                match name.strip_prefix('x').and_then(|i| i.parse().ok()) {
                    Some(i) => Ok(Expr::Input(i)),
                    None => Ok(Expr::Name(name)),
                }
            }
            other => Err(format!("unexpected {:?} at {}", other.map(char::from), self.pos)),
        }
    }
}

/// The one kernel computing `t` (its inputs realized first), with its buffers; a panic if the
/// schedule has more, or a copy.
pub fn only_kernel(t: &Tensor) -> (lazygrad::uop::Kernel, Vec<std::sync::Arc<lazygrad::runtime::Buffer>>) {
    let mut items = Tensor::schedule(std::slice::from_ref(t));
    assert_eq!(items.len(), 1, "one kernel");
    match items.remove(0) {
        lazygrad::engine::ScheduleItem::Kernel { ast, bufs } => (ast, bufs),
        lazygrad::engine::ScheduleItem::Copy { .. } => panic!("a copy, not a kernel"),
    }
}
