//! A hasher for the program's own keys: interned nodes' addresses, hashes, setting names.

use std::hash::Hasher;

/// A fast hasher for keys that are already well spread (interned nodes' addresses, hashes): one
/// multiply per word, high bits folded down (addresses are aligned, so a product's low bits
/// alone would leave most buckets empty). Not for data an adversary chooses.
#[derive(Default)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.write_u64(u64::from_le_bytes(word.try_into().expect("chunks of 8 bytes")));
        }
        // the tail's bytes shifted into a word: copied into a zeroed array, they were a memcpy
        // call and a stalled load of what it stored (most of the time of hashing a short name)
        let tail = words.remainder();
        if !tail.is_empty() {
            self.write_u64(tail.iter().rev().fold(0, |word, &b| word << 8 | u64::from(b)));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes hash as little-endian words, the last zero-padded.
    #[test]
    fn bytes_hash_as_zero_padded_little_endian_words() {
        for text in ["", "DEBUG", "NUM_CPU_THREADS", "SPLIT_REDUCEOP_X", "a"] {
            let mut by_bytes = FastHasher::default();
            by_bytes.write(text.as_bytes());
            let mut by_words = FastHasher::default();
            for chunk in text.as_bytes().chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                by_words.write_u64(u64::from_le_bytes(word));
            }
            assert_eq!(by_bytes.finish(), by_words.finish(), "{text:?}");
        }
    }
}
