//! A LLaMA-architecture chat model from a GGUF file (`models/llama.rs`): SmolLM2-135M-Instruct by
//! default, its BPE tokenizer and ChatML prompt, a JIT'd decode step over a KV cache, greedy
//! (`TEMPERATURE=0`, the default) or sampled decoding (`TEMPERATURE`, `TOP_K`); prints the reply,
//! then prefill and decode tokens per second.
//!
//! `tools/setup.sh --models && cargo run --release --example llama -- "What is the capital of France?"`;
//! settings: `LLAMA_GGUF` (another LLaMA GGUF file), `MAX_TOKENS` (64), `MAX_CONTEXT` (512),
//! `SEED`, `SHARD` (1: with n > 1, model parallel over the default device's numbers 0..n, as
//! tinygrad's llama example's `--shard`: `Llama::shard`).

use std::io::Write;
use std::time::Instant;

use lazygrad::helpers::{getenv, getenv_str};
use lazygrad::models::llama::{chat_prompt, gguf_tokenizer, Llama};
use lazygrad::models::model_dir;
use lazygrad::{DType, Tensor};

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    let path = getenv_str("LLAMA_GGUF")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| model_dir("smollm2-135m-instruct", "LLAMA_DIR").join("SmolLM2-135M-Instruct.Q4_1.gguf"));
    let (model, meta) = Llama::load(&path, getenv("MAX_CONTEXT", 512) as usize).map_err(|e| {
        lazygrad::Error::value("llama", format!("{e}\n(tools/setup.sh --models fetches SmolLM2-135M-Instruct)"))
    })?;
    let shard = getenv("SHARD", 1).max(1) as usize;
    let model = match shard {
        1 => model,
        n => model.shard(&lazygrad::runtime::default_devices(n).iter().map(String::as_str).collect::<Vec<_>>())?,
    };
    let tokenizer = gguf_tokenizer(&meta)?;
    let user = std::env::args().nth(1).unwrap_or_else(|| "What is the capital of France?".into());
    let prompt = tokenizer
        .encode(chat_prompt(&user), false)
        .map_err(|e| lazygrad::Error::value("llama", format!("tokenizing the prompt: {e}")))?
        .get_ids()
        .to_vec();
    let (max_tokens, temperature, top_k) = (
        getenv("MAX_TOKENS", 64) as usize,
        getenv_str("TEMPERATURE").and_then(|t| t.parse::<f64>().ok()).unwrap_or(0.0),
        getenv("TOP_K", 0) as usize,
    );
    if prompt.len() + max_tokens > model.config.max_context {
        return Err(lazygrad::Error::value(
            "llama",
            format!(
                "{} prompt tokens and {max_tokens} new ones pass MAX_CONTEXT={}",
                prompt.len(),
                model.config.max_context
            ),
        ));
    }
    Tensor::manual_seed(getenv("SEED", 42) as u64);
    let (mut step, mut prefill) = (model.decode_jit(), model.prefill_jit());
    let eos = tokenizer.token_to_id("<|im_end|>");
    let start = Instant::now();
    let mut logits = model.prefill_chunked(&prompt, 0, &mut prefill, &mut step)?;
    let prefill_s = start.elapsed().as_secs_f64();
    let (mut reply, start) = (vec![], Instant::now());
    for i in 0..max_tokens {
        let next = match temperature > 0.0 {
            false => logits.argmax(None, false).item::<i32>() as u32,
            true => sample(&logits, temperature, top_k),
        };
        if Some(next) == eos {
            break;
        }
        reply.push(next);
        let text = tokenizer.decode(&reply, true).unwrap_or_default();
        print!("\r{text}");
        let _ = std::io::stdout().flush();
        logits = step.call(&model.step_inputs(next, prompt.len() + i))?.remove(0);
    }
    let decode_s = start.elapsed().as_secs_f64();
    println!();
    eprintln!(
        "prefill {} tokens: {:.1} tok/s; decode {} tokens: {:.1} tok/s",
        prompt.len(),
        prompt.len() as f64 / prefill_s,
        reply.len(),
        reply.len() as f64 / decode_s.max(1e-9)
    );
    Ok(())
}

/// A token drawn from `softmax(logits / temperature)`, over the `top_k` likeliest when non-zero.
fn sample(logits: &Tensor, temperature: f64, top_k: usize) -> u32 {
    let scaled = (logits / temperature).cast(DType::FLOAT32);
    let scaled = match top_k {
        0 => scaled,
        k => {
            let kth = scaled.topk(k, -1, true).0.min(None, false);
            scaled.ge(&kth).where_(&scaled, f64::NEG_INFINITY)
        }
    };
    scaled.softmax(-1isize).multinomial(1, false).item::<i32>() as u32
}
