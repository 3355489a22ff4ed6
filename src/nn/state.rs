//! Model state: every tensor of a model by dotted name (`Module`), state dicts, and safetensors
//! files (tinygrad's `nn/state.py`).
//!
//! A model is a plain struct; [`module!`](crate::module) implements [`Module`] for it by listing
//! its fields, and containers (`Vec`, arrays, `Option`, `Box`, maps) add their index or key as a
//! name segment, so a `Vec<Linear>` field `layers` yields `layers.0.weight`, `layers.0.bias`, ...

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use safetensors::tensor::{Dtype as StDtype, SafeTensorError, SafeTensors, View};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::runtime::{buffer_view, view_buffer};
use crate::runtime::{default_device, Buffer};
use crate::tensor::Tensor;

/// Anything that holds tensors under names: models, layers, containers of them, a tensor.
pub trait Module {
    /// Call `f` with the full dotted name and the tensor for every tensor under `prefix`
    /// (`prefix` is the name of `self`; empty at the root).
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor));

    /// Every tensor with its dotted name, in declaration order (duplicates kept).
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit_tensors("", &mut |name, t| out.push((name, t.clone())));
        out
    }
}

/// `prefix.name`, or whichever of the two is non-empty.
pub fn join_name(prefix: &str, name: &str) -> String {
    match (prefix.is_empty(), name.is_empty()) {
        (true, _) => name.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) => format!("{prefix}.{name}"),
    }
}

/// Implement [`Module`] for a struct by listing the fields that hold tensors; each field's
/// name becomes a name segment (`field as "name"` renames it; tuple-struct fields are `0`, `1`).
///
/// ```
/// use lazygrad::nn::state::get_state_dict;
/// use lazygrad::{module, Tensor};
///
/// struct Linear { weight: Tensor, bias: Option<Tensor> }
/// module!(Linear { weight, bias });
/// struct Net { layers: Vec<Linear>, head: Linear }
/// module!(Net { layers, head as "fc" });
/// struct Wrap<T>(T);
/// module!(impl<T> Wrap<T> { 0 }); // each T: Module
///
/// let lin = |o, i| Linear { weight: Tensor::zeros(&[o, i]), bias: Some(Tensor::zeros(&[o])) };
/// let net = Wrap(Net { layers: vec![lin(3, 2)], head: lin(1, 3) });
/// let names: Vec<String> = get_state_dict(&net).into_keys().collect();
/// assert_eq!(names, ["0.fc.bias", "0.fc.weight", "0.layers.0.bias", "0.layers.0.weight"]);
/// ```
#[macro_export]
macro_rules! module {
    (impl<$($g:ident),+> $ty:ty { $($field:tt $(as $name:literal)?),* $(,)? }) => {
        impl<$($g: $crate::nn::state::Module),+> $crate::nn::state::Module for $ty {
            $crate::module!(@visit $($field $(as $name)?),*);
        }
    };
    ($ty:ty { $($field:tt $(as $name:literal)?),* $(,)? }) => {
        impl $crate::nn::state::Module for $ty {
            $crate::module!(@visit $($field $(as $name)?),*);
        }
    };
    (@visit $($field:tt $(as $name:literal)?),*) => {
        fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &$crate::Tensor)) {
            let _ = (&prefix, &f);
            $({
                let name: &str = $crate::module!(@name $field $(as $name)?);
                $crate::nn::state::Module::visit_tensors(&self.$field, &$crate::nn::state::join_name(prefix, name), f);
            })*
        }
    };
    (@name $field:tt) => {
        stringify!($field)
    };
    (@name $field:tt as $name:literal) => {
        $name
    };
}

impl Module for Tensor {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        f(prefix.to_string(), self)
    }
}

impl<T: Module> Module for [T] {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        for (i, item) in self.iter().enumerate() {
            item.visit_tensors(&join_name(prefix, &i.to_string()), f);
        }
    }
}

impl<T: Module> Module for Vec<T> {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.as_slice().visit_tensors(prefix, f)
    }
}

impl<T: Module, const N: usize> Module for [T; N] {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.as_slice().visit_tensors(prefix, f)
    }
}

impl<T: Module> Module for Option<T> {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        if let Some(item) = self {
            item.visit_tensors(prefix, f)
        }
    }
}

impl<T: Module + ?Sized> Module for Box<T> {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        (**self).visit_tensors(prefix, f)
    }
}

impl<T: Module + ?Sized> Module for Arc<T> {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        (**self).visit_tensors(prefix, f)
    }
}

impl<T: Module + ?Sized> Module for &T {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        (**self).visit_tensors(prefix, f)
    }
}

impl<T: Module> Module for BTreeMap<String, T> {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        for (k, item) in self {
            item.visit_tensors(&join_name(prefix, k), f);
        }
    }
}

/// Visited in key order, so names come out the same on every run.
impl<T: Module> Module for HashMap<String, T> {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        let mut keys: Vec<&String> = self.keys().collect();
        keys.sort();
        for k in keys {
            self[k].visit_tensors(&join_name(prefix, k), f);
        }
    }
}

/// Every tensor of `model` by dotted name (tinygrad's `get_state_dict`).
pub fn get_state_dict<M: Module + ?Sized>(model: &M) -> BTreeMap<String, Tensor> {
    model.named_tensors().into_iter().collect()
}

/// The tensors of `model` in declaration order, each once (tinygrad's `get_parameters`).
///
/// A tensor reachable under two names (tied weights) is listed once when it is backed by a
/// realized buffer; two handles on the same *unrealized* graph cannot be told apart from two
/// equal but distinct tensors and are both listed.
pub fn get_parameters<M: Module + ?Sized>(model: &M) -> Vec<Tensor> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (_, t) in model.named_tensors() {
        let key = view_buffer(&t.uop()).map(|b| b.id());
        if key.is_none_or(|id| seen.insert(id)) {
            out.push(t);
        }
    }
    out
}

/// Write `state` into `model`'s tensors in place (`assign`, then one realize), casting to each
/// model tensor's dtype and moving to its device (tinygrad's `load_state_dict`).
///
/// Checked before anything is written, and all problems reported in one error: a model key
/// missing from `state` (an error when `strict`, skipped otherwise), a key of `state` the model
/// lacks (an error when `strict`, ignored otherwise), and a shape mismatch (always an error; a
/// scalar and a one-element vector fit each other, as in tinygrad).
pub fn load_state_dict<M: Module + ?Sized>(model: &M, state: &BTreeMap<String, Tensor>, strict: bool) -> Result<()> {
    let named = model.named_tensors();
    let (mut missing, mut wrong_shape, mut plan) = (Vec::new(), Vec::new(), Vec::new());
    for (k, v) in &named {
        match state.get(k) {
            None => missing.push(k.clone()),
            Some(s) if s.shape() == v.shape() => plan.push((v.clone(), s.clone())),
            Some(s) if s.numel() == 1 && v.numel() == 1 && s.ndim() + v.ndim() == 1 => {
                plan.push((v.clone(), s.reshape(&v.shape())))
            }
            Some(s) => wrong_shape.push(format!(
                "Shape mismatch in layer `{k}`: Expected shape {}, but found {} in state dict.",
                python_shape(&v.shape()),
                python_shape(&s.shape())
            )),
        }
    }
    let model_keys: HashSet<&str> = named.iter().map(|(k, _)| k.as_str()).collect();
    let unexpected: Vec<&String> = state.keys().filter(|k| !model_keys.contains(k.as_str())).collect();

    let mut problems = Vec::new();
    if strict && !missing.is_empty() {
        problems.push(format!("{} missing from the state dict: {missing:?}", plural(missing.len(), "key")));
    }
    if strict && !unexpected.is_empty() {
        problems.push(format!(
            "{} in the state dict that the model does not have: {unexpected:?}",
            plural(unexpected.len(), "key")
        ));
    }
    if !wrong_shape.is_empty() {
        problems.push(format!("{} with the wrong shape: {}", plural(wrong_shape.len(), "key"), wrong_shape.join("; ")));
    }
    if !problems.is_empty() {
        let hint = if strict && wrong_shape.is_empty() { " (strict=false skips missing and extra keys)" } else { "" };
        return Err(Error::value("load_state_dict", format!("failed{hint}:\n  {}", problems.join("\n  "))));
    }
    if crate::helpers::debug() >= 1 {
        if !missing.is_empty() {
            eprintln!("load_state_dict: WARNING: not loading {missing:?} (missing from the state dict)");
        }
        if !unexpected.is_empty() {
            eprintln!("load_state_dict: WARNING: unused keys in the state dict {unexpected:?}");
        }
    }
    let mut targets = Vec::new();
    for (v, s) in plan {
        // a one-device value is split as the model's tensor is; one on several devices is
        // resplit by the assignment
        let s = match (v.devices().len(), s.devices().len()) {
            (1, _) | (_, 2..) => s.to(v.device()),
            _ => s.try_shard(
                &v.devices().iter().map(String::as_str).collect::<Vec<_>>(),
                v.shard_axis().map(|a| a as isize),
            )?,
        };
        if s.uop() == v.uop() {
            continue; // loading a tensor into itself
        }
        targets.push(v.assign(&s));
    }
    Tensor::realize_all(&targets)
}

/// A shape as Python writes the tuple: `(2, 3)`, `(5,)`, `()`.
fn python_shape(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

// ---- safetensors -----------------------------------------------------------------------------

fn to_st_dtype(d: DType) -> Option<StDtype> {
    Some(match d {
        DType::BOOL => StDtype::BOOL,
        DType::INT8 => StDtype::I8,
        DType::INT16 => StDtype::I16,
        DType::INT32 => StDtype::I32,
        DType::INT64 => StDtype::I64,
        DType::UINT8 => StDtype::U8,
        DType::UINT16 => StDtype::U16,
        DType::UINT32 => StDtype::U32,
        DType::UINT64 => StDtype::U64,
        DType::FLOAT16 => StDtype::F16,
        DType::BFLOAT16 => StDtype::BF16,
        DType::FLOAT32 => StDtype::F32,
        DType::FLOAT64 => StDtype::F64,
        _ => return None,
    })
}

fn from_st_dtype(d: StDtype) -> Option<DType> {
    DType::ALL.into_iter().find(|&x| to_st_dtype(x) == Some(d))
}

/// A tensor's bytes as safetensors wants them.
struct Raw {
    dtype: StDtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Raw {
    fn dtype(&self) -> StDtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn st_error(path: &Path, e: SafeTensorError) -> Error {
    match e {
        SafeTensorError::IoError(io) => io_error(path, io),
        e => Error::Format(format!("{}: not a valid safetensors file: {e}", path.display())),
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::from(e).at(path)
}

/// Save named tensors to a safetensors file (realizing them; data is stored contiguous,
/// little-endian). Accepts `&BTreeMap<String, Tensor>`, `&HashMap`, or any iterator of
/// `(name, &Tensor)`. The file is written to a temporary sibling and renamed into place, so a
/// file being read (or memory-mapped) is never truncated underneath its reader.
pub fn safe_save<'a, K, I>(tensors: I, path: impl AsRef<Path>) -> Result<()>
where
    K: AsRef<str>,
    I: IntoIterator<Item = (K, &'a Tensor)>,
{
    safe_save_with_metadata(tensors, None, path)
}

/// `safe_save` with a string-to-string `__metadata__` table in the header.
pub fn safe_save_with_metadata<'a, K, I>(
    tensors: I,
    metadata: Option<&BTreeMap<String, String>>,
    path: impl AsRef<Path>,
) -> Result<()>
where
    K: AsRef<str>,
    I: IntoIterator<Item = (K, &'a Tensor)>,
{
    let path = path.as_ref();
    let mut raws: BTreeMap<String, Raw> = BTreeMap::new();
    for (name, t) in tensors {
        let name = name.as_ref().to_string();
        let dtype = to_st_dtype(t.dtype()).ok_or_else(|| Error::DTypes {
            op: "safe_save",
            dtypes: vec![t.dtype()],
            reason: format!("`{name}` has a dtype safetensors lacks"),
        })?;
        let raw = Raw { dtype, shape: t.shape(), data: t.raw_bytes()? };
        if raws.insert(name.clone(), raw).is_some() {
            return Err(Error::value("safe_save", format!("the name `{name}` appears twice")));
        }
    }
    let metadata = metadata.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    safetensors::serialize_to_file(raws.iter().map(|(k, r)| (k.as_str(), r)), metadata, path)
        .map_err(|e| st_error(path, e))
}

/// File `path` memory-mapped read-only, for a loader that validates the bytes and copies what
/// it keeps into device buffers before dropping the map (safetensors here, GGUF in `gguf.rs`).
pub(crate) fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    // SAFETY: `Mmap::map` is unsafe because the mapped bytes could change (or, if the file is
    // truncated, access could fault with SIGBUS) when another process modifies the file while
    // it is mapped. The file is opened read-only and lazygrad never writes to a file in place
    // (`safe_save` writes a temporary file and renames it over the old one, which leaves
    // existing mappings intact). Callers read the map only through `&[u8]`, validating it and
    // copying each tensor's bytes into device buffers before the map is dropped; no reference
    // into it escapes. What remains is the inherent caveat of any mmap: a *different* program
    // truncating the file during those few copies can still crash this process.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_error(path, e))
}

/// A memory-mapped safetensors file: the mapping lives only as long as this value.
struct Mapped {
    map: memmap2::Mmap,
}

impl Mapped {
    fn open(path: &Path) -> Result<Mapped> {
        let map = map_file(path)?;
        if map.len() < 8 {
            return Err(Error::Format(format!(
                "{}: {} bytes is too short for a safetensors file (its header length alone takes 8)",
                path.display(),
                map.len()
            )));
        }
        Ok(Mapped { map })
    }
    fn parse(&self, path: &Path) -> Result<SafeTensors<'_>> {
        SafeTensors::deserialize(&self.map).map_err(|e| st_error(path, e))
    }
}

/// Load every tensor of a safetensors file onto the default device (the file is memory-mapped
/// and each tensor's bytes are copied into a device buffer). Corrupt or truncated files, and
/// dtypes lazygrad lacks (fp8, complex, ...), give an error naming the file.
pub fn safe_load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    safe_load_on(path, &default_device())
}

/// `safe_load` onto `device`.
pub fn safe_load_on(path: impl AsRef<Path>, device: &str) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let mapped = Mapped::open(path)?;
    let st = mapped.parse(path)?;
    let mut out = BTreeMap::new();
    for (name, view) in st.iter() {
        let dtype = from_st_dtype(view.dtype()).ok_or_else(|| {
            Error::Format(format!(
                "{}: tensor `{name}` has dtype {:?}, which lazygrad does not support",
                path.display(),
                view.dtype()
            ))
        })?;
        let t = tensor_from_bytes(view.data(), view.shape(), dtype, device)
            .map_err(|e| Error::Format(format!("{}: tensor `{name}`: {e}", path.display())))?;
        out.insert(name.to_string(), t);
    }
    Ok(out)
}

/// The `__metadata__` table of a safetensors file (empty if it has none).
pub fn safe_load_metadata(path: impl AsRef<Path>) -> Result<BTreeMap<String, String>> {
    let path = path.as_ref();
    let mapped = Mapped::open(path)?;
    let (_, meta) = SafeTensors::read_metadata(&mapped.map).map_err(|e| st_error(path, e))?;
    Ok(meta.metadata().iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// A realized tensor holding a copy of `bytes` (little-endian, row-major), with an error
/// instead of a panic when the length does not match `shape` and `dtype`.
pub fn tensor_from_bytes(bytes: &[u8], shape: &[usize], dtype: DType, device: &str) -> Result<Tensor> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let nbytes = n.and_then(|n| n.checked_mul(dtype.itemsize()));
    let n = match (n, nbytes) {
        (Some(n), Some(nb)) if nb == bytes.len() => n,
        _ => {
            let reason = format!("{} bytes do not hold {dtype:?} elements of this shape", bytes.len());
            return Err(Error::shape("tensor_from_bytes", &[shape], reason));
        }
    };
    let buf = Arc::new(Buffer::new(device, n, dtype));
    buf.copyin(bytes)?;
    Ok(Tensor::from_uop(buffer_view(&buf, shape), device))
}
