//! Environment settings with bad values, a C compiler that is missing or fails, and a panic in a
//! codegen thread. The settings are read once per process, so each case runs this test binary
//! again as a child (`scenario` below) with the environment it needs.

use std::path::Path;
use std::process::Command;

use lazygrad::codegen::opt::search::beam_width;
use lazygrad::helpers::cpu_threads;
use lazygrad::helpers::debug;
use lazygrad::nn::state::tensor_from_bytes;
use lazygrad::renderer::{c::CRenderer, Renderer};
use lazygrad::runtime::{default_device, get_device, DefaultDevice};
use lazygrad::uop::{Arg, Ops, UOp};
use lazygrad::{Context, DType, Error, Tensor};

use crate::common::TempDir;
use crate::{interp, panics_with};

/// The variable that tells a child which scenario to run.
const SCENARIO: &str = "LAZYGRAD_BAD_INPUT_SCENARIO";

/// Settings a child starts without unless its scenario sets them.
const SETTINGS: [&str; 9] =
    ["DEV", "CC", "SANITIZE", "DEBUG", "BEAM", "NOOPT", "NUM_CPU_THREADS", "VECTOR_BYTES", "LAZYGRAD_CACHE"];

/// Run `scenario` in a child process with `env` set; returns its stderr (it must succeed).
fn child(scenario: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "env::scenario", "--nocapture", "--test-threads=1"]).env(SCENARIO, scenario);
    for var in SETTINGS {
        cmd.env_remove(var);
    }
    let out = cmd.envs(env.iter().copied()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "scenario {scenario} with {env:?} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "scenario {scenario} did not run:\n{stdout}");
    stderr
}

/// `2 * [1, 2]` on the default device.
fn small_op() -> Vec<f32> {
    (Tensor::new([1.0f32, 2.0]) * 2.0).to_vec::<f32>()
}

/// The child's side: checks what the environment its parent gave it leads to.
#[test]
fn scenario() {
    let Ok(name) = std::env::var(SCENARIO) else { return };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match name.as_str() {
        "unparsable" => {
            // documented: a value that is not an integer counts as the default
            assert_eq!((debug(), beam_width(), cpu_threads()), (0, 0, cores));
            assert_eq!(CRenderer.target().vector_bytes, CRenderer.target().register_bytes);
            assert_eq!(default_device(), "INTERP");
            assert_eq!(small_op(), [2.0, 4.0]);
        }
        "out_of_range" => {
            // documented: thread counts below 1 count as 1, vector widths other than 16, 32, 64
            // as the machine's own; a negative BEAM width is no search
            assert_eq!((beam_width(), cpu_threads()), (0, 1));
            assert_eq!(CRenderer.target().vector_bytes, CRenderer.target().register_bytes);
            assert_eq!(small_op(), [2.0, 4.0]);
        }
        "many_threads" => {
            // documented: at most 256 threads (the pool spawns a worker for each)
            assert_eq!(cpu_threads(), 256);
        }
        "unknown_device" => {
            assert_eq!(default_device(), "NOPE");
            panics_with(
                &["device error", "unknown device \"NOPE\"", "known: CUDA, CL, WEBGPU, METAL, CPU, INTERP"],
                small_op,
            );
            let e = tensor_from_bytes(&[0; 4], &[1], DType::FLOAT32, &default_device()).unwrap_err();
            assert!(matches!(e, Error::Device(_)), "{e:?}");
        }
        "device_spelling" => {
            assert_eq!(default_device(), "INTERP", "case-insensitive, `:0` dropped");
            assert_eq!(small_op(), [2.0, 4.0]);
        }
        "no_compiler" => {
            assert_eq!(default_device(), "INTERP", "the documented fallback");
            assert_eq!(small_op(), [2.0, 4.0]);
            let e = get_device("CPU").err().expect("no CPU device without a compiler");
            assert!(matches!(&e, Error::Device(m) if m.contains("/nonexistent/cc")), "{e:?}");
        }
        "no_compiler_on_cpu" => {
            panics_with(&["device error", "no C compiler found", "/nonexistent/cc", "set CC"], small_op);
        }
        "failing_compiler" => {
            let _cpu = DefaultDevice::scoped("CPU");
            let x = Tensor::new([1.0f32, 2.0, 3.0]).realize();
            let e = (&x + 1.0).try_realize().unwrap_err();
            assert!(matches!(&e, Error::Compile(m) if m.contains("fake-cc: simulated failure")), "{e:?}");
            assert!(e.to_string().contains("--- source ---"), "the error shows the kernel: {e}");
            panics_with(&["realize failed", "compile error", "fake-cc: simulated failure"], || (&x * 3.0).realize());
            // several new kernels compile in parallel batches; the error comes back all the same
            let _threads = Context::new(&[("NUM_CPU_THREADS", 2)]);
            let e = Tensor::realize_all(&[x.exp(), x.sqrt(), x.sum(0, false)]).unwrap_err();
            assert!(matches!(&e, Error::Compile(m) if m.contains("fake-cc: simulated failure")), "{e:?}");
        }
        "unwritable_cache" => {
            let _cpu = DefaultDevice::scoped("CPU");
            let x = Tensor::new([1.0f32, 2.0, 3.0]).realize();
            let e = (&x + 1.0).try_realize().unwrap_err();
            assert!(matches!(e, Error::Io(_)), "{e:?}");
            assert!(e.to_string().contains("kernel cache folder") && e.to_string().contains("LAZYGRAD_CACHE"), "{e}");
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn integer_settings_that_do_not_parse_count_as_the_default() {
    let env = [("DEV", "INTERP"), ("DEBUG", "lots"), ("BEAM", "wide"), ("NOOPT", "yes")];
    let stderr = child("unparsable", &[&env[..], &[("NUM_CPU_THREADS", "many"), ("VECTOR_BYTES", "1.5")]].concat());
    for (key, value, default) in [("DEBUG", "lots", "0"), ("NUM_CPU_THREADS", "many", "")] {
        let warning = format!("lazygrad: {key}=\"{value}\" is not an integer; using {default}");
        assert_eq!(stderr.matches(&warning).count(), 1, "warned once about {key}:\n{stderr}");
    }
}

#[test]
fn integer_settings_out_of_range_are_clamped() {
    let env = [("DEV", "INTERP"), ("BEAM", "-3"), ("NUM_CPU_THREADS", "0"), ("VECTOR_BYTES", "7"), ("DEBUG", "-1")];
    child("out_of_range", &env);
    child("many_threads", &[("DEV", "INTERP"), ("NUM_CPU_THREADS", "100000")]);
}

#[test]
fn an_unknown_device_is_named_in_the_error() {
    child("unknown_device", &[("DEV", "nope")]);
    child("device_spelling", &[("DEV", "interp:0")]);
}

#[test]
fn a_missing_compiler_falls_back_to_the_interpreter_or_says_so() {
    let stderr = child("no_compiler", &[("CC", "/nonexistent/cc")]);
    assert!(stderr.contains("falling back to INTERP") && stderr.contains("/nonexistent/cc"), "{stderr}");
    child("no_compiler_on_cpu", &[("CC", "/nonexistent/cc"), ("DEV", "CPU")]);
}

#[test]
fn a_viz_port_out_of_range_is_an_error() {
    for port in [-1, 65_536, 1 << 40] {
        let e = lazygrad::viz::server::bind(port).unwrap_err();
        assert!(e.to_string().contains("not a port number"), "VIZ_PORT={port}: {e}");
    }
}

/// A "compiler" that answers `--version` and fails on everything else with its own message.
#[cfg(unix)]
fn failing_compiler(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("fake-cc");
    let script = "#!/bin/sh\ncase \"$1\" in\n  --version) echo fake-cc 1.0; exit 0 ;;\n  -print-*) exit 1 ;;\nesac\n\
                  echo \"fake-cc: simulated failure\" >&2\nexit 1\n";
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[cfg(unix)]
#[test]
fn a_failing_compiler_reports_its_own_message() {
    let dir = TempDir::new("cc");
    let cc = failing_compiler(&dir.0);
    let cache = dir.path("cache").display().to_string();
    child("failing_compiler", &[("CC", &cc), ("LAZYGRAD_CACHE", &cache)]);
    // a cache folder that cannot be made (under a file): an io error, before any compiler runs
    let file = dir.path("a-file");
    std::fs::write(&file, b"").unwrap();
    child("unwritable_cache", &[("CC", &cc), ("LAZYGRAD_CACHE", &file.join("cache").display().to_string())]);
}

/// A REDUCE by an op that is not a reduction makes codegen panic: on a worker thread when the
/// schedule's kernels are generated in parallel, on the caller's otherwise. Either way the caller
/// gets the panic's own message.
#[test]
fn a_panic_in_a_codegen_thread_reaches_the_caller() {
    let _d = interp();
    // the spec checks would reject the graph before codegen (tests/spec.rs)
    let _threads = Context::new(&[("NUM_CPU_THREADS", 2), ("SPEC", 0)]);
    let x = Tensor::ones(&[4, 1000]).contiguous().realize();
    let u = x.uop();
    let reduce = UOp::new(Ops::ReduceAxis, u.dtype(), vec![u], Arg::ReduceAxis(Ops::Sin, vec![1]));
    let bad = Tensor::from_uop(reduce, "INTERP");
    panics_with(&["REDUCE: SIN is not a reduce op"], || Tensor::realize_all(&[x.exp(), bad.clone()]));
    panics_with(&["REDUCE: SIN is not a reduce op"], || bad.realize());
}

/// The examples on a device this machine cannot open (no Metal here, no NVIDIA driver, a name
/// that is no device) end with one `error:` line naming the device and exit code 1: no panic,
/// no backtrace (some panicked in their first random draw, others printed the error's Debug).
/// They are the binaries `cargo test` builds beside this one.
#[test]
fn examples_end_with_one_error_line_on_a_device_they_cannot_open() {
    let examples = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("examples");
    for name in ["lazy_matmul", "autograd", "linear_net", "beautiful_mnist", "llama", "sentence_embed"] {
        let exe = examples.join(name);
        assert!(exe.exists(), "{} is not built: `cargo test` builds the examples", exe.display());
        for (dev, says) in
            [("METAL", "DEV=WEBGPU runs them"), ("NOPE", "unknown device \"NOPE\""), ("CL:99", "no device 99")]
        {
            let out = Command::new(&exe).env("DEV", dev).env("RUST_BACKTRACE", "1").output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name} on {dev}: {stderr}");
            assert!(stderr.starts_with("error: ") && stderr.contains(says), "{name} on {dev}: {stderr}");
            assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{name} on {dev}: {stderr}");
        }
    }
}

/// A random draw on a device that cannot be opened returns the device's error from `try_rand`
/// (and `try_randint`) instead of panicking where the counter is advanced.
#[test]
fn a_random_draw_on_a_device_that_cannot_run_is_an_error() {
    let _nope = DefaultDevice::scoped("NOPE");
    let e = Tensor::try_rand(&[3]).expect_err("drew on a device that does not exist");
    assert!(matches!(e, Error::Device(ref m) if m.contains("NOPE")), "{e:?}");
    assert!(matches!(Tensor::try_randint(&[3], 0, 5), Err(Error::Device(_))));
}
