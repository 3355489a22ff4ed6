//! The backends and their opened devices: `DEV` parsing, the default device, and the one table
//! of backends in default order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::device::Device;
use crate::error::{Error, Result};

/// A backend: its name, how to open its device number `n` (an error says why it is unavailable
/// here), and a quick check of whether its first device is worth defaulting to.
pub struct Backend {
    pub name: &'static str,
    pub open: fn(usize) -> Result<Arc<dyn Device>>,
    /// Why the backend is not a default candidate here, if it is not (OpenCL without a GPU: on a
    /// CPU the CPU device runs the same machine faster).
    pub default_check: fn() -> std::result::Result<(), String>,
}

/// Every backend, in the order the default device is chosen: CUDA, OpenCL or WebGPU on a GPU,
/// then the CPU, then the interpreter (which always opens).
pub const BACKENDS: &[Backend] = &[
    Backend { name: "CUDA", open: super::cuda::open, default_check: super::cuda::available },
    Backend { name: "CL", open: super::opencl::open, default_check: super::opencl::has_gpu },
    Backend { name: "WEBGPU", open: super::webgpu::open, default_check: super::webgpu::has_gpu },
    Backend { name: "METAL", open: super::metal::open, default_check: super::metal::available },
    Backend { name: "CPU", open: |_| Ok(Arc::new(super::cpu::CpuDevice::open()?)), default_check: || Ok(()) },
    Backend { name: "INTERP", open: |_| Ok(Arc::new(super::interp::InterpDevice::new())), default_check: || Ok(()) },
];

fn registry() -> &'static Mutex<HashMap<String, Arc<dyn Device>>> {
    static DEVICES: OnceLock<Mutex<HashMap<String, Arc<dyn Device>>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The canonical name of a device spec: upper case, `:0` dropped; a tuple of devices (`CPU:0,
/// CPU:1`, where a sharded tensor lives) each of its names so, joined by commas.
pub fn canonical_device(name: &str) -> String {
    let one = |n: &str| {
        let up = n.trim().to_ascii_uppercase();
        up.strip_suffix(":0").unwrap_or(&up).to_string()
    };
    name.split(',').map(one).collect::<Vec<_>>().join(",")
}

/// `name` as a string that lives as long as the program: a tensor's device can change in place
/// (`Tensor::to_`) while callers still read the name it had. Each distinct name is kept once, and
/// a program names few devices.
pub fn intern_device(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<std::collections::HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    match names.get(name) {
        Some(interned) => interned,
        None => {
            let interned: &'static str = Box::leak(name.to_string().into_boxed_str());
            names.insert(interned);
            interned
        }
    }
}

/// The devices a canonical spec names: several for a tuple (`CPU,CPU:1`), else the one.
pub fn device_list(spec: &str) -> Vec<&str> {
    spec.split(',').collect()
}

/// A device spec's backend and device number: `CL:1` is OpenCL device 1, `CPU` device 0.
fn parse_device(name: &str) -> Result<(&'static Backend, usize)> {
    if name.contains(',') {
        return Err(Error::Device(format!("{name:?} is a tuple of devices: a buffer or program lives on one of them")));
    }
    let (base, ordinal) = match name.split_once(':') {
        Some((b, n)) => {
            let n = n.parse().map_err(|_| Error::Device(format!("bad device number in {name:?}")))?;
            (b, n)
        }
        None => (name, 0),
    };
    match BACKENDS.iter().find(|b| b.name == base) {
        Some(b) => Ok((b, ordinal)),
        None => {
            let known: Vec<&str> = BACKENDS.iter().map(|b| b.name).collect();
            Err(Error::Device(format!("unknown device {name:?} (known: {})", known.join(", "))))
        }
    }
}

/// Open (once) and return the device called `name` (`CPU`, `CL`, `CL:1`, `INTERP`); an
/// unavailable one is an error that says why.
pub fn get_device(name: &str) -> Result<Arc<dyn Device>> {
    let mut devices = registry().lock().unwrap_or_else(|e| e.into_inner());
    // the canonical names tensors and buffers hold are found as they are, with no new string
    // (an eager op asks for its device several times)
    if let Some(d) = devices.get(name) {
        return Ok(d.clone());
    }
    let name = canonical_device(name);
    if let Some(d) = devices.get(&name) {
        return Ok(d.clone());
    }
    let (backend, ordinal) = parse_device(&name)?;
    let dev = (backend.open)(ordinal).map_err(|e| match e {
        Error::Device(why) => Error::Device(format!("{name} unavailable: {why}")),
        other => Error::Device(format!("{name} unavailable: {other}")),
    })?;
    if crate::helpers::debug() >= 1 {
        eprintln!("opened device {name}: {}", dev.target());
    }
    devices.insert(name, dev.clone());
    Ok(dev)
}

thread_local! {
    static SCOPED_DEFAULT: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(vec![]) };
}

/// Makes `device` the default for new tensors on this thread until dropped.
#[must_use = "the default only holds while the guard is alive"]
pub struct DefaultDevice(());

impl DefaultDevice {
    pub fn scoped(device: &str) -> DefaultDevice {
        SCOPED_DEFAULT.with(|s| s.borrow_mut().push(canonical_device(device)));
        DefaultDevice(())
    }
}

impl Drop for DefaultDevice {
    fn drop(&mut self) {
        SCOPED_DEFAULT.with(|s| s.borrow_mut().pop());
    }
}

/// The default device's numbers `0..n` (`CPU:0`, `CPU:1` ...): the devices a program spreads over
/// when asked for `n` (tinygrad's `tuple(f"{Device.DEFAULT}:{i}" for i in range(n))`).
pub fn default_devices(n: usize) -> Vec<String> {
    let default = default_device();
    let backend = default.split(':').next().unwrap_or_default();
    (0..n).map(|i| format!("{backend}:{i}")).collect()
}

/// The device tensors go to by default: a `DefaultDevice::scoped` override, else `$DEV`, else
/// the first backend in `BACKENDS` order that opens and is worth defaulting to. `DEBUG=1` says
/// which were skipped and why; falling back to INTERP warns on one line.
pub fn default_device() -> String {
    if let Some(d) = SCOPED_DEFAULT.with(|s| s.borrow().last().cloned()) {
        return d;
    }
    static DEFAULT: OnceLock<String> = OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            if let Some(dev) = crate::helpers::getenv_str("DEV") {
                return canonical_device(&dev);
            }
            let mut skipped = vec![];
            for backend in BACKENDS {
                let opened =
                    (backend.default_check)().map_err(|why| format!("{}: {why}", backend.name)).and_then(|()| {
                        match get_device(backend.name) {
                            Err(Error::Device(why)) => Err(why),
                            other => other.map_err(|e| e.to_string()),
                        }
                    });
                if let Err(why) = opened {
                    skipped.push(why);
                    continue;
                }
                if backend.name == "INTERP" {
                    eprintln!("lazygrad: {}; falling back to INTERP", skipped.join("; "));
                } else if crate::helpers::debug() >= 1 && !skipped.is_empty() {
                    eprintln!("default device {}: skipped {}", backend.name, skipped.join("; "));
                }
                return backend.name.into();
            }
            "INTERP".into()
        })
        .clone()
}
