//! GGUF files (llama.cpp's model format, versions 2 and 3): metadata, tensor infos and tensor
//! data, memory-mapped (tinygrad's `gguf_load`).
//!
//! Quantized tensors are loaded as their raw blocks and dequantized by tensor ops on the device,
//! lazily, so that the dequantization fuses into the kernels that read the weights. Every read
//! of the file is bounds-checked: a truncated or corrupt file is an `Error::Format`, never a
//! panic or an allocation sized by a corrupt count.

use std::collections::BTreeMap;
use std::path::Path;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::nn::quantized::{QuantizedTensor, Weight};
use crate::nn::state::{map_file, tensor_from_bytes};
use crate::runtime::default_device;
use crate::tensor::Tensor;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(String),
    Array(Vec<GgufValue>),
}

impl GgufValue {
    /// The value as an integer, if it is one.
    pub fn as_int(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(v) => v.into(),
            GgufValue::I8(v) => v.into(),
            GgufValue::U16(v) => v.into(),
            GgufValue::I16(v) => v.into(),
            GgufValue::U32(v) => v.into(),
            GgufValue::I32(v) => v.into(),
            GgufValue::U64(v) => v.into(),
            GgufValue::I64(v) => v.into(),
            _ => return None,
        })
    }
    /// The value as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.as_int().map(|i| i as f64),
        }
    }
    /// The value as text, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// How a tensor's elements are stored: ggml's type ids, and per block of `block` elements, its
/// size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q4K,
    Q6K,
}

impl GgmlType {
    fn from_id(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            8 => GgmlType::Q8_0,
            12 => GgmlType::Q4K,
            14 => GgmlType::Q6K,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }
    /// (elements per block, bytes per block).
    pub fn block(self) -> (usize, usize) {
        match self {
            GgmlType::F32 => (1, 4),
            GgmlType::F16 | GgmlType::BF16 => (1, 2),
            GgmlType::Q8_0 => (32, 34),
            GgmlType::Q4_0 => (32, 18),
            GgmlType::Q4_1 => (32, 20),
            GgmlType::Q4K => (256, 144),
            GgmlType::Q6K => (256, 210),
        }
    }
}

/// A tensor's entry in the file: its row-major shape (GGUF lists dims innermost first), storage
/// type, and offset within the data section.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufTensorInfo {
    pub name: String,
    pub shape: Vec<usize>,
    pub ggml_type: GgmlType,
    pub offset: usize,
}

impl GgufTensorInfo {
    /// Bytes the tensor's data takes.
    fn bytes(&self) -> Option<usize> {
        let n = self.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
        let (block, size) = self.ggml_type.block();
        n.is_multiple_of(block).then(|| (n / block).checked_mul(size))?
    }
}

/// A parsed GGUF file's header: version, metadata, tensor infos and where the data starts.
#[derive(Clone, Debug)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: BTreeMap<String, GgufValue>,
    pub tensors: Vec<GgufTensorInfo>,
    /// Byte offset of the data section (aligned to `general.alignment`, 32 by default).
    pub data_start: usize,
}

/// Reads little-endian values from a byte slice, each read checked against its end.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn format_error(what: String) -> Error {
    Error::Format(format!("GGUF: {what}"))
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| {
            format_error(format!(
                "truncated: {what} needs {n} bytes at offset {}, the file has {}",
                self.pos,
                self.bytes.len()
            ))
        })?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("take returns N bytes"))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    /// A count or size that must fit in memory: at most what the rest of the file could hold
    /// at `min_bytes` each, so that a corrupt count fails here, not in an allocation.
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize> {
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.pos) / min_bytes.max(1);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= left)
            .ok_or_else(|| format_error(format!("{what} is {n}, more than the {left} the rest of the file could hold")))
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let len = self.count(what, 1)?;
        String::from_utf8(self.take(len, what)?.to_vec())
            .map_err(|_| format_error(format!("{what} at offset {} is not UTF-8", self.pos - len)))
    }
    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Result<GgufValue> {
        Ok(match ty {
            0 => GgufValue::U8(u8::from_le_bytes(self.array(key)?)),
            1 => GgufValue::I8(i8::from_le_bytes(self.array(key)?)),
            2 => GgufValue::U16(u16::from_le_bytes(self.array(key)?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.array(key)?)),
            4 => GgufValue::U32(self.u32(key)?),
            5 => GgufValue::I32(i32::from_le_bytes(self.array(key)?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.array(key)?)),
            7 => match self.array::<1>(key)?[0] {
                b @ (0 | 1) => GgufValue::Bool(b == 1),
                b => return Err(format_error(format!("`{key}`: {b} is not a bool"))),
            },
            8 => GgufValue::Str(self.string(key)?),
            9 if depth == 0 => {
                let inner = self.u32(key)?;
                let n = self.count(&format!("`{key}`'s length"), 1)?;
                GgufValue::Array((0..n).map(|_| self.value(inner, key, depth + 1)).collect::<Result<_>>()?)
            }
            10 => GgufValue::U64(self.u64(key)?),
            11 => GgufValue::I64(i64::from_le_bytes(self.array(key)?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.array(key)?)),
            _ => return Err(format_error(format!("`{key}` has value type {ty}, which GGUF does not define"))),
        })
    }
}

/// The header of GGUF file contents `bytes`, checked against them: every tensor's data lies
/// within the file.
pub fn parse_header(bytes: &[u8]) -> Result<GgufHeader> {
    let mut c = Cursor { bytes, pos: 0 };
    if c.take(4, "the magic")? != b"GGUF" {
        return Err(format_error("not a GGUF file (its first bytes are not `GGUF`)".into()));
    }
    let version = c.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(format_error(format!("version {version}; lazygrad reads versions 2 and 3")));
    }
    // a tensor info takes at least 24 bytes, a metadata entry 12
    let n_tensors = c.count("the tensor count", 24)?;
    let n_kv = c.count("the metadata count", 12)?;
    let mut metadata = BTreeMap::new();
    for _ in 0..n_kv {
        let key = c.string("a metadata key")?;
        let ty = c.u32(&key)?;
        let value = c.value(ty, &key, 0)?;
        if metadata.insert(key.clone(), value).is_some() {
            return Err(format_error(format!("metadata key `{key}` appears twice")));
        }
    }
    let mut tensors = Vec::new();
    for _ in 0..n_tensors {
        let name = c.string("a tensor name")?;
        let n_dims = c.u32(&name)?;
        if n_dims > 4 {
            return Err(format_error(format!("tensor `{name}` has {n_dims} dims; GGUF tensors have at most 4")));
        }
        let mut shape = (0..n_dims).map(|_| c.u64(&name).map(|d| d as usize)).collect::<Result<Vec<usize>>>()?;
        shape.reverse();
        let id = c.u32(&name)?;
        let ggml_type = GgmlType::from_id(id)
            .ok_or_else(|| format_error(format!("tensor `{name}` has ggml type {id}, which lazygrad does not read")))?;
        let offset = c.u64(&name)? as usize;
        if tensors.iter().any(|t: &GgufTensorInfo| t.name == name) {
            return Err(format_error(format!("tensor `{name}` appears twice")));
        }
        let (block, _) = ggml_type.block();
        let row = shape.last().copied().unwrap_or(1);
        if !row.is_multiple_of(block) {
            return Err(format_error(format!(
                "tensor `{name}` ({ggml_type:?} {shape:?}) has rows of {row} values, not whole blocks of {block}"
            )));
        }
        tensors.push(GgufTensorInfo { name, shape, ggml_type, offset });
    }
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => v
            .as_int()
            .filter(|a| *a > 0 && *a <= 1 << 20)
            .ok_or_else(|| format_error(format!("general.alignment is {v:?}, not a positive alignment")))?
            as usize,
    };
    let data_start = c.pos.next_multiple_of(alignment);
    for t in &tensors {
        let end = t.bytes().and_then(|n| data_start.checked_add(t.offset)?.checked_add(n));
        if t.offset % alignment != 0 || end.is_none_or(|e| e > bytes.len()) {
            return Err(format_error(format!(
                "tensor `{}` ({:?} {:?} at data offset {}) lies outside the file of {} bytes or is misaligned",
                t.name,
                t.ggml_type,
                t.shape,
                t.offset,
                bytes.len()
            )));
        }
    }
    // each tensor's data is its own: sorted by offset, each ends before the next begins
    let mut spans: Vec<(usize, usize, &str)> =
        tensors.iter().map(|t| (t.offset, t.offset + t.bytes().expect("checked above"), t.name.as_str())).collect();
    spans.sort();
    if let Some(w) = spans.windows(2).find(|w| w[0].1 > w[1].0) {
        return Err(format_error(format!("the data of tensors `{}` and `{}` overlap", w[0].2, w[1].2)));
    }
    Ok(GgufHeader { version, metadata, tensors, data_start })
}

/// A GGUF file's metadata and its tensors, on the default device: float32, float16 and bfloat16
/// as stored, quantized ones as float32 (lazily dequantized from their blocks).
pub fn gguf_load(path: impl AsRef<Path>) -> Result<(BTreeMap<String, GgufValue>, BTreeMap<String, Tensor>)> {
    let (meta, weights) = gguf_weights(path)?;
    Ok((meta, weights.into_iter().map(|(name, w)| (name, w.dense())).collect()))
}

/// A GGUF file's metadata and its tensors as weights, on the default device: Q8_0, Q4_0 and Q4_1
/// quantized (`Weight::Quantized`, their parts computed lazily from the blocks), every other type
/// dense (float32 for the K-quants, lazily dequantized).
pub fn gguf_weights(path: impl AsRef<Path>) -> Result<(BTreeMap<String, GgufValue>, BTreeMap<String, Weight>)> {
    let path = path.as_ref();
    let map = map_file(path)?;
    let header = parse_header(&map).map_err(|e| e.at(path))?;
    let device = default_device();
    let mut tensors = BTreeMap::new();
    for t in &header.tensors {
        let start = header.data_start + t.offset;
        let bytes = &map[start..start + t.bytes().expect("parse_header checked the size")];
        let plain = |dtype| tensor_from_bytes(bytes, &t.shape, dtype, &device).map(Weight::Dense);
        let weight = match t.ggml_type {
            GgmlType::F32 => plain(DType::FLOAT32)?,
            GgmlType::F16 => plain(DType::FLOAT16)?,
            GgmlType::BF16 => plain(DType::BFLOAT16)?,
            q => {
                let (_, size) = q.block();
                let blocks = tensor_from_bytes(bytes, &[bytes.len() / size, size], DType::UINT8, &device)?;
                block_weight(&blocks, q, &t.shape)
            }
        };
        tensors.insert(t.name.clone(), weight);
    }
    Ok((header.metadata, tensors))
}

/// Columns `[a, b)` of the `[blocks, bytes]` uint8 tensor.
fn cols(blocks: &Tensor, a: usize, b: usize) -> Tensor {
    blocks.shrink(&[(0, blocks.shape()[0]), (a, b)])
}

/// The little-endian float16 at byte `at` of each block, as a float32 column `[blocks, 1]`.
fn f16_at(blocks: &Tensor, at: usize) -> Tensor {
    let byte = |k: usize| cols(blocks, at + k, at + k + 1).cast(DType::UINT16);
    byte(0).bitwise_or(byte(1).lshift(8)).bitcast(DType::FLOAT16).cast(DType::FLOAT32)
}

/// Low and high nibbles of uint8 `q`, each a float32 tensor of its shape.
fn nibbles(q: &Tensor) -> (Tensor, Tensor) {
    (q.bitwise_and(15).cast(DType::FLOAT32), q.rshift(4).cast(DType::FLOAT32))
}

/// Quantized `blocks` (`[blocks, bytes]` uint8) of a tensor of `shape`, as ggml lays them out:
/// the 32-element formats as their parts, the K-quants dequantized to float32.
fn block_weight(blocks: &Tensor, q: GgmlType, shape: &[usize]) -> Weight {
    let nb = blocks.shape()[0] as isize;
    let quantized = |offset, quants| Weight::Quantized(QuantizedTensor::new(shape, f16_at(blocks, 0), offset, quants));
    let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    let dense = |t: Tensor| Weight::Dense(t.reshape(&dims));
    match q {
        // a scale and 32 int8s
        GgmlType::Q8_0 => quantized(None, cols(blocks, 2, 34).bitcast(DType::INT8)),
        // a scale and 16 bytes of nibbles, value `scale * (q - 8)`
        GgmlType::Q4_0 => quantized(Some(f16_at(blocks, 0) * -8.0), cols(blocks, 2, 18)),
        // a scale, a minimum and 16 bytes of nibbles
        GgmlType::Q4_1 => quantized(Some(f16_at(blocks, 2)), cols(blocks, 4, 20)),
        // a scale and a minimum for the block, and for each of its 8 sub-blocks of 32 a 6-bit
        // scale and minimum packed into 12 bytes; 128 bytes of nibbles, each 32 holding two
        // sub-blocks (low nibbles first)
        GgmlType::Q4K => {
            let (d, dmin) = (f16_at(blocks, 0), f16_at(blocks, 2));
            let (s0, s4, s8) = (cols(blocks, 4, 8), cols(blocks, 8, 12), cols(blocks, 12, 16));
            let top_two = |s: &Tensor| s.rshift(6).lshift(4);
            let scales = Tensor::cat(&[&s0.bitwise_and(63), &s8.bitwise_and(15).bitwise_or(top_two(&s0))], 1);
            let mins = Tensor::cat(&[&s4.bitwise_and(63), &s8.rshift(4).bitwise_or(top_two(&s4))], 1);
            let (lo, hi) = nibbles(&cols(blocks, 16, 144).reshape(&[nb, 4, 1, 32]));
            let quants = Tensor::cat(&[&lo, &hi], 2).reshape(&[nb, 8, 32]);
            let per_sub = |t: Tensor| t.cast(DType::FLOAT32).reshape(&[nb, 8, 1]);
            let d = d.reshape(&[nb, 1, 1]) * &per_sub(scales);
            let m = dmin.reshape(&[nb, 1, 1]) * &per_sub(mins);
            dense((d * &quants - &m).reshape(&[nb, 256]))
        }
        // 6-bit quants: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales (one per
        // 16 values), then the block's scale; each half of 128 values takes 64 low bytes and 32
        // high ones
        GgmlType::Q6K => {
            let quants: Vec<Tensor> = (0..2)
                .flat_map(|half| {
                    let low = move |k: usize| cols(blocks, 64 * half + 32 * k, 64 * half + 32 * k + 32);
                    let high = cols(blocks, 128 + 32 * half, 160 + 32 * half);
                    let pieces = [(0, false), (1, false), (0, true), (1, true)];
                    pieces.into_iter().enumerate().map(move |(k, (part, upper))| {
                        let l = match upper {
                            true => low(part).rshift(4),
                            false => low(part).bitwise_and(15),
                        };
                        let h = high.rshift(2 * k as u8).bitwise_and(3).lshift(4);
                        l.bitwise_or(h).cast(DType::FLOAT32) - 32.0
                    })
                })
                .collect();
            let quants = Tensor::cat(&quants.iter().collect::<Vec<_>>(), 1);
            let scales = cols(blocks, 192, 208).bitcast(DType::INT8).cast(DType::FLOAT32);
            let scales = scales.reshape(&[nb, 16, 1]).expand(&[nb as usize, 16, 16]).reshape(&[nb, 256]);
            dense(f16_at(blocks, 208) * &scales * &quants)
        }
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => unreachable!("plain types are not quantized"),
    }
}
