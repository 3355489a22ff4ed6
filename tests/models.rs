//! Real models against their reference implementations. Ignored by default (they need the model
//! files): `tools/setup.sh --models && cargo test --test models -- --ignored` (`.ci/run` does).
//! all-MiniLM-L6-v2's sentence embeddings of tests/fixtures/minilm/sentences.txt against
//! sentence-transformers' (tools/gen_minilm_ref.py).

use lazygrad::models::bert::{encode_batch, Bert};
use lazygrad::models::model_dir;
use lazygrad::nn::state::safe_load;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm").join(name)
}

#[test]
#[ignore = "needs the model: tools/setup.sh --models"]
fn minilm_sentence_embeddings_match_sentence_transformers() {
    let dir = model_dir("all-MiniLM-L6-v2", "MINILM_DIR");
    let model = Bert::load(&dir).unwrap_or_else(|e| panic!("{}: {e} (run tools/setup.sh --models)", dir.display()));
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let text = std::fs::read_to_string(fixture("sentences.txt")).unwrap();
    let sentences: Vec<&str> = text.lines().collect();
    let (ids, mask) = encode_batch(&tokenizer, &sentences).unwrap();
    let got = model.sentence_embedding(&ids, &mask).to_vec::<f32>();
    let want = safe_load(fixture("embeddings.safetensors")).unwrap()["embeddings"].to_vec::<f32>();
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
