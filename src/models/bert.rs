//! BERT, the encoder of sentence-transformers' MiniLM models (all-MiniLM-L6-v2): token, position
//! and segment embeddings, then layers of self-attention and a GELU feed-forward, each followed
//! by a residual LayerNorm. Weights are named as Hugging Face's `BertModel` names them, so a
//! `model.safetensors` loads as it is; `sentence_embedding` adds sentence-transformers' mean
//! pooling and L2 normalization.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::module;
use crate::nn::layers::{Embedding, LayerNorm, Linear};
use crate::nn::state::{load_state_dict, safe_load};
use crate::tensor::Tensor;
use crate::DType;

/// The sizes a BERT checkpoint's `config.json` gives.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
}

impl BertConfig {
    /// The config from `config.json`'s text; `Error::Format` when a size is missing or the
    /// activation is not the exact GELU this model computes.
    pub fn from_json(text: &str) -> Result<BertConfig> {
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::Format(format!("BERT config: {e}")))?;
        let size = |key: &str| {
            json[key].as_u64().map(|v| v as usize).ok_or_else(|| Error::Format(format!("BERT config: no `{key}`")))
        };
        if json["hidden_act"].as_str().is_some_and(|a| a != "gelu") {
            return Err(Error::Format(format!("BERT config: activation {}, not gelu", json["hidden_act"])));
        }
        Ok(BertConfig {
            vocab_size: size("vocab_size")?,
            hidden_size: size("hidden_size")?,
            num_hidden_layers: size("num_hidden_layers")?,
            num_attention_heads: size("num_attention_heads")?,
            intermediate_size: size("intermediate_size")?,
            max_position_embeddings: size("max_position_embeddings")?,
            type_vocab_size: size("type_vocab_size")?,
            layer_norm_eps: json["layer_norm_eps"].as_f64().unwrap_or(1e-12),
        })
    }
}

struct Embeddings {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    token_type_embeddings: Embedding,
    layer_norm: LayerNorm,
}
module!(Embeddings { word_embeddings, position_embeddings, token_type_embeddings, layer_norm as "LayerNorm" });

struct SelfAttention {
    query: Linear,
    key: Linear,
    value: Linear,
}
module!(SelfAttention { query, key, value });

/// A projection back to the hidden size, added to the block's input and normalized.
struct Output {
    dense: Linear,
    layer_norm: LayerNorm,
}
module!(Output { dense, layer_norm as "LayerNorm" });

impl Output {
    fn forward(&self, x: &Tensor, residual: &Tensor) -> Tensor {
        self.layer_norm.forward(&(self.dense.forward(x) + residual))
    }
}

struct Attention {
    heads: SelfAttention,
    output: Output,
}
module!(Attention { heads as "self", output });

struct Intermediate {
    dense: Linear,
}
module!(Intermediate { dense });

struct Layer {
    attention: Attention,
    intermediate: Intermediate,
    output: Output,
}
module!(Layer { attention, intermediate, output });

struct Encoder {
    layer: Vec<Layer>,
}
module!(Encoder { layer });

/// A BERT encoder.
pub struct Bert {
    pub config: BertConfig,
    embeddings: Embeddings,
    encoder: Encoder,
}
module!(Bert { embeddings, encoder });

impl Bert {
    /// A randomly initialized model of `config`'s sizes.
    pub fn new(config: BertConfig) -> Bert {
        let (h, eps) = (config.hidden_size, config.layer_norm_eps);
        let norm = || LayerNorm::new(&[h], eps, true);
        let layer = || Layer {
            attention: Attention {
                heads: SelfAttention {
                    query: Linear::new(h, h, true),
                    key: Linear::new(h, h, true),
                    value: Linear::new(h, h, true),
                },
                output: Output { dense: Linear::new(h, h, true), layer_norm: norm() },
            },
            intermediate: Intermediate { dense: Linear::new(h, config.intermediate_size, true) },
            output: Output { dense: Linear::new(config.intermediate_size, h, true), layer_norm: norm() },
        };
        Bert {
            embeddings: Embeddings {
                word_embeddings: Embedding::new(config.vocab_size, h),
                position_embeddings: Embedding::new(config.max_position_embeddings, h),
                token_type_embeddings: Embedding::new(config.type_vocab_size, h),
                layer_norm: norm(),
            },
            encoder: Encoder { layer: (0..config.num_hidden_layers).map(|_| layer()).collect() },
            config,
        }
    }

    /// The model in folder `dir` (`config.json` and `model.safetensors`, as sentence-transformers
    /// and Hugging Face save it); every weight must be there. The checkpoint's position-id table
    /// and pooler head, which the encoder does not use, are left out.
    pub fn load(dir: &Path) -> Result<Bert> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|e| Error::from(e).at(&config_path))?;
        let model = Bert::new(BertConfig::from_json(&text)?);
        let state: BTreeMap<String, Tensor> = safe_load(dir.join("model.safetensors"))?
            .into_iter()
            .filter(|(k, _)| k != "embeddings.position_ids" && !k.starts_with("pooler."))
            .collect();
        load_state_dict(&model, &state, true)?;
        Ok(model)
    }

    /// The last layer's hidden states `[batch, tokens, hidden]` for token ids `[batch, tokens]`
    /// (one segment), attending only to the tokens `mask` (`[batch, tokens]`, 1 or 0) keeps.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Tensor {
        let (shape, c) = (ids.shape(), &self.config);
        let [b, t] = shape[..] else { panic!("Bert::forward: ids {shape:?} must be [batch, tokens]") };
        assert_eq!(mask.shape(), shape, "Bert::forward: mask and ids differ in shape");
        let e = &self.embeddings;
        let positions = Tensor::arange(t).to(ids.device()).reshape(&[1, t as isize]);
        let segments = Tensor::zeros(&[b, t]).cast(DType::INT32).to(ids.device());
        let x = e.word_embeddings.forward(ids)
            + &e.position_embeddings.forward(&positions)
            + &e.token_type_embeddings.forward(&segments);
        let mut x = e.layer_norm.forward(&x);
        let (heads, dh) = (c.num_attention_heads, c.hidden_size / c.num_attention_heads);
        let keep = mask.ne(0).reshape(&[b as isize, 1, 1, t as isize]);
        let split = |y: Tensor| y.reshape(&[b as isize, t as isize, heads as isize, dh as isize]).transpose(1, 2);
        for layer in &self.encoder.layer {
            let att = &layer.attention.heads;
            let (q, k, v) = (split(att.query.forward(&x)), split(att.key.forward(&x)), split(att.value.forward(&x)));
            let context = q.scaled_dot_product_attention(&k, &v, Some(&keep), false);
            let context = context.transpose(1, 2).reshape(&[b as isize, t as isize, c.hidden_size as isize]);
            x = layer.attention.output.forward(&context, &x);
            let hidden = layer.intermediate.dense.forward(&x).gelu_exact();
            x = layer.output.forward(&hidden, &x);
        }
        x
    }

    /// sentence-transformers' embedding of each sequence: the mean of its kept tokens' hidden
    /// states, scaled to unit length, `[batch, hidden]`.
    pub fn sentence_embedding(&self, ids: &Tensor, mask: &Tensor) -> Tensor {
        let hidden = self.forward(ids, mask);
        let m = mask.cast(hidden.dtype()).unsqueeze(-1);
        let mean = (hidden * &m).sum(1isize, false) / &m.sum(1isize, false).maximum(1e-9);
        let norm = mean.square().sum(-1isize, true).sqrt().maximum(1e-12);
        mean / &norm
    }
}

/// Token ids and attention mask `[batch, longest]` (int32; padded with 0) for `texts`, from a
/// Hugging Face `tokenizer.json` (special tokens added, as the model was trained).
pub fn encode_batch(tokenizer: &tokenizers::Tokenizer, texts: &[&str]) -> Result<(Tensor, Tensor)> {
    let encodings = texts
        .iter()
        .map(|t| tokenizer.encode(*t, true).map_err(|e| Error::value("tokenize", format!("{t:?}: {e}"))))
        .collect::<Result<Vec<_>>>()?;
    // a tokenizer.json may pad every text to a fixed length itself: its attention mask says
    // which tokens are the text's
    let tokens = |e: &tokenizers::Encoding| {
        e.get_ids()
            .iter()
            .zip(e.get_attention_mask())
            .filter(|(_, m)| **m != 0)
            .map(|(id, _)| *id)
            .collect::<Vec<u32>>()
    };
    let texts_tokens: Vec<Vec<u32>> = encodings.iter().map(tokens).collect();
    let longest = texts_tokens.iter().map(Vec::len).max().unwrap_or(0);
    let (mut ids, mut mask) = (vec![0i32; texts.len() * longest], vec![0i32; texts.len() * longest]);
    for (row, text) in texts_tokens.iter().enumerate() {
        for (col, &id) in text.iter().enumerate() {
            ids[row * longest + col] = id as i32;
            mask[row * longest + col] = 1;
        }
    }
    let shape = [texts.len(), longest];
    Ok((Tensor::from_vec(ids, &shape), Tensor::from_vec(mask, &shape)))
}
