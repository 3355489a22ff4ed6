//! A GPT-2-style decoder, nanoGPT's shape: token and position embeddings, blocks of pre-norm
//! causal self-attention and a GELU MLP, a final LayerNorm and a linear head. Its weights are
//! initialized, not loaded: it is the training step the benchmark times against PyTorch's.

use crate::module;
use crate::nn::layers::{Embedding, LayerNorm, Linear};
use crate::Tensor;

/// The model's sizes.
#[derive(Clone, Copy, Debug)]
pub struct GptConfig {
    pub vocab: usize,
    /// The longest sequence it reads (the position table's rows).
    pub context: usize,
    pub layers: usize,
    pub heads: usize,
    pub width: usize,
}

/// One transformer block: attention then MLP, each after a LayerNorm and added back.
pub struct Block {
    pub ln_1: LayerNorm,
    pub c_attn: Linear,
    pub c_proj: Linear,
    pub ln_2: LayerNorm,
    pub c_fc: Linear,
    pub mlp_proj: Linear,
    heads: usize,
}
module!(Block { ln_1, c_attn, c_proj, ln_2, c_fc, mlp_proj });

impl Block {
    fn new(width: usize, heads: usize) -> Block {
        Block {
            ln_1: LayerNorm::new(&[width], 1e-5, true),
            c_attn: Linear::new(width, 3 * width, true),
            c_proj: Linear::new(width, width, true),
            ln_2: LayerNorm::new(&[width], 1e-5, true),
            c_fc: Linear::new(width, 4 * width, true),
            mlp_proj: Linear::new(4 * width, width, true),
            heads,
        }
    }

    /// `x` of shape `[batch, tokens, width]`, each token attending to itself and those before.
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = x.shape();
        let (b, t, w) = (s[0], s[1], s[2]);
        let heads = |u: &Tensor| u.reshape(&[b, t, self.heads, w / self.heads]).transpose(1, 2);
        let qkv = self.c_attn.forward(&self.ln_1.forward(x));
        let [q, k, v] = [0, 1, 2].map(|i| heads(&qkv.shrink(&[(0, b), (0, t), (i * w, (i + 1) * w)])));
        let attn = q.scaled_dot_product_attention(&k, &v, None, true).transpose(1, 2).reshape(&[b, t, w]);
        let x = x + &self.c_proj.forward(&attn);
        let mlp = self.mlp_proj.forward(&self.c_fc.forward(&self.ln_2.forward(&x)).gelu());
        &x + &mlp
    }
}

/// The decoder.
pub struct Gpt {
    pub wte: Embedding,
    pub wpe: Embedding,
    pub h: Vec<Block>,
    pub ln_f: LayerNorm,
    pub lm_head: Linear,
}
module!(Gpt { wte, wpe, h, ln_f, lm_head });

impl Gpt {
    pub fn new(c: GptConfig) -> Gpt {
        assert!(c.width.is_multiple_of(c.heads), "GPT: width {} is no multiple of {} heads", c.width, c.heads);
        Gpt {
            wte: Embedding::new(c.vocab, c.width),
            wpe: Embedding::new(c.context, c.width),
            h: (0..c.layers).map(|_| Block::new(c.width, c.heads)).collect(),
            ln_f: LayerNorm::new(&[c.width], 1e-5, true),
            lm_head: Linear::new(c.width, c.vocab, false),
        }
    }

    /// Logits `[batch, tokens, vocab]` of the next token at each position of `tokens`, integer
    /// ids of shape `[batch, tokens]`.
    pub fn forward(&self, tokens: &Tensor) -> Tensor {
        let t = tokens.shape()[1];
        let positions = Tensor::arange(t).to(tokens.device()).reshape(&[1, t]);
        let x = self.wte.forward(tokens) + self.wpe.forward(&positions);
        let x = self.h.iter().fold(x, |x, block| block.forward(&x));
        self.lm_head.forward(&self.ln_f.forward(&x))
    }
}
