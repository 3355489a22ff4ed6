//! Optimizers: SGD, LAMB and its Adam/AdamW special cases, and Muon. Each step is a set of lazy
//! in-place assignments, so `schedule_step` can be realized together with the loss in one
//! schedule (and captured by the JIT).

use crate::dtype::DType;
use crate::helpers::getenv;
use crate::tensor::Tensor;

/// Shared optimizer state: the parameters, the model's other tensors (`buffers`, such as
/// running statistics: realized with each step, never updated by it), and a learning rate held
/// in a tensor, so changing it between steps changes no kernel.
pub struct Params {
    pub params: Vec<Tensor>,
    pub buffers: Vec<Tensor>,
    lr: Tensor,
}

impl Params {
    fn new(tensors: &[Tensor], lr: f64) -> Params {
        let (params, buffers): (Vec<Tensor>, Vec<Tensor>) =
            tensors.iter().cloned().partition(|t| t.dtype().is_float() && t.requires_grad_flag() != Some(false));
        let params: Vec<Tensor> = params.iter().map(|p| p.requires_grad(true)).collect();
        let _on = on_params_device(&params);
        Params { params, buffers, lr: Tensor::full_dtype(&[], lr, DType::FLOAT32).contiguous().realize() }
    }
    fn grads(&self) -> Vec<Tensor> {
        self.params
            .iter()
            .map(|p| {
                p.grad().unwrap_or_else(|| panic!("optimizer: parameter of shape {:?} has no gradient", p.shape()))
            })
            .collect()
    }
}

/// What every optimizer offers.
pub trait Optimizer {
    fn state(&self) -> &Params;
    /// The lazy updates of one step, given each parameter's gradient.
    fn updates(&mut self, grads: &[Tensor]) -> Vec<Tensor>;

    /// Forget the accumulated gradients.
    fn zero_grad(&self) {
        self.state().params.iter().for_each(|p| p.set_grad(None));
    }
    /// The tensors to realize for one step (parameters and optimizer state, assigned lazily).
    fn schedule_step(&mut self) -> Vec<Tensor> {
        assert!(
            getenv("TRAINING", 0) != 0,
            "optimizer step outside training: wrap it in Context::new(&[(\"TRAINING\", 1)])"
        );
        let grads = across_ranks(self.state().grads());
        let mut out = self.updates(&grads);
        out.extend(self.state().buffers.iter().cloned());
        out
    }
    /// Run one step now.
    fn step(&mut self) {
        let tensors = self.schedule_step();
        Tensor::realize_all(&tensors).unwrap_or_else(|e| panic!("optimizer step: {e}"));
    }
    fn lr(&self) -> f64 {
        self.state().lr.item::<f32>() as f64
    }
    /// Change the learning rate for the following steps.
    fn set_lr(&self, lr: f64) {
        let lr_now = &self.state().lr;
        lr_now.assign(&lr_now.full_like(lr)).realize();
    }
}

/// The gradients averaged over the job's processes when it has several (data parallel across
/// processes: each rank's gradient is of its part of the batch); alone, as they are.
fn across_ranks(grads: Vec<Tensor>) -> Vec<Tensor> {
    let world = crate::runtime::job::world().unwrap_or_else(|e| panic!("optimizer: {e}"));
    match world.size() {
        1 => grads,
        n => grads.iter().map(|g| g.all_reduce_ranks(crate::uop::Ops::Add) / n as f64).collect(),
    }
}

/// New tensors go where the parameters live (the first one's device, as tinygrad's optimizers
/// take it; a tuple of devices for a replicated model) while the guard lives.
fn on_params_device(params: &[Tensor]) -> Option<crate::runtime::DefaultDevice> {
    params.first().map(|p| crate::runtime::DefaultDevice::scoped(p.device()))
}

/// Zeros of `p`'s shape and dtype, stored where `p` lives.
fn zeros_like_realized(p: &Tensor) -> Tensor {
    p.zeros_like().contiguous().realize()
}

/// Stochastic gradient descent with momentum, Nesterov momentum and weight decay; with
/// Newton–Schulz steps it is Muon (see `muon`).
pub struct SGD {
    state: Params,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
    ns_steps: usize,
    buffers: Vec<Tensor>,
}

impl SGD {
    pub fn new(params: &[Tensor], lr: f64, momentum: f64, weight_decay: f64, nesterov: bool) -> SGD {
        let state = Params::new(params, lr);
        let buffers = if momentum != 0.0 { state.params.iter().map(zeros_like_realized).collect() } else { vec![] };
        SGD { state, momentum, weight_decay, nesterov, ns_steps: 0, buffers }
    }
}

/// Muon: Nesterov-momentum SGD whose update for each matrix is orthogonalized by `ns_steps`
/// Newton–Schulz iterations (vectors keep the plain momentum update).
pub fn muon(params: &[Tensor], lr: f64, momentum: f64, weight_decay: f64, ns_steps: usize) -> SGD {
    SGD { ns_steps, ..SGD::new(params, lr, momentum, weight_decay, true) }
}

impl Optimizer for SGD {
    fn state(&self) -> &Params {
        &self.state
    }
    fn updates(&mut self, grads: &[Tensor]) -> Vec<Tensor> {
        let mut out = vec![];
        for (i, (p, g)) in self.state.params.iter().zip(grads).enumerate() {
            let mut g = g + &(p.detach() * self.weight_decay);
            if self.momentum != 0.0 {
                let b = self.buffers[i].assign(&(&self.buffers[i] * self.momentum + &g));
                g = if self.nesterov { &g + &(&b * self.momentum) } else { b.clone() };
                out.push(b);
            }
            if self.ns_steps > 0 && g.ndim() >= 1 {
                g = newton_schulz(&g, self.ns_steps);
            }
            out.push(p.assign(&(p.detach() - &(&g * &self.state.lr.cast(p.dtype())))));
        }
        out
    }
}

/// LAMB (layer-wise adaptive moments); with `adam` it is Adam/AdamW (no trust ratio).
pub struct LAMB {
    state: Params,
    b1: f64,
    b2: f64,
    eps: f64,
    weight_decay: f64,
    adam: bool,
    b1_t: Tensor,
    b2_t: Tensor,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl LAMB {
    pub fn new(params: &[Tensor], lr: f64, b1: f64, b2: f64, eps: f64, weight_decay: f64, adam: bool) -> LAMB {
        let state = Params::new(params, lr);
        let _on = on_params_device(&state.params);
        let one = || Tensor::full_dtype(&[], 1.0, DType::FLOAT32).contiguous().realize();
        let (m, v) = (
            state.params.iter().map(zeros_like_realized).collect(),
            state.params.iter().map(zeros_like_realized).collect(),
        );
        LAMB { state, b1, b2, eps, weight_decay, adam, b1_t: one(), b2_t: one(), m, v }
    }
}

/// Adam: LAMB without the trust ratio and without weight decay by default.
pub fn adam(params: &[Tensor], lr: f64) -> LAMB {
    LAMB::new(params, lr, 0.9, 0.999, 1e-8, 0.0, true)
}

/// AdamW: Adam with decoupled weight decay.
pub fn adamw(params: &[Tensor], lr: f64, weight_decay: f64) -> LAMB {
    LAMB::new(params, lr, 0.9, 0.999, 1e-8, weight_decay, true)
}

impl Optimizer for LAMB {
    fn state(&self) -> &Params {
        &self.state
    }
    fn updates(&mut self, grads: &[Tensor]) -> Vec<Tensor> {
        let b1_t = self.b1_t.assign(&(&self.b1_t * self.b1));
        let b2_t = self.b2_t.assign(&(&self.b2_t * self.b2));
        let mut out = vec![b1_t.clone(), b2_t.clone()];
        for (i, (p, g)) in self.state.params.iter().zip(grads).enumerate() {
            let m = self.m[i].assign(&(&self.m[i] * self.b1 + &(g * (1.0 - self.b1))));
            let v = self.v[i].assign(&(&self.v[i] * self.b2 + &(g * g * (1.0 - self.b2))));
            let m_hat = &m / &(1.0f64 - &b1_t).cast(p.dtype());
            let v_hat = &v / &(1.0f64 - &b2_t).cast(p.dtype());
            let up = &m_hat / &(v_hat.sqrt() + self.eps) + &(p.detach() * self.weight_decay);
            let mut scale = self.state.lr.cast(p.dtype());
            if !self.adam {
                let (r1, r2) = (p.detach().square_sum().sqrt(), up.square_sum().sqrt());
                scale = &scale * &r1.gt(0.0).where_(r2.gt(0.0).where_(&r1 / &r2, 1.0), 1.0);
            }
            out.push(m);
            out.push(v);
            out.push(p.assign(&(p.detach() - &(&up * &scale))));
        }
        out
    }
}

/// Approximately orthogonalize `g` (2-D, or flattened to rows) with the quintic Newton–Schulz
/// iteration Muon uses.
fn newton_schulz(g: &Tensor, steps: usize) -> Tensor {
    let (a, b, c) = (3.4445, -4.7750, 2.0315);
    let shape = g.shape();
    let rows = shape[0] as isize;
    let mut x = g.reshape(&[rows, -1]);
    let transposed = x.shape()[0] > x.shape()[1];
    if transposed {
        x = x.T();
    }
    x = &x / &(x.square_sum().sqrt() + 1e-7);
    for _ in 0..steps {
        let m = x.matmul(&x.T());
        let poly = &(&m * b) + &(m.matmul(&m) * c);
        x = &(&x * a) + &poly.matmul(&x);
    }
    if transposed {
        x = x.T();
    }
    x.reshape(&shape)
}

impl Tensor {
    /// Sum of squares of all elements (a scalar).
    fn square_sum(&self) -> Tensor {
        (self * self).sum(None, false)
    }
}
