//! Sentence embeddings with all-MiniLM-L6-v2 (BERT, `models/bert.rs`): WordPiece tokens from the
//! model's `tokenizer.json`, the encoder, mean pooling and L2 normalization, then the cosine
//! similarity of every pair of sentences.
//!
//! `tools/setup.sh --models && cargo run --release --example sentence_embed [SENTENCE...]`;
//! `MINILM_DIR` points at another sentence-transformers BERT folder.

use std::time::Instant;

use lazygrad::models::bert::{encode_batch, Bert};
use lazygrad::models::model_dir;

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    let dir = model_dir("all-MiniLM-L6-v2", "MINILM_DIR");
    let model = Bert::load(&dir).map_err(|e| {
        lazygrad::Error::value(
            "sentence_embed",
            format!("{}: {e}\n(tools/setup.sh --models fetches the model)", dir.display()),
        )
    })?;
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json"))
        .map_err(|e| lazygrad::Error::Format(format!("{}/tokenizer.json: {e}", dir.display())))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sentences: Vec<&str> = match args.is_empty() {
        true => vec![
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "A man is riding a horse.",
            "A monkey is playing drums.",
            "Someone in a gorilla costume is playing a set of drums.",
        ],
        false => args.iter().map(String::as_str).collect(),
    };
    let start = Instant::now();
    let (ids, mask) = encode_batch(&tokenizer, &sentences)?;
    let embeddings = model.sentence_embedding(&ids, &mask);
    // unit vectors: their dot products are the cosine similarities
    let similarity = embeddings.matmul(&embeddings.T()).try_realize()?.to_vec::<f32>();
    println!("embedded {} sentences in {:.2} s", sentences.len(), start.elapsed().as_secs_f64());
    let n = sentences.len();
    for (i, s) in sentences.iter().enumerate() {
        let row: Vec<String> = similarity[i * n..(i + 1) * n].iter().map(|v| format!("{v:5.2}")).collect();
        println!("{}  {s}", row.join(" "));
    }
    Ok(())
}
