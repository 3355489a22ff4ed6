//! LLaMA (SmolLM2, TinyLlama, Llama 2/3 ...) from a GGUF file: RMSNorm, rotary position
//! embeddings, grouped-query attention with a KV cache, a SwiGLU feed-forward, and tied or
//! separate output embeddings. Weights keep the GGUF's names. Those in Q8_0, Q4_0 or Q4_1 stay
//! quantized and are multiplied as such (`nn/quantized.rs`): each matrix-vector product reads
//! the blocks, not float32. Others are dequantized once, at load, into float32.
//!
//! The KV cache holds `max_context` positions. A decode step takes its token and position as
//! bound variables (`Variable`): it reads the token's row of the embedding, writes the
//! position's row of each cache and attends over the `pos + 1` rows filled so far, and one graph
//! (one set of kernels) serves every position: the JIT captures it once and replays it with the
//! new values.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::nn::gguf::{gguf_weights, GgufValue};
use crate::nn::layers::RMSNorm;
use crate::nn::quantized::Weight;
use crate::tensor::Jit;
use crate::tensor::Tensor;
use crate::uop::{BoundVar, Sint, Variable};
use crate::DType;

/// Tokens a prefill JIT (`prefill_jit`) takes at once.
pub const PREFILL_CHUNK: usize = 128;

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

/// One transformer block's layers, by their GGUF names (the attention's query, key and value
/// projections joined), and its KV cache.
struct Block {
    attn_norm: RMSNorm,
    /// The query, key and value projections' rows in one matrix: one product computes all three.
    attn_qkv: Weight,
    attn_output: Weight,
    ffn_norm: RMSNorm,
    ffn_gate: Weight,
    ffn_up: Weight,
    ffn_down: Weight,
    cache_k: Tensor,
    cache_v: Tensor,
}

/// A LLaMA model with its KV cache.
pub struct Llama {
    pub config: LlamaConfig,
    token_embd: Weight,
    blocks: Vec<Block>,
    output_norm: RMSNorm,
    /// The output projection; the token embedding when tied (absent from the file).
    output: Option<Weight>,
    /// `cos` and `sin` of every position's rotation angles, `[max_context, head_dim / 2]`,
    /// looked up by position.
    rope: (Tensor, Tensor),
    /// `0..max_context` as int32 `[max_context, 1]`, stored: the positions of cache rows.
    positions: Tensor,
    /// The token a decode step reads, and its position.
    token: Variable,
    pos: Variable,
}

impl Llama {
    /// The model in GGUF file `path`, with a KV cache of `max_context` positions (zeros, on the
    /// default device), and the file's metadata (its tokenizer for `gguf_tokenizer`).
    pub fn load(path: &Path, max_context: usize) -> Result<(Llama, BTreeMap<String, GgufValue>)> {
        let (meta, mut weights) = gguf_weights(path)?;
        let config = LlamaConfig::from_gguf(&meta, max_context)?;
        // a weight as the file has it, lazily (`Weight::realize` stores it)
        let mut take = |name: &str| {
            weights.remove(name).ok_or_else(|| Error::Format(format!("{}: no tensor `{name}`", path.display())))
        };
        let (ctx, eps) = (config.max_context, config.norm_eps);
        let cache = || Tensor::zeros(&[config.n_kv_heads, ctx, config.head_dim()]).contiguous().realize();
        let norm = |weight: Weight| RMSNorm { weight: Some(weight.dense()), eps };
        let blocks = (0..config.n_layers)
            .map(|i| {
                let name = |part: &str| format!("blk.{i}.{part}.weight");
                let [q, k, v] = ["attn_q", "attn_k", "attn_v"].map(|part| take(&name(part)));
                let attn_qkv = Weight::cat_rows(&[&q?, &k?, &v?]).realize();
                let mut w = |part: &str| take(&name(part)).map(Weight::realize);
                Ok(Block {
                    attn_norm: norm(w("attn_norm")?),
                    attn_qkv,
                    attn_output: w("attn_output")?,
                    ffn_norm: norm(w("ffn_norm")?),
                    ffn_gate: w("ffn_gate")?,
                    ffn_up: w("ffn_up")?,
                    ffn_down: w("ffn_down")?,
                    cache_k: cache(),
                    cache_v: cache(),
                })
            })
            .collect::<Result<Vec<Block>>>()?;
        let token_embd = take("token_embd.weight")?.realize();
        let output = take("output.weight").ok().map(Weight::realize);
        let half = config.head_dim() / 2;
        let freqs: Vec<f32> =
            (0..half).map(|i| config.rope_theta.powf(-2.0 * i as f64 / config.head_dim() as f64) as f32).collect();
        let angles =
            Tensor::arange(ctx).cast(DType::FLOAT32).reshape(&[ctx as isize, 1]) * &Tensor::from_vec(freqs, &[1, half]);
        let rope = (angles.cos().contiguous().realize(), angles.sin().contiguous().realize());
        let output_norm = norm(take("output_norm.weight")?.realize());
        let (token, pos) = (Variable::new("token", 0, config.vocab_size - 1), Variable::new("pos", 0, ctx - 1));
        let positions = Tensor::arange(ctx).reshape(&[ctx as isize, 1]).contiguous().realize();
        let model = Llama { token_embd, blocks, output_norm, output, rope, positions, token, pos, config };
        // the dequantization's intermediates go back to the system: a decode step reuses none
        crate::runtime::get_device(&crate::runtime::default_device())?.allocator().free_cache();
        Ok((model, meta))
    }

    /// The model split over `devices` for model parallelism, as tinygrad's llama example splits
    /// it: the attention projections along their input axis, the feed-forward's gate and up
    /// along their output axis and its down projection along its input axis (a product over split
    /// inputs sums the devices' parts: an all-reduce), the output projection along the
    /// vocabulary (a split copy of the token embedding when the two are tied). The token
    /// embedding (read a row at a time, by a variable), the norms, the rotary tables and the KV
    /// caches are whole on each device. Errors where a split is uneven.
    pub fn shard(self, devices: &[&str]) -> Result<Llama> {
        let whole = |t: &Tensor| Ok::<_, Error>(t.try_shard(devices, None)?.contiguous().realize());
        let norm =
            |n: &RMSNorm| Ok::<_, Error>(RMSNorm { weight: n.weight.as_ref().map(whole).transpose()?, eps: n.eps });
        let (inputs, outputs) = (Some(1), Some(0));
        let blocks = self
            .blocks
            .iter()
            .map(|b| {
                Ok(Block {
                    attn_norm: norm(&b.attn_norm)?,
                    attn_qkv: b.attn_qkv.try_shard(devices, inputs)?,
                    attn_output: b.attn_output.try_shard(devices, inputs)?,
                    ffn_norm: norm(&b.ffn_norm)?,
                    ffn_gate: b.ffn_gate.try_shard(devices, outputs)?,
                    ffn_up: b.ffn_up.try_shard(devices, outputs)?,
                    ffn_down: b.ffn_down.try_shard(devices, inputs)?,
                    cache_k: whole(&b.cache_k)?,
                    cache_v: whole(&b.cache_v)?,
                })
            })
            .collect::<Result<Vec<Block>>>()?;
        Ok(Llama {
            output: Some(self.output.as_ref().unwrap_or(&self.token_embd).try_shard(devices, outputs)?),
            token_embd: self.token_embd.try_shard(devices, None)?,
            blocks,
            output_norm: norm(&self.output_norm)?,
            rope: (whole(&self.rope.0)?, whole(&self.rope.1)?),
            positions: whole(&self.positions)?,
            ..self
        })
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

    /// The inputs of a prefill (and of `prefill_jit`'s calls): each of `tokens` and the
    /// position `start` of the first, as bound variables (`start`'s range leaves room for the
    /// tokens in the cache).
    pub fn prefill_inputs(&self, tokens: &[u32], start: usize) -> Vec<Tensor> {
        let room = self.config.max_context.checked_sub(tokens.len());
        let room = room
            .unwrap_or_else(|| panic!("prefill: {} tokens pass the cache's {}", tokens.len(), self.config.max_context));
        let vocab = self.config.vocab_size - 1;
        let token = |(i, &t): (usize, &u32)| Variable::new(&format!("token{i}"), 0, vocab).bind(t as usize);
        let vars: Vec<BoundVar> =
            tokens.iter().enumerate().map(token).chain([Variable::new("pos", 0, room).bind(start)]).collect();
        vars.iter().map(Tensor::from_var).collect()
    }

    /// A JIT over `prefill` of a fixed number of tokens: call it with `prefill_inputs`.
    pub fn prefill_jit(&self) -> Jit<impl FnMut(&[Tensor]) -> Vec<Tensor> + '_> {
        Jit::new(|io: &[Tensor]| {
            let vars: Vec<BoundVar> =
                io.iter().map(|t| t.as_var().expect("prefill inputs are bound variables (prefill_inputs)")).collect();
            let (start, tokens) = vars.split_last().expect("a prefill's inputs end with its start");
            vec![self.prefill(tokens, start)]
        })
    }

    /// The logits after `tokens` from position `start`, computed now: whole chunks of
    /// `PREFILL_CHUNK` tokens through `prefill` (one JIT, `jit`), the rest through the decode
    /// step (`step`, a `decode_jit`).
    pub fn prefill_chunked<P, D>(
        &self,
        tokens: &[u32],
        start: usize,
        jit: &mut Jit<P>,
        step: &mut Jit<D>,
    ) -> Result<Tensor>
    where
        P: FnMut(&[Tensor]) -> Vec<Tensor>,
        D: FnMut(&[Tensor]) -> Vec<Tensor>,
    {
        let mut logits = None;
        let whole = tokens.len() / PREFILL_CHUNK * PREFILL_CHUNK;
        for (i, chunk) in tokens[..whole].chunks(PREFILL_CHUNK).enumerate() {
            logits = Some(jit.call(&self.prefill_inputs(chunk, start + i * PREFILL_CHUNK))?.remove(0));
        }
        for (i, &t) in tokens[whole..].iter().enumerate() {
            logits = Some(step.call(&self.step_inputs(t, start + whole + i))?.remove(0));
        }
        logits.ok_or_else(|| Error::value("prefill", "no tokens"))
    }

    /// One decode step, lazily: `token` at position `pos` (below `max_context`) goes into every
    /// layer's KV cache, and the logits of the next token come out, `[vocab]` float32. Reads the
    /// token's row of the embedding by its variable.
    pub fn decode_step(&self, token: &BoundVar, pos: &BoundVar) -> Tensor {
        self.prefill(std::slice::from_ref(token), pos)
    }

    /// A prefill, lazily: `tokens` at positions `start..start + T` go into every layer's KV
    /// cache in one pass (each attending to the cache and to the tokens before it), and the
    /// logits after the last come out, `[vocab]` float32. Each token's embedding row is read by
    /// its variable.
    pub fn prefill(&self, tokens: &[BoundVar], start: &BoundVar) -> Tensor {
        let row = |t: &BoundVar| self.token_embd.rows(Sint::from(t), t + 1);
        let rows: Vec<Tensor> = tokens.iter().map(row).collect();
        // stored: every layer's residual sum reads it
        self.forward(Tensor::cat(&rows.iter().collect::<Vec<_>>(), 0).contiguous(), start)
    }

    /// The model over embedded tokens `x` (`[T, dim]`) at positions `start..start + T`: each
    /// layer writes the new keys and values into its caches' rows `start..start + T` in place
    /// and attends over rows `0..start + T`, causally; the logits of the last position come out.
    fn forward(&self, mut x: Tensor, start: &BoundVar) -> Tensor {
        let c = &self.config;
        let (t, hd, ctx) = (x.shape()[0], c.head_dim(), c.max_context);
        let (nh, nkv, group) = (c.n_heads, c.n_kv_heads, c.n_heads / c.n_kv_heads);
        let (first, end) = (Sint::from(start), start + t);
        let rows = |table: &Tensor| {
            let width = Sint::Int(table.shape()[1]);
            table.shrink_sym(&[(first.clone(), end.clone()), (Sint::Int(0), width)])
        };
        let (cos, sin) = (rows(&self.rope.0), rows(&self.rope.1));
        // positions `from..to` of a cache (`[kv heads, positions, head_dim]`)
        let positions = |cache: &Tensor, from: &Sint, to: &Sint| {
            let [heads, _, width] = cache.shape()[..] else {
                unreachable!("a cache is [kv heads, positions, head_dim]")
            };
            cache.shrink_sym(&[
                (Sint::Int(0), Sint::Int(heads)),
                (from.clone(), to.clone()),
                (Sint::Int(0), Sint::Int(width)),
            ])
        };
        // the cache positions the tokens attend to, `0..end`, and which of them are theirs
        let key_pos = self.positions.shrink_sym(&[(Sint::Int(0), end.clone()), (Sint::Int(0), Sint::Int(1))]);
        let new_row = key_pos.ge(start).reshape(&[1, -1, 1]);
        // a token attends to the rows up to its own (one token: every row)
        let causal =
            (t > 1).then(|| key_pos.reshape(&[1, -1]).le(rows(&self.positions)).reshape(&[1, 1, t as isize, -1]));
        // new positions `r` of a cache hold position `r - start` of `new` (those assigned): one
        // broadcasts; more are padded by a cache's length on both sides and shifted by the
        // symbolic start
        let placed = |new: &Tensor| {
            if t == 1 {
                return new.clone();
            }
            let padded = new.pad(&[(0, 0), (ctx, ctx), (0, 0)]);
            positions(&padded, &(Sint::Int(ctx) - start), &Sint::Int(ctx + t))
        };
        // only the new positions (`new`: `[T, kv heads * head_dim]`) are written; attention reads
        // those before them as they were and the new ones through the assignment (so it runs
        // after the write). Each head's positions lie together: a decode step streams them
        let appended = |cache: &Tensor, new: &Tensor| {
            let new = new.reshape(&[t, nkv, hd]).permute(&[1, 0, 2]);
            let written = positions(cache, &first, &end).assign(&new);
            new_row.where_(placed(&written), positions(cache, &Sint::Int(0), &end))
        };
        let rotate = |x: Tensor, heads: usize| {
            // adjacent pairs (a, b) turn by each position's angles
            let pairs = x.reshape(&[t, heads, hd / 2, 2]);
            let half = |i: usize| pairs.shrink(&[(0, t), (0, heads), (0, hd / 2), (i, i + 1)]);
            let (a, b) = (half(0), half(1));
            let (cos, sin) = (cos.reshape(&[t, 1, hd / 2, 1]), sin.reshape(&[t, 1, hd / 2, 1]));
            Tensor::cat(&[&(&a * &cos - &(&b * &sin)), &(&a * &sin + &(&b * &cos))], 3).reshape(&[t, heads * hd])
        };
        for b in &self.blocks {
            let h = b.attn_norm.forward(&x);
            // the projections stored before they rotate: each rotated pair reads two of them
            let qkv = b.attn_qkv.linear(&h).contiguous();
            let columns = |from: usize, width: usize| qkv.shrink(&[(0, t), (from, from + width)]);
            let q = rotate(columns(0, nh * hd), nh);
            let k = rotate(columns(nh * hd, nkv * hd), nkv);
            let v = columns((nh + nkv) * hd, nkv * hd);
            let (keys, values) = (appended(&b.cache_k, &k), appended(&b.cache_v, &v));
            // grouped-query attention: each key/value head serves n_heads / n_kv_heads query heads
            let q = q.reshape(&[t, nkv, group, hd]).permute(&[1, 2, 0, 3]);
            let heads = |cache: &Tensor| cache.reshape(&[nkv as isize, 1, -1, hd as isize]);
            let attended = q.scaled_dot_product_attention(&heads(&keys), &heads(&values), causal.as_ref(), false);
            let attended = attended.permute(&[2, 0, 1, 3]).reshape(&[t, c.dim]);
            x = &x + &b.attn_output.linear(&attended);
            let h = b.ffn_norm.forward(&x);
            let gated = b.ffn_gate.linear(&h).silu() * &b.ffn_up.linear(&h);
            x = &x + &b.ffn_down.linear(&gated);
        }
        let last = x.shrink(&[(t - 1, t), (0, c.dim)]);
        let output = self.output.as_ref().unwrap_or(&self.token_embd);
        output.linear(&self.output_norm.forward(&last)).reshape(&[c.vocab_size as isize])
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
