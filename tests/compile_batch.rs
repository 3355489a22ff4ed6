//! The CPU device compiles many kernels at once (`Device::compile_all`): in batches of one
//! translation unit each, kernels of one name in different batches, each kernel cached on disk
//! under its own source; a broken kernel fails alone and is the one the error shows.
//! One test: it points the kernel cache at a fresh folder for this whole process.

use std::sync::Arc;

use lazygrad::codegen::get_program;
use lazygrad::engine::CompiledKernel;
use lazygrad::engine::ScheduleItem;
use lazygrad::renderer::c::CRenderer;
use lazygrad::runtime::{get_device, Buffer};
use lazygrad::uop::{Kernel, ProgramSpec};
use lazygrad::Tensor;

fn kernel(t: &Tensor) -> (ProgramSpec, Vec<Arc<Buffer>>, Kernel) {
    let mut items = Tensor::schedule(std::slice::from_ref(t));
    assert_eq!(items.len(), 1, "one kernel");
    match items.remove(0) {
        ScheduleItem::Kernel { ast, bufs } => (get_program(&ast, &CRenderer).unwrap(), bufs, ast),
        ScheduleItem::Copy { .. } => panic!("a copy, not a kernel"),
    }
}

fn cached_objects(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("cpu"))
        .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "rec")).count())
}

#[test]
fn batches_compile_kernels_of_one_name_and_isolate_a_broken_one() {
    let dir = std::env::temp_dir().join(format!("lazygrad-compile-batch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("LAZYGRAD_CACHE", &dir);
    let cpu = get_device("CPU").unwrap();
    let (a, big) = (Tensor::arange(16).float().realize(), Tensor::arange(1 << 16).float().realize());
    // two kernels named E_16, a reduce, and a vector kernel (compiled with other flags); no
    // float constants, which would be launch values (`schedule/unbind.rs`)
    let graphs = [a.neg(), &a * &a, a.sum(None, false), &big + &big];
    let kernels: Vec<(ProgramSpec, Vec<Arc<Buffer>>, Kernel)> = graphs.iter().map(kernel).collect();
    assert_eq!(kernels[0].0.name.to_string(), kernels[1].0.name.to_string());
    let vector = format!("vector_size({})", lazygrad::renderer::Renderer::target(&CRenderer).vector_bytes);
    assert!(kernels[3].0.src.contains(&vector) && !kernels[0].0.src.contains("vector_size"));
    let specs: Vec<&ProgramSpec> = kernels.iter().map(|k| &k.0).collect();
    let before = cached_objects(&dir);
    let programs = cpu.compile_all(&specs).unwrap();
    assert_eq!(cached_objects(&dir), before + 4, "each kernel is cached under its own source");
    for (program, (spec, bufs, ast)) in programs.into_iter().zip(&kernels) {
        CompiledKernel::new(ast, spec, program).launch(bufs, &[]).unwrap();
    }
    let out = |i: usize| -> Vec<f32> {
        kernels[i].1[0].copyout().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    assert_eq!(out(0), (0..16).map(|i| -(i as f32)).collect::<Vec<_>>());
    assert_eq!(out(1), (0..16).map(|i| (i * i) as f32).collect::<Vec<_>>());
    assert_eq!(out(2), vec![120.0]);
    assert_eq!(out(3)[(1 << 16) - 1], 2.0 * 65535.0);

    // a broken kernel in one batch (one core) with a good new one: the error shows the broken
    // source, the good one is compiled and cached all the same
    let _one_core = lazygrad::Context::new(&[("NUM_CPU_THREADS", 1)]);
    let (good, bufs, good_ast) = kernel(&a.reshape(&[4, 4]).sum(1, false));
    let mut broken = kernels[0].0.clone();
    broken.src = format!("{}\nthis is not C;\n", broken.src);
    let err = cpu.compile_all(&[&broken, &good]).err().expect("the batch fails").to_string();
    assert!(err.contains("compile error") && err.contains("this is not C"), "{err}");
    assert_eq!(cached_objects(&dir), before + 5);
    CompiledKernel::compile(&*cpu, &good_ast, &good).unwrap().launch(&bufs, &[]).unwrap();
    assert_eq!(
        bufs[0].copyout().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect::<Vec<_>>(),
        [6.0, 22.0, 38.0, 54.0]
    );

    // damaged entries (cut short, overwritten, emptied) are rebuilt, never loaded; each is
    // replaced, not written over: this process has the old ones mapped
    let entries: Vec<std::path::PathBuf> = std::fs::read_dir(dir.join("cpu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    for (i, path) in entries.iter().enumerate() {
        let bytes = std::fs::read(path).unwrap();
        let damaged = match i % 3 {
            0 => bytes[..bytes.len() / 2].to_vec(),
            1 => bytes.iter().map(|b| b ^ 0x5a).collect(),
            _ => vec![],
        };
        std::fs::write(path.with_extension("damaged"), damaged).unwrap();
        std::fs::rename(path.with_extension("damaged"), path).unwrap();
    }
    let program = cpu.compile_all(&specs).unwrap().swap_remove(1);
    CompiledKernel::new(&kernels[1].2, &kernels[1].0, program).launch(&kernels[1].1, &[]).unwrap();
    assert_eq!(out(1), (0..16).map(|i| (i * i) as f32).collect::<Vec<_>>());
    CompiledKernel::compile(&*cpu, &good_ast, &good).unwrap().launch(&bufs, &[]).unwrap();
    assert_eq!(cached_objects(&dir), before + 5, "rebuilt in place");
    let _ = std::fs::remove_dir_all(&dir);
}
