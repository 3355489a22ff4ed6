//! Seeded, reproducible random tensors from a counter-based generator (Threefry-2x32), drawing
//! tinygrad's stream: the same seed gives the same numbers as tinygrad's.
//!
//! The counter lives on the device (as tinygrad's does): a 64-bit count per device, held as two
//! uint32 words (low, high) that each draw advances in place, so that devices without 64-bit
//! integers (WebGPU) draw the same numbers. A JIT captures those advances with the draws, so
//! every replay of a captured function draws new numbers.
//!
//! A device's key is tinygrad's: the seed as the high word, and as the low word the low 32 bits
//! of SHA-256 of the device's number (0 for the first device drawn from since the seed was set,
//! as 4 big-endian bytes). A draw of `n` words takes the counter `c` before it, keys Threefry
//! with Threefry(key, c), and returns the low output words of the counters `i + (i + h) * 2^32`
//! for `i < h = ceil(n/2)`, then the high ones, the first `n` of those.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use std::f64::consts::PI;

use sha2::{Digest, Sha256};

use super::Tensor;
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::helpers::getenv;

static SEED: AtomicU64 = AtomicU64::new(0);
/// Each device's key and counter (its next draw starts there).
static COUNTERS: LazyLock<Mutex<HashMap<String, (u64, Tensor)>>> = LazyLock::new(Default::default);

/// Threefry-2x32's rotation constants (20 rounds, as in Random123 and JAX).
const ROT: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];

/// Threefry-2x32 with 20 rounds, on the device: a keyed bijection of 64-bit counters given as
/// their low and high uint32 halves, under the key words `k0` (low) and `k1` (high) of the
/// counters' shape; returns the two uint32 output words. Built from uint32 add/xor/shift ops
/// only, so every backend runs it as ordinary fused arithmetic (constant keys fold).
fn threefry(lo: &Tensor, hi: &Tensor, k0: &Tensor, k1: &Tensor) -> (Tensor, Tensor) {
    let ks = [k0.clone(), k1.clone(), k0.bitwise_xor(k1).bitwise_xor(0x1BD1_1BDA)];
    let rotl = |x: &Tensor, r: u32| x.lshift(r as i64).bitwise_or(x.rshift(32 - r as i64));
    let (mut x0, mut x1) = (lo + &ks[0], hi + &ks[1]);
    for round in 0..5 {
        for r in 0..4 {
            x0 = &x0 + &x1;
            x1 = rotl(&x1, ROT[(round % 2) * 4 + r]).bitwise_xor(&x0);
        }
        let i = round + 1;
        x0 = &x0 + &ks[i % 3];
        x1 = &x1 + &ks[(i + 1) % 3] + i as i64;
    }
    (x0, x1)
}

/// tinygrad's key of the `index`-th device drawn from since the seed was set.
fn device_key(index: usize, seed: u64) -> u64 {
    let digest = Sha256::digest((index as u32).to_be_bytes());
    let low = u32::from_be_bytes(digest[28..].try_into().expect("SHA-256 has 32 bytes"));
    (seed as u32 as u64) << 32 | low as u64
}

/// The carry out of the uint32 sum `a + b = sum` (0 or 1), from the top bits alone: bitwise
/// ops that vectorize, where a comparison would not.
fn carry(a: &Tensor, b: &Tensor, sum: &Tensor) -> Tensor {
    let unsummed = sum.bitwise_xor(u32::MAX as i64);
    a.bitwise_and(b).bitwise_or(a.bitwise_or(b).bitwise_and(&unsummed)).rshift(31)
}

/// The 64-bit count `words` (uint32 `[low, high]`) plus `n`, wrapping, in uint32 arithmetic.
fn add_u64(words: &Tensor, n: u64) -> Tensor {
    let (lo, hi) = (words.shrink(&[(0, 1)]), words.shrink(&[(1, 2)]));
    let low = lo.full_like(n as u32 as i64);
    let sum = &lo + &low;
    Tensor::cat(&[&sum, &(hi + (n >> 32) as i64 + carry(&lo, &low, &sum))], 0)
}

/// `(hi * 2^32 + lo) mod m` for uint32 words `hi` and `lo` and `1 <= m <= 2^32`, in uint32
/// arithmetic (devices without 64-bit integers draw the same numbers): the bits are taken in
/// from the top, `r = (2r + bit) mod m` each.
fn mod_u64(hi: &Tensor, lo: &Tensor, m: u64) -> Tensor {
    if m == 1 << 32 {
        return lo.clone();
    }
    let modulus = Tensor::full_dtype(&hi.shape(), m as i64, DType::UINT32);
    let mut r = hi.zeros_like();
    for word in [hi, lo] {
        for i in (0..32).rev() {
            let bit = word.rshift(i).bitwise_and(1);
            let doubled = r.lshift(1) + &bit;
            // 2r + bit >= m, asked without overflowing: r + bit >= m - r
            r = (&r + &bit).ge(&modulus - &r).where_(&doubled - &modulus, &doubled);
        }
    }
    r
}

impl Tensor {
    /// Reset the random stream: the same seed gives the same tensors in the same order.
    pub fn manual_seed(seed: u64) {
        SEED.store(seed, Ordering::Relaxed);
        COUNTERS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    /// Uniform floats in `[0, 1)` (float32), generated on the device as tinygrad's: the top 23
    /// bits of a random word, as the mantissa of a float in `[1, 2)`, minus 1.
    pub fn rand(shape: &[usize]) -> Tensor {
        Tensor::try_rand(shape).or_panic()
    }
    /// `rand`, reporting a failure to advance the device's counter (its device cannot be opened
    /// or run the step) as an error.
    pub fn try_rand(shape: &[usize]) -> Result<Tensor> {
        let bits = Tensor::random_bits(shape.iter().product())?;
        // its own storage: equal draws (same seed and counter) must stay separate tensors, so
        // that updating one in place (a parameter) never changes the other
        Ok((bits.rshift(9).cast(DType::FLOAT32) * (1.0 / (1u64 << 23) as f64)).reshape(shape).contiguous())
    }
    /// Two random uint32 words per element of `shape` (flat), on the default device.
    fn random_words(shape: &[usize]) -> Result<(Tensor, Tensor)> {
        let n: usize = shape.iter().product();
        let bits = Tensor::random_bits(2 * n)?;
        Ok((bits.shrink(&[(0, n)]), bits.shrink(&[(n, 2 * n)])))
    }
    /// The next `n` uint32 words of the default device's stream (the module docs say which).
    fn random_bits(n: usize) -> Result<Tensor> {
        let (key, counter) = Tensor::advance_counter(n)?;
        let host_key = |k: u64| Tensor::full_dtype(&[1], k as u32 as i64, DType::UINT32);
        let word = |i: usize| counter.shrink(&[(i, i + 1)]);
        let (k0, k1) = threefry(&word(0), &word(1), &host_key(key), &host_key(key >> 32));
        // the draw's key in a kernel of its own, not computed again for every element
        let draw_key = Tensor::cat(&[&k0, &k1], 0).contiguous();
        // word j < h is the low output word of the counter pair (j, j + h), word j >= h the
        // high one of (j - h, j): one Threefry per word, in the words' order
        let h = n.div_ceil(2);
        let key_word = |i: usize| draw_key.shrink(&[(i, i + 1)]).expand(&[n]);
        // (the high words' selection in bitwise ops, which vectorize where a comparison would not)
        let word = Tensor::arange(n).cast(DType::UINT32);
        let minus_h = word.full_like((h as u32).wrapping_neg() as i64);
        let high = carry(&word, &minus_h, &(&word + &minus_h));
        let low = &word - &(&high * h as i64);
        let (x0, x1) = threefry(&low, &(&low + h as i64), &key_word(0), &key_word(1));
        let high_mask = &high * u32::MAX as i64;
        Ok(x0.bitwise_xor(x0.bitwise_xor(&x1).bitwise_and(&high_mask)))
    }
    /// The default device's key, and its counter before a draw of `n`, which it then advances
    /// by `n`: two small kernels run now (the next value into a buffer of its own, copied into
    /// the counter), and the draw's value reads that buffer. A device that cannot run them is
    /// the error.
    fn advance_counter(n: usize) -> Result<(u64, Tensor)> {
        let device = crate::runtime::default_device();
        let mut counters = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
        let (key, counter) = match counters.get(&device) {
            Some(known) => known.clone(),
            None => {
                let key = device_key(counters.len(), SEED.load(Ordering::Relaxed));
                let counter = Tensor::zeros(&[2]).cast(DType::UINT32).contiguous().try_realize()?;
                counters.insert(device, (key, counter.clone()));
                (key, counter)
            }
        };
        let next = add_u64(&counter, n as u64).contiguous();
        counter.assign(&next);
        Tensor::realize_all(&[next.clone(), counter])?;
        Ok((key, add_u64(&next, (n as u64).wrapping_neg())))
    }
    /// Uniform floats in `[0, 1)` of this tensor's shape and float dtype, on its device.
    pub fn rand_like(&self) -> Tensor {
        Tensor::rand(&self.shape()).cast(self.dtype().to_float()).to(self.device())
    }
    /// Standard normal floats (float32) by Box-Muller from two `rand` draws: `sqrt(-2 ln u1) cos(2π u0)`.
    pub fn randn(shape: &[usize]) -> Tensor {
        let src = Tensor::rand(&[&[2], shape].concat());
        let n = shape.iter().product::<usize>();
        let flat = src.reshape(&[2, n]);
        let (u0, u1) = (flat.shrink(&[(0, 1), (0, n)]).reshape(shape), flat.shrink(&[(1, 2), (0, n)]).reshape(shape));
        u0.mul(2.0 * PI).cos().mul(u1.neg().add(1.0).log().mul(-2.0).sqrt())
    }
    /// Standard normal values of this tensor's shape and float dtype, on its device.
    pub fn randn_like(&self) -> Tensor {
        Tensor::randn(&self.shape()).cast(self.dtype().to_float()).to(self.device())
    }
    /// Uniform int32 values in `[low, high)`: 64 random bits modulo the range's size (a bias of
    /// at most 2^-32), so every value of even the whole int32 range is drawn.
    pub fn randint(shape: &[usize], low: i64, high: i64) -> Tensor {
        Tensor::try_randint(shape, low, high).or_panic()
    }
    /// `randint`, reporting an empty range or one outside int32 as an error.
    pub fn try_randint(shape: &[usize], low: i64, high: i64) -> Result<Tensor> {
        ensure(low < high, || Error::value("randint", format!("empty range [{low}, {high})")))?;
        let int32 = i32::MIN as i64..=i32::MAX as i64 + 1;
        ensure(int32.contains(&low) && int32.contains(&high), || Error::Unrepresentable {
            op: "randint",
            value: format!("[{low}, {high})"),
            dtype: DType::INT32,
        })?;
        let (x0, x1) = Tensor::random_words(shape)?;
        // low + offset wraps into int32 as uint32 arithmetic does
        let offset = mod_u64(&x0, &x1, (high - low) as u64);
        (offset + low as u32 as i64).bitcast(DType::INT32).try_reshape(shape).map(|t| t.contiguous())
    }
    /// Normal float32 values with mean `mean` and standard deviation `std`.
    pub fn normal(shape: &[usize], mean: f64, std: f64) -> Tensor {
        Tensor::randn(shape).mul(std).add(mean)
    }
    /// Uniform float32 values in `[low, high)`.
    pub fn uniform(shape: &[usize], low: f64, high: f64) -> Tensor {
        Tensor::rand(shape).mul(high - low).add(low)
    }
    /// Uniform in `[-1, 1)` scaled by `1/sqrt(numel)`.
    pub fn scaled_uniform(shape: &[usize]) -> Tensor {
        Tensor::uniform(shape, -1.0, 1.0).mul((shape.iter().product::<usize>() as f64).powf(-0.5))
    }
    /// Glorot/Xavier uniform: `±sqrt(6 / (fan_in + fan_out))` with tinygrad's fans (`shape[0]`, the rest).
    pub fn glorot_uniform(shape: &[usize]) -> Tensor {
        let (first, rest) = (shape.first().copied().unwrap_or(1), shape.iter().skip(1).product::<usize>());
        Tensor::uniform(shape, -1.0, 1.0).mul((6.0 / (first + rest) as f64).sqrt())
    }
    /// Kaiming/He uniform for a leaky-relu slope `a`: bound `sqrt(3) * gain / sqrt(fan_in)`.
    pub fn kaiming_uniform(shape: &[usize], a: f64) -> Tensor {
        let bound = 3f64.sqrt() * kaiming_gain(a) / (fan_in(shape) as f64).sqrt();
        Tensor::uniform(shape, -bound, bound)
    }
    /// Kaiming/He normal for a leaky-relu slope `a`: std `gain / sqrt(fan_in)`.
    pub fn kaiming_normal(shape: &[usize], a: f64) -> Tensor {
        Tensor::normal(shape, 0.0, kaiming_gain(a) / (fan_in(shape) as f64).sqrt())
    }
    /// A random permutation of `0..n` (int32): the `argsort` of `n` uniform draws.
    pub fn randperm(n: usize) -> Tensor {
        Tensor::rand(&[n]).argsort(0, false)
    }
    /// Draw `num_samples` category indices (int32) per row of the weights `self` (1-D or 2-D) by
    /// inverse CDF: count how many cumulative-sum thresholds a uniform draw passes.
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Tensor {
        self.try_multinomial(num_samples, replacement).or_panic()
    }
    /// `multinomial`, reporting weights that are not 1-D or 2-D or have no categories, no
    /// samples, or several samples without replacement as an error.
    pub fn try_multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        let shape = self.shape();
        ensure((1..=2).contains(&shape.len()) && shape.last() != Some(&0), || {
            Error::shape("multinomial", &[&shape], "weights must be 1-D or 2-D with at least one category")
        })?;
        ensure(num_samples > 0, || Error::value("multinomial", "num_samples must be positive"))?;
        ensure(replacement || num_samples == 1, || {
            Error::value("multinomial", "without replacement only num_samples=1 is supported")
        })?;
        let w = if shape.len() == 1 { self.unsqueeze(0) } else { self.clone() };
        let (rows, k) = (w.shape()[0], w.shape()[1]);
        let cw = w.cumsum(1).cast(DType::FLOAT32);
        let cdf = cw.div(cw.shrink(&[(0, rows), (k - 1, k)]));
        let u = Tensor::rand(&[num_samples, rows, 1]).to(self.device());
        let idx = u.expand(&[num_samples, rows, k]).ge(&cdf).sum(2isize, false).permute(&[1, 0]).cast(DType::INT32);
        Ok(if shape.len() == 1 { idx.squeeze(Some(0)) } else { idx })
    }
    /// Zero each element with probability `p` and scale the rest by `1/(1-p)`; only while the
    /// `TRAINING` setting is on (env var or `Context`), else the tensor itself.
    pub fn dropout(&self, p: f64) -> Tensor {
        self.try_dropout(p).or_panic()
    }
    /// `dropout`, reporting a probability outside `[0, 1]` as an error.
    pub fn try_dropout(&self, p: f64) -> Result<Tensor> {
        ensure((0.0..=1.0).contains(&p), || Error::value("dropout", format!("p={p} is outside [0, 1]")))?;
        if getenv("TRAINING", 0) == 0 || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return Ok(self.zeros_like());
        }
        Ok(self.rand_like().ge(p).where_(self, 0).div(1.0 - p))
    }
}

/// `sqrt(2 / (1 + a^2))`, the gain of a leaky relu with slope `a`.
fn kaiming_gain(a: f64) -> f64 {
    (2.0 / (1.0 + a * a)).sqrt()
}

/// Inputs per output unit: the product of all but the first dimension.
fn fan_in(shape: &[usize]) -> usize {
    shape.iter().skip(1).product::<usize>().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threefry-2x32 computed on the host, the reference for the device version.
    fn threefry_host(key: u64, counter: u64) -> (u32, u32) {
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
        (x0, x1)
    }

    #[test]
    fn device_threefry_matches_the_host_reference() {
        let key = 0x0123_4567_89ab_cdef;
        let counters: Vec<u64> = vec![0, 1, 2, 0xffff_ffff, 0x1_0000_0000, 0xdead_beef_cafe_f00d];
        let lo = Tensor::new(counters.iter().map(|&c| c as u32).collect::<Vec<_>>());
        let hi = Tensor::new(counters.iter().map(|&c| (c >> 32) as u32).collect::<Vec<_>>());
        let host_key = |k: u64| Tensor::full_dtype(&[counters.len()], k as u32 as i64, DType::UINT32);
        let (x0, x1) = threefry(&lo, &hi, &host_key(key), &host_key(key >> 32));
        let want: Vec<(u32, u32)> = counters.iter().map(|&c| threefry_host(key, c)).collect();
        let got: Vec<(u32, u32)> = x0.to_vec::<u32>().into_iter().zip(x1.to_vec::<u32>()).collect();
        assert_eq!(got, want);
    }

    /// tinygrad's draw of `n` words from the first device after `manual_seed(seed)`, at the
    /// count `counter`, on the host.
    fn draw_host(seed: u64, counter: u64, n: usize) -> Vec<u32> {
        let (k0, k1) = threefry_host(device_key(0, seed), counter);
        let h = n.div_ceil(2) as u64;
        let words: Vec<(u32, u32)> =
            (0..h).map(|i| threefry_host((k1 as u64) << 32 | k0 as u64, i | (i + h) << 32)).collect();
        words.iter().map(|w| w.0).chain(words.iter().map(|w| w.1)).take(n).collect()
    }
    fn unit_float(word: u32) -> f32 {
        (word >> 9) as f32 / (1u32 << 23) as f32
    }

    /// The tests that seed the process-wide stream, one at a time.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn rand_draws_whole_vectors_of_threefry() {
        let _serial = serial();
        Tensor::manual_seed(9);
        let n = 4096;
        let r = Tensor::rand(&[n]);
        // the draw's key, then the numbers
        let kernel = Tensor::schedule(std::slice::from_ref(&r))
            .into_iter()
            .filter_map(|item| match item {
                crate::engine::ScheduleItem::Kernel { ast, .. } => Some(ast),
                _ => None,
            })
            .last()
            .expect("a kernel draws the numbers");
        let renderer = crate::renderer::c::CRenderer;
        let spec = crate::codegen::get_program(&kernel, &renderer).unwrap();
        let lanes = crate::renderer::Renderer::target(&renderer).float_lanes();
        // the uint32 rounds on vectors of lanes, and about Threefry's 110 operations per number
        // and 15 choosing its counter pair and output word (unsigned sums are not flattened into
        // linear forms, which repeated their terms)
        assert!(spec.src.contains(&format!("uint{lanes} ")), "{}", spec.src);
        assert!(spec.ops <= 140 * n as u64, "{} operations per number", spec.ops / n as u64);
        let want: Vec<f32> = draw_host(9, 0, n).into_iter().map(unit_float).collect();
        assert_eq!(r.to_vec::<f32>(), want);
    }

    #[test]
    fn rand_is_tinygrads_stream() {
        let _serial = serial();
        Tensor::manual_seed(5);
        let (a, b) = (Tensor::rand(&[2, 3]).to_vec::<f32>(), Tensor::rand(&[3]).to_vec::<f32>());
        assert_eq!(a, draw_host(5, 0, 6).into_iter().map(unit_float).collect::<Vec<_>>());
        assert_eq!(b, draw_host(5, 6, 3).into_iter().map(unit_float).collect::<Vec<_>>());
        // tinygrad's randperm(10) after manual_seed(0)
        Tensor::manual_seed(0);
        assert_eq!(Tensor::randperm(10).to_vec::<i32>(), [8, 9, 4, 3, 6, 1, 7, 5, 2, 0]);
    }
}
