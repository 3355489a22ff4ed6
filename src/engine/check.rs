//! Render checks: CI runs on machines without a GPU, so each new kernel can also be rendered for
//! a device that is not there and built or checked by that device's own front end, failing where
//! the kernel is made rather than on the device:
//! - `NVRTC_CHECK=sm_90`: CUDA C for that architecture, compiled by NVRTC;
//! - `WGSL_CHECK=1`: WGSL for any WebGPU device (WebGPU's baseline limits, no `f16`), validated by
//!   naga;
//! - `MSL_CHECK=tools/msl`: Metal, type-checked by clang++ against the `metal_stdlib` header in
//!   that folder (no Metal compiler runs here).
//!
//! A kernel in a dtype the other device lacks (float64 on Metal, 64-bit types on WebGPU) is
//! skipped: there it would be an error naming the dtype.

use std::path::Path;

use crate::error::{Error, Result};
use crate::runtime::{cuda, metal, webgpu};
use crate::uop::{Kernel, Target};

/// One check: the setting that turns it on, the target its value names, and the check of a
/// source rendered for that target.
struct RenderCheck {
    setting: &'static str,
    target: fn(&str) -> Result<Target>,
    check: fn(&str, &str) -> Result<()>,
}

const RENDER_CHECKS: [RenderCheck; 3] = [
    RenderCheck {
        setting: "NVRTC_CHECK",
        target: |arch| {
            cuda::arch_target(arch)
                .ok_or_else(|| Error::value("NVRTC_CHECK", format!("{arch} is not an architecture like sm_90")))
        },
        check: |src, arch| cuda::nvrtc_compile(src, arch).map(drop),
    },
    RenderCheck {
        setting: "WGSL_CHECK",
        target: |_| Ok(webgpu::baseline_target()),
        check: |src, _| webgpu::validate(src, false),
    },
    RenderCheck {
        setting: "MSL_CHECK",
        target: |_| Ok(metal::target()),
        check: |src, include| metal::msl_check(src, Path::new(include)),
    },
];

/// Run every render check whose setting is on (set, and not `0`) on kernel `ast`.
pub fn render_checks(ast: &Kernel) -> Result<()> {
    for c in &RENDER_CHECKS {
        let Some(value) = crate::helpers::getenv_str(c.setting).filter(|v| v != "0") else { continue };
        let renderer = crate::renderer::for_target((c.target)(&value)?);
        match crate::codegen::get_program(ast, renderer.as_ref()) {
            Err(Error::DType { .. }) => continue,
            spec => (c.check)(&spec?.src, &value)?,
        }
    }
    Ok(())
}
