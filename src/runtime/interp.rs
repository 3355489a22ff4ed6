//! (being written)
use crate::error::Result;
pub struct InterpDevice;
impl super::Device for InterpDevice {
    fn name(&self) -> &str { "INTERP" }
    fn renderer(&self) -> Option<&dyn crate::renderer::Renderer> { None }
    fn compile(&self, _spec: &crate::codegen::ProgramSpec) -> Result<std::sync::Arc<dyn super::Program>> { todo!() }
}
