//! Advanced use: build a kernel's UOp graph by hand, then codegen, compile and run it.

use std::sync::Arc;

use lazygrad::dtype::AddrSpace;
use lazygrad::engine::get_runner;
use lazygrad::runtime::Buffer;
use lazygrad::uop::{Arg, AxisKind, Kernel, Ops, UOp};
use lazygrad::DType;

/// `out[i] = in[i] * 2 + i` for `i` in `0..8`, as a kernel (checked against the kernel stage's
/// spec where `SPEC` is on).
fn kernel() -> Kernel {
    let f32p = DType::FLOAT32.ptr(AddrSpace::Global);
    let (out, inp) = (UOp::new(Ops::Param, f32p, vec![], Arg::Int(0)), UOp::new(Ops::Param, f32p, vec![], Arg::Int(1)));
    let i = UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(8)], Arg::Range(0, AxisKind::Loop));
    let load = UOp::new(
        Ops::Load,
        DType::FLOAT32,
        vec![UOp::new(Ops::Index, f32p, vec![inp, i.clone()], Arg::None)],
        Arg::None,
    );
    let value = load.alu(Ops::Mul, &[&UOp::const_float(DType::FLOAT32, 2.0)]).alu(Ops::Add, &[&i.cast(DType::FLOAT32)]);
    let store =
        UOp::new(Ops::Store, DType::VOID, vec![UOp::new(Ops::Index, f32p, vec![out, i], Arg::None), value], Arg::None);
    Kernel::new(UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None), "a hand-built kernel").unwrap()
}

#[test]
fn hand_built_kernel_runs_on_every_device() {
    for device in ["CPU", "INTERP"] {
        let out = Arc::new(Buffer::new(device, 8, DType::FLOAT32));
        let inp = Arc::new(Buffer::new(device, 8, DType::FLOAT32));
        let data: Vec<u8> = (0..8).flat_map(|x| (x as f32 * 0.5).to_le_bytes()).collect();
        inp.copyin(&data).unwrap();
        get_runner(device, &kernel()).unwrap().launch(&[out.clone(), inp], &[]).unwrap();
        let got: Vec<f32> =
            out.copyout().unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, (0..8).map(|x| x as f32 * 2.0).collect::<Vec<_>>(), "on {device}");
    }
}

#[test]
fn a_launch_on_a_short_buffer_is_refused() {
    for device in ["CPU", "INTERP"] {
        let out = Arc::new(Buffer::new(device, 8, DType::FLOAT32));
        let short = Arc::new(Buffer::new(device, 4, DType::FLOAT32));
        let err = get_runner(device, &kernel()).unwrap().launch(&[out, short], &[]).unwrap_err();
        assert!(
            matches!(&err, lazygrad::Error::OutOfBounds { slot: 1, reach, bytes: 16, .. } if *reach == (0..32)),
            "{device}: {err}"
        );
    }
}

#[test]
fn interp_reports_out_of_bounds_instead_of_crashing() {
    let out = Arc::new(Buffer::new("INTERP", 8, DType::FLOAT32));
    let short = Arc::new(Buffer::new("INTERP", 4, DType::FLOAT32));
    let spec = lazygrad::codegen::get_program(&kernel(), &lazygrad::renderer::listing::ListingRenderer).unwrap();
    let program = lazygrad::runtime::get_device("INTERP").unwrap().compile(&spec).unwrap();
    // SAFETY: INTERP checks every access against its buffer before it makes it, which is what this
    // tests, past the launch check
    let err = unsafe { program.run(&Buffer::kernel_args(&[out, short]).unwrap(), &[]) }.unwrap_err();
    assert!(err.to_string().contains("out of bounds"), "{err}");
}

/// A tensor over a constant built by hand, with no device of its own (tinygrad's
/// `Tensor(UOp.const(2.0).cast(dtypes.float))`): it computes on the tensor's device, alone, cast,
/// in arithmetic and copied.
#[test]
fn a_tensor_over_a_bare_constant_reads_its_value() {
    for device in ["CPU", "INTERP"] {
        let two = UOp::const_float(DType::FLOAT32, 2.0);
        let t = lazygrad::Tensor::from_uop(two.clone(), device);
        assert_eq!((t.shape(), t.to_vec::<f32>()), (vec![], vec![2.0]), "{device}");
        let half = lazygrad::Tensor::from_uop(two.cast(DType::FLOAT16), device);
        assert_eq!((&half + 1.0).float().to_vec::<f32>(), [3.0], "{device}");
        let three = lazygrad::Tensor::from_uop(UOp::const_int(DType::INT32, 3), device);
        assert_eq!(three.clone_to(Some("CPU")).to_vec::<i32>(), [3], "{device}");
    }
}
