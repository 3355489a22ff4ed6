//! LLaMA (SmolLM2, TinyLlama, Llama 2/3 ...) from a GGUF file: RMSNorm, rotary position
//! embeddings, grouped-query attention with a KV cache, a SwiGLU feed-forward, and tied or
//! separate output embeddings. Weights keep the GGUF's names; each is dequantized from its
//! blocks (`nn/gguf.rs`) once, at load, into float32.
//!
//! The KV cache holds `max_context` positions. A decode step takes its token and position as
//! bound variables (`Variable`): it reads the token's row of the embedding, writes the
//! position's row of each cache and attends over the `pos + 1` rows filled so far, and one graph
//! (one set of kernels) serves every position: the JIT captures it once and replays it with the
//! new values.

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::Jit;
use crate::error::{Error, Result};
use crate::nn::gguf::{gguf_load, GgufValue};
use crate::nn::layers::{Embedding, Linear, RMSNorm};
use crate::tensor::Tensor;
use crate::uop::{BoundVar, Sint, Variable};
use crate::DType;

/// The sizes of a LLaMA model, from its GGUF metadata (`llama.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    pub dim: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub hidden_dim: usize,
    pub vocab_size: usize,
    pub norm_eps: f64,
    pub rope_theta: f64,
    /// Positions the KV cache holds.
    pub max_context: usize,
}

impl LlamaConfig {
    /// The config a GGUF's metadata gives, with a cache of `max_context` positions (at most the
    /// model's context length).
    pub fn from_gguf(meta: &BTreeMap<String, GgufValue>, max_context: usize) -> Result<LlamaConfig> {
        let arch = meta.get("general.architecture").and_then(GgufValue::as_str).unwrap_or("");
        if arch != "llama" {
            return Err(Error::Format(format!("GGUF: architecture {arch:?}, not llama")));
        }
        let get =
            |key: &str| meta.get(&format!("llama.{key}")).ok_or_else(|| Error::Format(format!("GGUF: no llama.{key}")));
        let size = |key: &str| {
            get(key)?
                .as_int()
                .map(|v| v as usize)
                .ok_or_else(|| Error::Format(format!("GGUF: llama.{key} is not a size")))
        };
        let float =
            |key: &str| get(key)?.as_f64().ok_or_else(|| Error::Format(format!("GGUF: llama.{key} is not a number")));
        let n_heads = size("attention.head_count")?;
        let vocab_size = match meta.get("tokenizer.ggml.tokens") {
            Some(GgufValue::Array(tokens)) => tokens.len(),
            _ => size("vocab_size")?,
        };
        Ok(LlamaConfig {
            dim: size("embedding_length")?,
            n_layers: size("block_count")?,
            n_heads,
            n_kv_heads: size("attention.head_count_kv").unwrap_or(n_heads),
            hidden_dim: size("feed_forward_length")?,
            vocab_size,
            norm_eps: float("attention.layer_norm_rms_epsilon")?,
            rope_theta: float("rope.freq_base").unwrap_or(10000.0),
            max_context: max_context.min(size("context_length")?),
        })
    }
    fn head_dim(&self) -> usize {
        self.dim / self.n_heads
    }
}

/// One transformer block's layers, by their GGUF names, and its KV cache.
struct Block {
    attn_norm: RMSNorm,
    attn_q: Linear,
    attn_k: Linear,
    attn_v: Linear,
    attn_output: Linear,
    ffn_norm: RMSNorm,
    ffn_gate: Linear,
    ffn_up: Linear,
    ffn_down: Linear,
    cache_k: Tensor,
    cache_v: Tensor,
}

/// A LLaMA model with its KV cache.
pub struct Llama {
    pub config: LlamaConfig,
    token_embd: Embedding,
    blocks: Vec<Block>,
    output_norm: RMSNorm,
    /// The output projection; the token embedding when tied (absent from the file).
    output: Linear,
    /// `cos` and `sin` of every position's rotation angles, `[max_context, head_dim / 2]`,
    /// looked up by position.
    rope: (Tensor, Tensor),
    /// The token a decode step reads, and its position.
    token: Variable,
    pos: Variable,
}

impl Llama {
    /// The model in GGUF file `path`, with a KV cache of `max_context` positions (zeros, on the
    /// default device), and the file's metadata (its tokenizer for `gguf_tokenizer`).
    pub fn load(path: &Path, max_context: usize) -> Result<(Llama, BTreeMap<String, GgufValue>)> {
        let (meta, mut weights) = gguf_load(path)?;
        let config = LlamaConfig::from_gguf(&meta, max_context)?;
        let mut take = |name: &str| {
            weights
                .remove(name)
                .map(|w| w.cast(DType::FLOAT32).contiguous().realize())
                .ok_or_else(|| Error::Format(format!("{}: no tensor `{name}`", path.display())))
        };
        let (ctx, kv_dim, eps) = (config.max_context, config.n_kv_heads * config.head_dim(), config.norm_eps);
        let cache = || Tensor::zeros(&[ctx, kv_dim]).contiguous().realize();
        let linear = |weight: Tensor| Linear { weight, bias: None };
        let norm = |weight: Tensor| RMSNorm { weight: Some(weight), eps };
        let blocks = (0..config.n_layers)
            .map(|i| {
                let mut w = |part: &str| take(&format!("blk.{i}.{part}.weight"));
                Ok(Block {
                    attn_norm: norm(w("attn_norm")?),
                    attn_q: linear(w("attn_q")?),
                    attn_k: linear(w("attn_k")?),
                    attn_v: linear(w("attn_v")?),
                    attn_output: linear(w("attn_output")?),
                    ffn_norm: norm(w("ffn_norm")?),
                    ffn_gate: linear(w("ffn_gate")?),
                    ffn_up: linear(w("ffn_up")?),
                    ffn_down: linear(w("ffn_down")?),
                    cache_k: cache(),
                    cache_v: cache(),
                })
            })
            .collect::<Result<Vec<Block>>>()?;
        let token_embd = take("token_embd.weight")?;
        let output = linear(take("output.weight").unwrap_or_else(|_| token_embd.clone()));
        let half = config.head_dim() / 2;
        let freqs: Vec<f32> =
            (0..half).map(|i| config.rope_theta.powf(-2.0 * i as f64 / config.head_dim() as f64) as f32).collect();
        let angles =
            Tensor::arange(ctx).cast(DType::FLOAT32).reshape(&[ctx as isize, 1]) * &Tensor::from_vec(freqs, &[1, half]);
        let rope = (angles.cos().contiguous().realize(), angles.sin().contiguous().realize());
        let output_norm = norm(take("output_norm.weight")?);
        let (token, pos) = (Variable::new("token", 0, config.vocab_size - 1), Variable::new("pos", 0, ctx - 1));
        let token_embd = Embedding { weight: token_embd };
        let model = Llama { token_embd, blocks, output_norm, output, rope, token, pos, config };
        // the dequantization's intermediates go back to the system: a decode step reuses none
        crate::runtime::get_device(&crate::runtime::default_device())?.allocator().free_cache();
        Ok((model, meta))
    }

    /// The inputs of a decode step (and of `decode_jit`'s calls): `token` at position `pos`, as
    /// bound variables.
    pub fn step_inputs(&self, token: u32, pos: usize) -> [Tensor; 2] {
        [Tensor::from_var(&self.token.bind(token as usize)), Tensor::from_var(&self.pos.bind(pos))]
    }

    /// A JIT over `decode_step`: call it with `step_inputs`; it returns the logits.
    pub fn decode_jit(&self) -> Jit<impl FnMut(&[Tensor]) -> Vec<Tensor> + '_> {
        Jit::new(|io: &[Tensor]| {
            let var = |t: &Tensor| t.as_var().expect("decode step inputs are bound variables (step_inputs)");
            vec![self.decode_step(&var(&io[0]), &var(&io[1]))]
        })
    }

    /// One decode step, lazily: `token` at position `pos` (below `max_context`) goes into every
    /// layer's KV cache, and the logits of the next token come out, `[vocab]` float32. The
    /// caches' rows `0..=pos` are rewritten in place (row `pos` with the new key and value) as
    /// part of computing the logits.
    pub fn decode_step(&self, token: &BoundVar, pos: &BoundVar) -> Tensor {
        let c = &self.config;
        let (hd, ctx, kv_dim) = (c.head_dim(), c.max_context, c.n_kv_heads * c.head_dim());
        let (nh, nkv) = (c.n_heads as isize, c.n_kv_heads as isize);
        let row = |table: &Tensor, at: &BoundVar| {
            let width = Sint::Int(table.shape()[1]);
            table.shrink_sym(&[(Sint::from(at), at + 1), (Sint::Int(0), width)])
        };
        let (cos, sin) = (row(&self.rope.0, pos), row(&self.rope.1, pos));
        // the cache rows the step attends to, and which of them it writes
        let filled = |t: &Tensor| {
            let width = Sint::Int(t.shape()[1]);
            t.shrink_sym(&[(Sint::Int(0), pos + 1), (Sint::Int(0), width)])
        };
        let position = Tensor::from_var(pos).cast(DType::INT32);
        let here = filled(&Tensor::arange(ctx).reshape(&[ctx as isize, 1])).eq(&position);
        let rotate = |x: Tensor, heads: isize| {
            // adjacent pairs (a, b) turn by the position's angles
            let pairs = x.reshape(&[heads, (hd / 2) as isize, 2]);
            let (a, b) = (
                pairs.shrink(&[(0, heads as usize), (0, hd / 2), (0, 1)]),
                pairs.shrink(&[(0, heads as usize), (0, hd / 2), (1, 2)]),
            );
            let (cos, sin) = (cos.reshape(&[1, (hd / 2) as isize, 1]), sin.reshape(&[1, (hd / 2) as isize, 1]));
            Tensor::cat(&[&(&a * &cos - &(&b * &sin)), &(&a * &sin + &(&b * &cos))], 2)
                .reshape(&[1, heads * hd as isize])
        };
        let mut x = row(&self.token_embd.weight, token);
        for b in &self.blocks {
            let h = b.attn_norm.forward(&x);
            let q = rotate(b.attn_q.forward(&h), nh);
            let k = rotate(b.attn_k.forward(&h), nkv);
            let v = b.attn_v.forward(&h);
            // this position's row of each cache replaced by the new key and value
            let keys = filled(&b.cache_k).assign(&here.where_(&k, filled(&b.cache_k)));
            let values = filled(&b.cache_v).assign(&here.where_(&v, filled(&b.cache_v)));
            debug_assert_eq!(keys.shape(), [ctx, kv_dim]);
            // grouped-query attention: each key/value head serves n_heads / n_kv_heads query heads
            let group = nh / nkv;
            let q = q.reshape(&[nkv, group, 1, hd as isize]);
            let kh = keys.reshape(&[ctx as isize, nkv, 1, hd as isize]).permute(&[1, 2, 0, 3]);
            let vh = values.reshape(&[ctx as isize, nkv, 1, hd as isize]).permute(&[1, 2, 0, 3]);
            let attended = q.scaled_dot_product_attention(&kh, &vh, None, false);
            x = &x + &b.attn_output.forward(&attended.reshape(&[1, c.dim as isize]));
            let h = b.ffn_norm.forward(&x);
            let gated = b.ffn_gate.forward(&h).silu() * &b.ffn_up.forward(&h);
            x = &x + &b.ffn_down.forward(&gated);
        }
        self.output.forward(&self.output_norm.forward(&x)).reshape(&[c.vocab_size as isize])
    }
}

/// The GGUF's byte-level BPE tokenizer (`tokenizer.ggml.model` "gpt2": its tokens and merges),
/// with its control tokens (`<|im_start|>` ...) as special tokens, as Hugging Face's conversion
/// of a GGUF builds it.
pub fn gguf_tokenizer(meta: &BTreeMap<String, GgufValue>) -> Result<tokenizers::Tokenizer> {
    use tokenizers::models::bpe::{Vocab, BPE};
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    let strings = |key: &str| -> Result<Vec<&str>> {
        match meta.get(key) {
            Some(GgufValue::Array(items)) => items
                .iter()
                .map(|v| v.as_str().ok_or_else(|| Error::Format(format!("GGUF: {key} holds a non-string"))))
                .collect(),
            _ => Err(Error::Format(format!("GGUF: no {key}"))),
        }
    };
    let model = meta.get("tokenizer.ggml.model").and_then(GgufValue::as_str);
    if model != Some("gpt2") {
        return Err(Error::Format(format!("GGUF: tokenizer model {model:?}; lazygrad reads gpt2 (byte-level BPE)")));
    }
    let tokens = strings("tokenizer.ggml.tokens")?;
    let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
    let merges = strings("tokenizer.ggml.merges")?
        .iter()
        .map(|m| m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::Format("GGUF: a merge is not two tokens".into()))?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| Error::Format(format!("GGUF: tokenizer: {e}")))?;
    let mut tokenizer = tokenizers::Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    // token type 3: control tokens, never split and matched before BPE
    if let Some(GgufValue::Array(types)) = meta.get("tokenizer.ggml.token_type") {
        let control: Vec<tokenizers::AddedToken> = types
            .iter()
            .zip(&tokens)
            .filter(|(ty, _)| ty.as_int() == Some(3))
            .map(|(_, t)| tokenizers::AddedToken::from(t.to_string(), true))
            .collect();
        tokenizer.add_special_tokens(&control);
    }
    Ok(tokenizer)
}

/// A user message in ChatML, as SmolLM2's chat template renders it with its default system
/// prompt and the assistant's turn opened.
pub fn chat_prompt(user: &str) -> String {
    format!(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )
}
