//! Seeded, reproducible random tensors from a counter-based generator (Threefry-2x32).

use std::sync::atomic::{AtomicU64, Ordering};

use super::Tensor;

static SEED: AtomicU64 = AtomicU64::new(0);
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Threefry-2x32 with 20 rounds: a keyed bijection on 64-bit counters.
pub fn threefry2x32(key: u64, counter: u64) -> u64 {
    const ROT: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let (k0, k1) = (key as u32, (key >> 32) as u32);
    let ks = [k0, k1, k0 ^ k1 ^ 0x1BD1_1BDA];
    let (mut x0, mut x1) = ((counter as u32).wrapping_add(ks[0]), ((counter >> 32) as u32).wrapping_add(ks[1]));
    for round in 0..5 {
        for r in 0..4 {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(ROT[(round % 2) * 4 + r]) ^ x0;
        }
        let i = round + 1;
        x0 = x0.wrapping_add(ks[i % 3]);
        x1 = x1.wrapping_add(ks[(i + 1) % 3]).wrapping_add(i as u32);
    }
    ((x1 as u64) << 32) | x0 as u64
}

impl Tensor {
    /// Reset the random stream: the same seed gives the same tensors in the same order.
    pub fn manual_seed(seed: u64) {
        SEED.store(seed, Ordering::Relaxed);
        COUNTER.store(0, Ordering::Relaxed);
    }
    /// Uniform floats in `[0, 1)` (float32).
    pub fn rand(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let (key, base) = (SEED.load(Ordering::Relaxed), COUNTER.fetch_add(n as u64, Ordering::Relaxed));
        let data: Vec<f32> =
            (0..n as u64).map(|i| (threefry2x32(key, base + i) >> 40) as f32 * (1.0 / (1u64 << 24) as f32)).collect();
        Tensor::from_slice(&data, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::threefry2x32;

    #[test]
    fn threefry_is_a_keyed_bijection_sample() {
        let a: Vec<u64> = (0..64).map(|i| threefry2x32(7, i)).collect();
        let mut b = a.clone();
        b.sort();
        b.dedup();
        assert_eq!(b.len(), 64);
        assert_ne!(threefry2x32(7, 0), threefry2x32(8, 0));
    }
}
