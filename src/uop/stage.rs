//! Graphs typed by their IR stage: `Staged<S>` is a zero-cost wrapper of a root `UOp` whose
//! graph belongs to stage `S` (`spec::Stage`), so that a function taking a kernel cannot be
//! given a tensor graph. `Staged::new` checks the graph against the stage's spec where `SPEC` is
//! on; a `Pipeline` of a stage takes and returns graphs of it. The last stage, a kernel
//! linearized for a renderer, is a list rather than a graph: `LinearProgram`.
//!
//! ```compile_fail
//! // codegen takes kernels: a tensor graph is a compile error
//! fn codegen(graph: &lazygrad::uop::TensorGraph) {
//!     let _ = lazygrad::codegen::get_program(graph, &lazygrad::renderer::listing::ListingRenderer);
//! }
//! ```
//!
//! ```compile_fail
//! // renderers take linear programs: a kernel is a compile error
//! use lazygrad::renderer::Renderer;
//! fn render(kernel: &lazygrad::uop::Kernel) -> String {
//!     lazygrad::renderer::listing::ListingRenderer.render("k", kernel)
//! }
//! ```

use std::marker::PhantomData;

use super::spec::{self, Stage};
use super::UOp;
use crate::error::Result;

/// A stage of the IR, as a type.
pub trait IsStage {
    const STAGE: Stage;
}

/// The tensor graph (and the kernel graph the scheduler orders its steps by).
pub enum TensorStage {}
/// A kernel AST: a SINK of STOREs into INDEXed PARAMs over RANGEs, from rangeify to the last
/// codegen pass.
pub enum KernelStage {}

impl IsStage for TensorStage {
    const STAGE: Stage = Stage::Tensor;
}
impl IsStage for KernelStage {
    const STAGE: Stage = Stage::Kernel;
}

/// A graph of stage `S`, by its root.
pub struct Staged<S>(UOp, PhantomData<fn() -> S>);

/// A tensor graph.
pub type TensorGraph = Staged<TensorStage>;
/// A kernel AST: what the scheduler makes and codegen takes.
pub type Kernel = Staged<KernelStage>;

impl<S: IsStage> Staged<S> {
    /// `root` as a graph of stage `S`, made by `made_by`; with `SPEC` on, a node its stage's
    /// spec does not accept is the error, naming `made_by`.
    pub fn new(root: UOp, made_by: &str) -> Result<Staged<S>> {
        if spec::enabled() {
            spec::verify(&root, S::STAGE, made_by)?;
        }
        Ok(Staged(root, PhantomData))
    }
    /// `root`, which a step of stage `S` made and checked.
    pub(super) fn checked(root: UOp) -> Staged<S> {
        Staged(root, PhantomData)
    }
}

impl<S> Staged<S> {
    /// The graph's root.
    pub fn root(&self) -> &UOp {
        &self.0
    }
}

impl<S> std::ops::Deref for Staged<S> {
    type Target = UOp;
    fn deref(&self) -> &UOp {
        &self.0
    }
}

impl<S> Clone for Staged<S> {
    fn clone(&self) -> Self {
        Staged(self.0.clone(), PhantomData)
    }
}

impl<S> PartialEq for Staged<S> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<S> Eq for Staged<S> {}

impl<S> std::hash::Hash for Staged<S> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl<S> std::fmt::Debug for Staged<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A kernel linearized for a renderer (stage `Program`): its nodes in an order where every source
/// comes before its user, without REDUCE, each RANGE closed by an END.
#[derive(Clone, Debug, Default)]
pub struct LinearProgram(Vec<UOp>);

impl LinearProgram {
    /// `uops` as a linear program, made by `made_by`; with `SPEC` on, a node out of order or
    /// malformed, or a RANGE left open, is the error, naming `made_by`.
    pub fn new(uops: Vec<UOp>, made_by: &str) -> Result<LinearProgram> {
        if spec::enabled() {
            spec::verify_program(&uops, made_by)?;
        }
        Ok(LinearProgram(uops))
    }
}

impl std::ops::Deref for LinearProgram {
    type Target = [UOp];
    fn deref(&self) -> &[UOp] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a LinearProgram {
    type Item = &'a UOp;
    type IntoIter = std::slice::Iter<'a, UOp>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
