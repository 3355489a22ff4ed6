//! Process replay capture: with `PROCESS_REPLAY=<dir>`, every kernel compiled for the CPU leaves its
//! source in `<dir>`, under a name that is the same in every process that compiles that kernel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use lazygrad::codegen::replay::PROCESS_REPLAY;
use lazygrad::runtime::DefaultDevice;
use lazygrad::Tensor;

/// A few kernels of different kinds: a fused matmul + relu + sum, a softmax, an elementwise op.
#[test]
fn small_workload() {
    let _cpu = DefaultDevice::scoped("CPU");
    Tensor::manual_seed(1);
    let (a, b) = (Tensor::rand(&[8, 12]), Tensor::rand(&[12, 4]));
    let rows = a.matmul(&b).relu().sum(1, false).softmax(0);
    let total: f32 = rows.to_vec::<f32>().iter().sum();
    assert!((total - 1.0).abs() < 1e-5, "softmax sums to {total}");
    assert_eq!((Tensor::new([1.0f32, 2.0]) * 3.0).to_vec::<f32>(), vec![3.0, 6.0]);
}

/// Run `small_workload` in a fresh process that captures into `dir`; the captured files by name.
/// (The second child finds the kernels in the on-disk compile cache: capture must not depend on
/// compiling.)
fn capture_in_child(dir: &Path) -> BTreeMap<String, String> {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "small_workload"])
        .env(PROCESS_REPLAY, dir)
        .output()
        .unwrap();
    assert!(child.status.success(), "the capturing child failed:\n{}", String::from_utf8_lossy(&child.stdout));
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

fn fresh_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lazygrad-process-replay-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn capture_writes_every_kernel_source_the_same_way_each_run() {
    let (first_dir, second_dir) = (fresh_dir("first"), fresh_dir("second"));
    let first = capture_in_child(&first_dir);
    assert!(first.len() >= 3, "expected a file per kernel, got {:?}", first.keys().collect::<Vec<_>>());
    for (file, src) in &first {
        let (name, key) = file.strip_suffix(".c").and_then(|f| f.rsplit_once('-')).expect("<name>-<key>.c");
        // a one-element kernel (the random counter's) has no loops to name
        assert!(name == "E" || name.starts_with("E_") || name.starts_with("r_"), "kernel name {name}");
        assert_eq!(key.len(), 16, "a 64-bit hex key in {file}");
        assert!(src.contains(&format!(" {name}(")), "{file} holds the kernel's source:\n{src}");
    }
    assert_eq!(capture_in_child(&second_dir), first, "a second process captures the same files");
    for dir in [first_dir, second_dir] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}
