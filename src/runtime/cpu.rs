//! (being written)
use crate::error::Result;
pub struct CpuDevice;
impl CpuDevice { pub fn open() -> Result<CpuDevice> { Ok(CpuDevice) } }
impl super::Device for CpuDevice {
    fn name(&self) -> &str { "CPU" }
    fn renderer(&self) -> Option<&dyn crate::renderer::Renderer> { None }
    fn compile(&self, _spec: &crate::codegen::ProgramSpec) -> Result<std::sync::Arc<dyn super::Program>> { todo!() }
}
