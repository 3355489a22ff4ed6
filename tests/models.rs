//! Real models against their reference implementations. Ignored by default (they need the model
//! files): `tools/setup.sh --models && cargo test --test models -- --ignored` (`.ci/run` does).
//! all-MiniLM-L6-v2's sentence embeddings of tests/fixtures/minilm/sentences.txt against
//! sentence-transformers' (tools/gen_minilm_ref.py); SmolLM2-135M-Instruct's prompt tokens, first
//! logits and 64 greedy tokens for tests/fixtures/llama/prompts.txt against Hugging Face
//! transformers running the same GGUF file (tools/gen_llama_ref.py), on one device and split over
//! two.

use lazygrad::models::bert::{encode_batch, Bert};
use lazygrad::models::llama::{chat_prompt, gguf_tokenizer, Llama};
use lazygrad::models::model_dir;
use lazygrad::nn::state::safe_load;

/// One model test at a time: the LLaMA test counts kernels with the process-wide counters.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
#[ignore = "needs the model: tools/setup.sh --models"]
fn minilm_sentence_embeddings_match_sentence_transformers() {
    let _serial = serial();
    let dir = model_dir("all-MiniLM-L6-v2", "MINILM_DIR");
    let model = Bert::load(&dir).unwrap_or_else(|e| panic!("{}: {e} (run tools/setup.sh --models)", dir.display()));
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let text = std::fs::read_to_string(fixture("minilm/sentences.txt")).unwrap();
    let sentences: Vec<&str> = text.lines().collect();
    let (ids, mask) = encode_batch(&tokenizer, &sentences).unwrap();
    let got = model.sentence_embedding(&ids, &mask).to_vec::<f32>();
    let want = safe_load(fixture("minilm/embeddings.safetensors")).unwrap()["embeddings"].to_vec::<f32>();
    assert_eq!(got.len(), want.len());
    let (width, mut lowest) = (384, 1.0f64);
    for (i, (g, w)) in got.chunks(width).zip(want.chunks(width)).enumerate() {
        let dot: f64 = g.iter().zip(w).map(|(a, b)| *a as f64 * *b as f64).sum();
        let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        let cosine = dot / (norm(g) * norm(w));
        assert!(cosine >= 0.9999, "sentence {i} ({:?}): cosine {cosine} to sentence-transformers'", sentences[i]);
        lowest = lowest.min(cosine);
    }
    println!("{} sentences, lowest cosine similarity to sentence-transformers: {lowest:.7}", sentences.len());
}

#[test]
#[ignore = "needs the model: tools/setup.sh --models"]
fn smollm2_greedy_decoding_matches_transformers() {
    let _serial = serial();
    let (model, meta) = smollm2();
    greedy_decoding_matches_transformers(&model, &meta);
}

#[test]
#[ignore = "needs the model: tools/setup.sh --models"]
fn smollm2_split_over_two_devices_decodes_as_on_one() {
    let _serial = serial();
    let (model, meta) = smollm2();
    let model = model.shard(&["CPU", "CPU:1"]).unwrap();
    let logits = greedy_decoding_matches_transformers(&model, &meta);
    // the vocabulary's logits come out split, half on each device
    assert_eq!((logits.device(), logits.shard_axis()), ("CPU,CPU:1", Some(0)));
}

fn smollm2() -> (Llama, std::collections::BTreeMap<String, lazygrad::nn::gguf::GgufValue>) {
    let path = model_dir("smollm2-135m-instruct", "LLAMA_DIR").join("SmolLM2-135M-Instruct.Q4_1.gguf");
    Llama::load(&path, 128).unwrap_or_else(|e| panic!("{e} (run tools/setup.sh --models)"))
}

/// The prompts' tokens, first logits (within 1e-3) and 64 greedy tokens equal transformers', the
/// first prompt fed token by token through the decode JIT and the others in one prefill; every
/// replayed step runs one set of kernels. Returns the last step's logits.
fn greedy_decoding_matches_transformers(
    model: &Llama,
    meta: &std::collections::BTreeMap<String, lazygrad::nn::gguf::GgufValue>,
) -> lazygrad::Tensor {
    let tokenizer = gguf_tokenizer(meta).unwrap();
    let reference = safe_load(fixture("llama/reference.safetensors")).unwrap();
    let prompts = std::fs::read_to_string(fixture("llama/prompts.txt")).unwrap();
    let mut step = model.decode_jit();
    // each step's logits; the kernels it ran go into `counts`
    let mut counts = std::collections::BTreeSet::new();
    let mut decode = |token: i32, pos: usize| {
        let before = lazygrad::GlobalCounters::kernel_count();
        let logits = step.call(&model.step_inputs(token as u32, pos)).unwrap().remove(0);
        counts.insert(lazygrad::GlobalCounters::kernel_count() - before);
        logits
    };
    let mut last = None;
    for (i, prompt) in prompts.lines().enumerate() {
        let ids: Vec<i32> =
            tokenizer.encode(chat_prompt(prompt), false).unwrap().get_ids().iter().map(|&t| t as i32).collect();
        assert_eq!(ids, reference[&format!("prompt_{i}")].to_vec::<i32>(), "{prompt:?}: prompt tokens");
        // the first prompt token by token through the decode step, the others in one prefill
        let mut logits = match i {
            0 => ids.iter().enumerate().map(|(pos, &t)| decode(t, pos)).last().unwrap(),
            _ => {
                let tokens: Vec<u32> = ids.iter().map(|&t| t as u32).collect();
                let vars: Vec<_> = model.prefill_inputs(&tokens, 0).iter().map(|t| t.as_var().unwrap()).collect();
                model.prefill(&vars[..tokens.len()], &vars[tokens.len()]).realize()
            }
        };
        let (got, want) = (logits.to_vec::<f32>(), reference[&format!("logits_{i}")].to_vec::<f32>());
        let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-3, "{prompt:?}: first-step logits differ by up to {worst}");
        let mut greedy = vec![];
        for k in 0..64 {
            let next = logits.argmax(None, false).item::<i32>();
            greedy.push(next);
            logits = decode(next, ids.len() + k);
        }
        let want = reference[&format!("greedy_{i}")].to_vec::<i32>();
        assert_eq!(
            greedy,
            want,
            "{prompt:?}: {:?} vs {:?}",
            tokenizer.decode(&greedy.iter().map(|&t| t as u32).collect::<Vec<_>>(), false),
            tokenizer.decode(&want.iter().map(|&t| t as u32).collect::<Vec<_>>(), false)
        );
        println!("{prompt:?}: logits within {worst:.2e}, 64 greedy tokens equal");
        last = Some(logits);
    }
    // the first two calls run eagerly and capture; every replay, at every position, is one set
    assert_eq!(counts.len(), 1, "kernels per decode step at the positions: {counts:?}");
    last.expect("prompts")
}
