//! BEAM search: its kernels compute what the unoptimized ones (and INTERP) do, it picks opts, and
//! its disk cache is read back (and a corrupt cache file ignored).

use lazygrad::engine::search::{beam_opts, beam_search, cache_path, Found};
use lazygrad::engine::ScheduleItem;
use lazygrad::runtime::{get_device, DefaultDevice};
use lazygrad::uop::Kernel;
use lazygrad::{Context, Tensor};

/// Deterministic `rows x cols` inputs in [0, 1).
fn input(rows: usize, cols: usize, salt: usize) -> Tensor {
    let data: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 + salt * 11) % 101) as f32 / 101.0).collect();
    Tensor::from_vec(data, &[rows, cols])
}

/// The AST of the one kernel `a @ b` schedules.
fn matmul_kernel(m: usize, k: usize, n: usize) -> Kernel {
    let out = input(m, k, 1).realize().matmul(&input(k, n, 2).realize());
    let asts: Vec<Kernel> = Tensor::schedule(std::slice::from_ref(&out))
        .into_iter()
        .filter_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            ScheduleItem::Copy { .. } => None,
        })
        .collect();
    assert_eq!(asts.len(), 1);
    asts[0].clone()
}

/// `a @ b` (64x64) on `device` with the given BEAM and NOOPT (inputs realized outside them).
fn matmul_on(device: &str, beam: i64, noopt: i64) -> Vec<f32> {
    let _dev = DefaultDevice::scoped(device);
    let (a, b) = (input(64, 64, 1).realize(), input(64, 64, 2).realize());
    let _ctx = Context::new(&[("BEAM", beam), ("NOOPT", noopt)]);
    a.matmul(&b).to_vec::<f32>()
}

#[test]
fn beam_matmul_matches_noopt_and_interp() {
    let beam = matmul_on("CPU", 2, 0);
    for (what, want) in [("NOOPT", matmul_on("CPU", 0, 1)), ("INTERP", matmul_on("INTERP", 2, 0))] {
        assert_eq!(beam.len(), want.len());
        for (i, (w, g)) in want.iter().zip(&beam).enumerate() {
            assert!((w - g).abs() <= 1e-5 * w.abs().max(1.0), "BEAM vs {what}: [{i}] {w} vs {g}");
        }
    }
    // the realize above searched (or read the disk cache); the opts it chose come from memory now
    let dev = get_device("CPU").unwrap();
    let found = beam_opts(&matmul_kernel(64, 64, 64), dev.as_ref(), 2).unwrap().expect("a matmul can be timed");
    assert_eq!(found.found, Found::Memory);
    assert!(!found.opts.is_empty(), "BEAM picked no opts");
}

#[test]
fn beam_results_are_cached_on_disk_and_corrupt_files_ignored() {
    let dev = get_device("CPU").unwrap();
    let kernel = matmul_kernel(32, 16, 48);
    let path = cache_path(&kernel, &dev.target(), 2);
    let _ = std::fs::remove_file(&path);
    let first = beam_search(&kernel, dev.as_ref(), 2).unwrap().unwrap();
    assert_eq!(first.found, Found::Searched);
    assert!(path.exists(), "no cache file at {}", path.display());
    let second = beam_search(&kernel, dev.as_ref(), 2).unwrap().unwrap();
    assert_eq!((second.found, &second.opts), (Found::Disk, &first.opts));
    for corrupt in ["not a beam cache", "lazygrad beam opts v1\nUPCAST 99 4\n"] {
        std::fs::write(&path, corrupt).unwrap();
        let again = beam_search(&kernel, dev.as_ref(), 2).unwrap().unwrap();
        assert_eq!(again.found, Found::Searched, "{corrupt:?} was read as opts");
    }
}
