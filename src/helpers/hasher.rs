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
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}
