//! Weights kept in ggml's 32-element block formats (Q8_0, Q4_0, Q4_1) and multiplied as such:
//! each block's scale and offset as float32, its quants as stored, and `x @ w.T` built over the
//! blocks so that the dequantization fuses into the product's kernel. A matrix-vector product
//! then reads a fifth (4-bit) or a quarter (8-bit) of the bytes of float32 weights, which is
//! what bounds a decode step.

use crate::codegen::opt::heuristic::UPCAST_AMOUNT;
use crate::dtype::DType;
use crate::error::{Error, OrPanic, Result};
use crate::tensor::Tensor;
use crate::uop::variable::Sint;

/// Elements per block in every format here.
const BLOCK: usize = 32;
/// Rows of `x` from which `linear` stores the dequantized weight (one kernel) and multiplies it
/// as float32: the fused product recomputes each weight for every row it reads (a 128-token
/// prefill of SmolLM2: 208 tok/s fused, 285 stored).
const DEQUANTIZE_ROWS: usize = 16;
/// Rows of a matrix whose bytes `realize` also stores side by side (each byte of a block for
/// this many rows together): the widest column panel the scheduler lays a large matmul operand
/// out in (`heuristic::matmul_panel`, two vectors of float32 with AVX-512; a narrower panel reads
/// part of the same contiguous run).
const MATMUL_PANEL_ROWS: usize = 32;

/// A tensor in a block format: per block a float32 `scale` and (4-bit formats) `offset`, each
/// `[blocks, 1]`, and its `quants`: Q8_0's 32 int8s, or Q4's 16 bytes of nibbles (the block's
/// first 16 values in the low nibbles, the last 16 in the high ones). A value is
/// `scale * q + offset`. The tensor's `shape` is row-major, its blocks running along the rows;
/// the parts are `[blocks, ...]`, or `[rows, blocks per row, ...]` once split over devices.
pub struct QuantizedTensor {
    shape: Vec<usize>,
    scale: Tensor,
    offset: Option<Tensor>,
    quants: Tensor,
    /// The same parts stored a second time, each block's bytes (and scales and offsets) for
    /// `MATMUL_PANEL_ROWS` rows side by side, once `realize` stored them: the kernel that
    /// dequantizes a matrix for a product of many rows writes it in column panels, and reads these
    /// as whole vectors where the panels of `UPCAST_AMOUNT` rows (the matrix-vector kernels'
    /// order) gave it a byte per lane.
    for_panels: Option<Box<QuantizedTensor>>,
}

impl QuantizedTensor {
    /// Parts of Q8_0, Q4_0 or Q4_1 `blocks` (`[blocks, bytes]` uint8 as ggml stores them, with
    /// `scale` and `offset` read from their float16 fields by `f16_at`), lazily.
    pub(crate) fn new(shape: &[usize], scale: Tensor, offset: Option<Tensor>, quants: Tensor) -> QuantizedTensor {
        let blocks = quants.shape()[0];
        assert_eq!(shape.iter().product::<usize>(), blocks * BLOCK, "{shape:?} is not {blocks} blocks of {BLOCK}");
        QuantizedTensor { shape: shape.to_vec(), scale, offset, quants, for_panels: None }
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The parts stored (realized) on their device, so that each product reads them as they are.
    /// A matrix's parts (on one device) are stored in panels of `UPCAST_AMOUNT` rows, the rows a
    /// matrix-vector product's kernel computes at once: each block's entries for those rows lie
    /// together, so that the kernel streams its weights in memory order (the FFN's down
    /// projection of SmolLM2, 48 blocks a row, read them at 0.6 of the speed row by row). A
    /// matrix of whole `MATMUL_PANEL_ROWS`-row panels is stored a second time for the products of
    /// many rows (`for_panels`): a prefill's dequantizing kernels read its bytes as vectors (3.2 ->
    /// 33 GFLOP/s, SmolLM2's 256-token prefill 1.3-1.4x), for as many bytes again as the parts.
    pub fn realize(self) -> QuantizedTensor {
        let rows_of = |panel: usize| match (self.matrix("realize"), self.quants.shape().len()) {
            (Ok([rows, cols]), 2) if rows.is_multiple_of(panel) && rows > panel => Some((rows / panel, cols / BLOCK)),
            _ => None,
        };
        // panels of `panel` rows, in `order` of (panel, row, block, byte) axes
        let store = |t: &Tensor, panel: usize, order: [isize; 4]| match rows_of(panel) {
            Some((panels, nb)) => {
                let inner = *t.shape().last().expect("parts have a block axis") as isize;
                let stored = t.reshape(&[panels as isize, panel as isize, nb as isize, inner]).permute(&order);
                let back: Vec<isize> =
                    (0..4).map(|a| order.iter().position(|&o| o == a).expect("a permutation") as isize).collect();
                stored.contiguous().realize().permute(&back).reshape(&[-1, inner])
            }
            None => t.contiguous().realize(),
        };
        let parts = |panel: usize, order: [isize; 4]| QuantizedTensor {
            shape: self.shape.clone(),
            scale: store(&self.scale, panel, order),
            offset: self.offset.as_ref().map(|o| store(o, panel, order)),
            quants: store(&self.quants, panel, order),
            for_panels: None,
        };
        let for_panels = rows_of(MATMUL_PANEL_ROWS).map(|_| Box::new(parts(MATMUL_PANEL_ROWS, [0, 2, 3, 1])));
        QuantizedTensor { for_panels, ..parts(UPCAST_AMOUNT, [0, 2, 1, 3]) }
    }

    /// `scale * q + offset` for each part of the blocks' quants (see `part_values`), with
    /// scale and offset shaped `lead`.
    fn values(&self, lead: &[isize]) -> Vec<Tensor> {
        part_values(&self.scale, self.offset.as_ref(), &self.quants, lead)
    }

    /// The values as a float32 tensor of the tensor's shape, lazily. Each nibble is its byte
    /// shifted by 0 or 4 (one expression over both halves, so the kernel reads whole vectors of
    /// bytes without a gate per half).
    pub fn dequantize(&self) -> Tensor {
        // the parts' own block axes, so that a split along a matrix's columns stays one
        let dims = self.quants.shape();
        let lead = &dims[..dims.len() - 1];
        let at = |inner: &[usize]| [lead, inner].concat().iter().map(|&d| d as isize).collect::<Vec<_>>();
        let shape: Vec<isize> = self.shape.iter().map(|&d| d as isize).collect();
        let per_block = |t: &Tensor| t.reshape(&at(&[1, 1]));
        let q = self.quants.reshape(&[at(&[1]), vec![-1]].concat()).cast(DType::INT32);
        let values = match &self.offset {
            Some(offset) => {
                let halves = q.expand(&[lead, &[2, BLOCK / 2]].concat());
                let _device = crate::runtime::DefaultDevice::scoped(self.quants.device());
                let shifts = (Tensor::arange(2) * 4).reshape(&[1, 2, 1]);
                let nibbles = halves.rshift(&shifts).bitwise_and(15).cast(DType::FLOAT32);
                nibbles * &per_block(&self.scale) + &per_block(offset)
            }
            None => q.cast(DType::FLOAT32) * &per_block(&self.scale),
        };
        values.reshape(&shape)
    }

    /// Rows `[start, end)` of a matrix, dequantized: an embedding's rows for token variables.
    pub fn rows(&self, start: Sint, end: Sint) -> Tensor {
        let [rows, cols] = self.matrix("rows").or_panic();
        let nb = (cols / BLOCK) as isize;
        let pick = |t: &Tensor| {
            let t = t.reshape(&[rows as isize, nb, -1]);
            let inner = t.shape()[2];
            t.shrink_sym(&[
                (start.clone(), end.clone()),
                (Sint::Int(0), Sint::Int(nb as usize)),
                (Sint::Int(0), Sint::Int(inner)),
            ])
        };
        let offset = self.offset.as_ref().map(pick);
        let values = part_values(&pick(&self.scale), offset.as_ref(), &pick(&self.quants), &[-1, nb]);
        Tensor::cat(&values.iter().collect::<Vec<_>>(), 2).reshape(&[-1, cols as isize])
    }

    /// `x @ w.T` for this matrix `w` (`[out, in]`) and `x` of shape `[..., in]`. For a few rows
    /// (a decode step's one), each block's products are summed with its dequantization, so the
    /// kernel reads the quants, not float32.
    pub fn linear(&self, x: &Tensor) -> Tensor {
        let [out, cols] = self.matrix("linear").or_panic();
        let xs = x.shape();
        assert!(xs.last() == Some(&cols), "linear: input {xs:?} must end in {cols} features (weight {:?})", self.shape);
        let (nb, lead) = ((cols / BLOCK) as isize, &xs[..xs.len() - 1]);
        if lead.iter().product::<usize>() >= DEQUANTIZE_ROWS {
            let stored = self.for_panels.as_deref().unwrap_or(self);
            return x.linear(&stored.dequantize().contiguous().T(), None);
        }
        let batch: Vec<isize> = lead.iter().map(|&d| d as isize).collect();
        let weights = self.values(&[1, out as isize, nb]);
        // x's block halves line up with the low and high nibbles
        let halves = weights.len();
        let x = x.reshape(&[&batch[..], &[1, nb, halves as isize, (BLOCK / halves) as isize]].concat());
        let n = x.shape().len();
        let half = |h: usize| {
            let bounds: Vec<(usize, usize)> =
                x.shape().iter().enumerate().map(|(a, &d)| if a == n - 2 { (h, h + 1) } else { (0, d) }).collect();
            x.shrink(&bounds).reshape(&[&batch[..], &[1, nb, (BLOCK / halves) as isize]].concat())
        };
        let terms: Vec<Tensor> = weights.iter().enumerate().map(|(h, w)| half(h) * w).collect();
        let product = terms.iter().skip(1).fold(terms[0].clone(), |acc, t| acc + t);
        let axes = [n as isize - 3, n as isize - 2];
        product.sum(&axes[..], false).reshape(&[&batch[..], &[out as isize]].concat())
    }

    /// This matrix split over `devices` along `axis` (0: its rows, 1: its columns, in whole
    /// blocks) or whole on each (`None`), its parts stored there: model parallelism (a product
    /// with a matrix split along its columns sums over the devices, an all-reduce).
    pub fn try_shard(&self, devices: &[&str], axis: Option<usize>) -> Result<QuantizedTensor> {
        let [rows, cols] = self.matrix("shard")?;
        let per_row = [rows as isize, (cols / BLOCK) as isize, -1];
        let parts = match axis {
            None => None,
            Some(0) => Some((rows, "rows")),
            Some(1) => Some((cols / BLOCK, "blocks per row")),
            Some(a) => return Err(Error::Axis { op: "shard", axis: a as isize, shape: self.shape.clone() }),
        };
        if let Some((count, what)) = parts.filter(|(count, _)| !count.is_multiple_of(devices.len())) {
            let reason = format!("{count} {what} do not split evenly over {} devices", devices.len());
            return Err(Error::shape("shard", &[&self.shape], reason));
        }
        let split = |t: &Tensor| t.reshape(&per_row).try_shard(devices, axis.map(|a| a as isize));
        let offset = self.offset.as_ref().map(split).transpose()?;
        let split = QuantizedTensor {
            shape: self.shape.clone(),
            scale: split(&self.scale)?,
            offset,
            quants: split(&self.quants)?,
            for_panels: None,
        };
        Ok(split.realize())
    }

    /// The rows of `parts` (matrices of as many columns, in one format, not split over devices)
    /// in one matrix, lazily; None where they differ.
    pub fn cat_rows(parts: &[&QuantizedTensor]) -> Option<QuantizedTensor> {
        let first = parts.first()?;
        let [_, cols] = first.matrix("cat_rows").ok()?;
        let alike = |q: &&QuantizedTensor| {
            q.matrix("cat_rows").is_ok_and(|[_, c]| c == cols)
                && q.quants.shape().len() == 2
                && q.quants.shape()[1] == first.quants.shape()[1]
                && q.quants.dtype() == first.quants.dtype()
                && q.offset.is_some() == first.offset.is_some()
        };
        if !parts.iter().all(alike) {
            return None;
        }
        let cat = |part: &dyn Fn(&QuantizedTensor) -> &Tensor| {
            Tensor::cat(&parts.iter().map(|q| part(q)).collect::<Vec<_>>(), 0)
        };
        let offset = first.offset.as_ref().map(|_| cat(&|q| q.offset.as_ref().expect("every part has an offset")));
        let rows = parts.iter().map(|q| q.shape[0]).sum::<usize>();
        Some(QuantizedTensor::new(&[rows, cols], cat(&|q| &q.scale), offset, cat(&|q| &q.quants)))
    }

    /// The shape as a matrix whose rows are whole blocks (an error naming `op` otherwise).
    fn matrix(&self, op: &'static str) -> Result<[usize; 2]> {
        match self.shape[..] {
            [rows, cols] if cols.is_multiple_of(BLOCK) => Ok([rows, cols]),
            _ => Err(Error::shape(op, &[&self.shape], format!("not a matrix of rows of {BLOCK}-element blocks"))),
        }
    }
}

/// A weight as a model holds it: float32, or quantized and multiplied as such.
pub enum Weight {
    Dense(Tensor),
    Quantized(QuantizedTensor),
}

impl Weight {
    /// Stored on the device: a dense weight as float32, a quantized one as its parts.
    pub fn realize(self) -> Weight {
        match self {
            Weight::Dense(t) => Weight::Dense(t.cast(DType::FLOAT32).contiguous().realize()),
            Weight::Quantized(q) => Weight::Quantized(q.realize()),
        }
    }
    /// The rows of `parts` (matrices of as many columns) in one weight, lazily: quantized where
    /// all of them are in one format (`QuantizedTensor::cat_rows`), else float32.
    pub fn cat_rows(parts: &[&Weight]) -> Weight {
        let quantized: Option<Vec<&QuantizedTensor>> = parts
            .iter()
            .map(|w| match w {
                Weight::Quantized(q) => Some(q),
                Weight::Dense(_) => None,
            })
            .collect();
        match quantized.and_then(|q| QuantizedTensor::cat_rows(&q)) {
            Some(q) => Weight::Quantized(q),
            None => Weight::Dense(Tensor::cat(
                &parts.iter().map(|w| w.dense()).collect::<Vec<_>>().iter().collect::<Vec<_>>(),
                0,
            )),
        }
    }
    /// The float32 values, lazily.
    pub fn dense(&self) -> Tensor {
        match self {
            Weight::Dense(t) => t.clone(),
            Weight::Quantized(q) => q.dequantize(),
        }
    }
    /// `x @ w.T` (see `QuantizedTensor::linear`).
    pub fn linear(&self, x: &Tensor) -> Tensor {
        match self {
            Weight::Dense(t) => x.linear(&t.T(), None),
            Weight::Quantized(q) => q.linear(x),
        }
    }
    /// This weight split over `devices` along `axis` (its rows or columns) or whole on each
    /// (`None`), stored there (see `QuantizedTensor::try_shard`).
    pub fn try_shard(&self, devices: &[&str], axis: Option<usize>) -> Result<Weight> {
        Ok(match self {
            Weight::Dense(t) => Weight::Dense(t.try_shard(devices, axis.map(|a| a as isize))?.contiguous().realize()),
            Weight::Quantized(q) => Weight::Quantized(q.try_shard(devices, axis)?),
        })
    }
    /// Rows `[start, end)` of a matrix as float32.
    pub fn rows(&self, start: Sint, end: Sint) -> Tensor {
        match self {
            Weight::Dense(t) => {
                let width = Sint::Int(t.shape()[1]);
                t.shrink_sym(&[(start, end), (Sint::Int(0), width)])
            }
            Weight::Quantized(q) => q.rows(start, end),
        }
    }
}

/// `scale * q + offset` of blocks shaped `lead` (ending in the block axis), one float32 tensor
/// per part of their quants: Q8_0's `[..., 32]`, a 4-bit block's low and high nibbles, each
/// `[..., 16]`. A product sums each nibble half with its half of `x` as a term of its own (in a
/// decode step 73 tok/s, against 64 for `dequantize`'s one expression over both halves).
fn part_values(scale: &Tensor, offset: Option<&Tensor>, quants: &Tensor, lead: &[isize]) -> Vec<Tensor> {
    let per_block = |t: &Tensor| t.reshape(&[lead, &[1]].concat());
    let (scale, offset) = (per_block(scale), offset.map(per_block));
    let inner = *quants.shape().last().expect("quants have a block axis") as isize;
    let q = quants.reshape(&[lead, &[inner]].concat()).cast(DType::INT32);
    let parts = match offset {
        Some(_) => vec![q.bitwise_and(15), q.rshift(4)],
        None => vec![q],
    };
    parts
        .into_iter()
        .map(|p| {
            let p = p.cast(DType::FLOAT32) * &scale;
            match &offset {
                Some(o) => p + o,
                None => p,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q4_1 parts of a `rows` x 64 matrix (2 blocks a row): block `b`'s scale `(b + 1) / 16`, its
    /// offset `-b / 8`, its bytes `(7 * b + 3 * i) % 256`; and the matrix's values, row-major.
    fn q4_1(rows: usize) -> (QuantizedTensor, Vec<u8>, Vec<f64>) {
        let blocks = rows * 2;
        let bytes: Vec<u8> = (0..blocks * 16).map(|k| ((7 * (k / 16) + 3 * (k % 16)) % 256) as u8).collect();
        let scale: Vec<f32> = (0..blocks).map(|b| (b + 1) as f32 / 16.0).collect();
        let offset: Vec<f32> = (0..blocks).map(|b| -(b as f32) / 8.0).collect();
        let values = (0..blocks * BLOCK)
            .map(|e| {
                let (b, i) = (e / BLOCK, e % BLOCK);
                let byte = bytes[b * 16 + i % 16];
                let nibble = if i < 16 { byte & 15 } else { byte >> 4 };
                scale[b] as f64 * nibble as f64 + offset[b] as f64
            })
            .collect();
        let column = |v: Vec<f32>| Tensor::from_vec(v, &[blocks, 1]);
        let quants = Tensor::from_vec(bytes.clone(), &[blocks, 16]);
        (QuantizedTensor::new(&[rows, 64], column(scale), Some(column(offset)), quants), bytes, values)
    }

    #[test]
    fn a_matrix_is_stored_in_panels_of_rows_and_multiplies_as_its_values() {
        let rows = 3 * UPCAST_AMOUNT;
        let (q, bytes, values) = q4_1(rows);
        let q = q.realize();
        // block b of row r of panel p lies at (p, b, r): the panel's rows' blocks side by side
        let stored = Tensor::from_uop(q.quants.uop().base(), "CPU").to_vec::<u8>();
        for (k, &byte) in bytes.iter().enumerate() {
            let (row, b, i) = (k / 32, k / 16 % 2, k % 16);
            let (panel, r) = (row / UPCAST_AMOUNT, row % UPCAST_AMOUNT);
            assert_eq!(stored[((panel * 2 + b) * UPCAST_AMOUNT + r) * 16 + i], byte, "row {row} block {b} byte {i}");
        }
        let x: Vec<f32> = (0..64).map(|c| (c as f32 - 20.0) / 9.0).collect();
        let y = q.linear(&Tensor::from_vec(x.clone(), &[1, 64])).to_vec::<f32>();
        for (r, got) in y.into_iter().enumerate() {
            let exact: f64 = (0..64).map(|c| x[c] as f64 * values[r * 64 + c]).sum();
            assert!((got as f64 - exact).abs() <= 1e-5 * (1.0 + exact.abs()), "row {r}: {got} vs {exact}");
        }
        let dense: Vec<f64> = q.dequantize().to_vec::<f32>().into_iter().map(f64::from).collect();
        assert_eq!(dense, values);
        let row = q.rows(Sint::Int(5), Sint::Int(6)).to_vec::<f32>();
        assert!(row.iter().zip(&values[5 * 64..6 * 64]).all(|(g, w)| *g as f64 == *w), "row 5: {row:?}");
    }

    #[test]
    fn matrices_in_one_format_join_their_rows_quantized_and_others_as_float32() {
        let ((a, _, va), (b, _, vb)) = (q4_1(3), q4_1(2 * UPCAST_AMOUNT));
        let joined = QuantizedTensor::cat_rows(&[&a, &b]).expect("one format").realize();
        assert_eq!(joined.shape(), [3 + 2 * UPCAST_AMOUNT, 64]);
        let want: Vec<f64> = va.iter().chain(&vb).copied().collect();
        let dense: Vec<f64> = joined.dequantize().to_vec::<f32>().into_iter().map(f64::from).collect();
        assert_eq!(dense, want);
        let x: Vec<f32> = (0..64).map(|c| (c as f32 - 30.0) / 7.0).collect();
        let y = joined.linear(&Tensor::from_vec(x.clone(), &[1, 64])).to_vec::<f32>();
        for (r, got) in y.into_iter().enumerate() {
            let exact: f64 = (0..64).map(|c| x[c] as f64 * want[r * 64 + c]).sum();
            assert!((got as f64 - exact).abs() <= 1e-5 * (1.0 + exact.abs()), "row {r}: {got} vs {exact}");
        }
        // Q8_0 beside Q4_1 does not join quantized: the weight is float32
        let q8 = QuantizedTensor::new(
            &[1, 64],
            Tensor::from_vec(vec![0.5f32, 0.25], &[2, 1]),
            None,
            Tensor::from_vec((0..64).map(|i| i as i8 - 32).collect::<Vec<i8>>(), &[2, 32]),
        );
        let (a, q8) = (Weight::Quantized(q4_1(3).0), Weight::Quantized(q8));
        let Weight::Dense(mixed) = Weight::cat_rows(&[&a, &q8]) else { panic!("Q4_1 and Q8_0 joined quantized") };
        let q8_values = (0..64).map(|i| (i as f64 - 32.0) * if i < 32 { 0.5 } else { 0.25 });
        let want: Vec<f64> = va.iter().copied().chain(q8_values).collect();
        assert_eq!(mixed.to_vec::<f32>().into_iter().map(f64::from).collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_matrix_is_also_stored_with_each_byte_of_a_panels_rows_together_for_products_of_many_rows() {
        let rows = 2 * MATMUL_PANEL_ROWS;
        let (q, bytes, values) = q4_1(rows);
        let q = q.realize();
        let panels = q.for_panels.as_deref().expect("a matrix of whole panels is stored for them too");
        // byte i of block b of row r of panel p lies at (p, b, i, r)
        let stored = Tensor::from_uop(panels.quants.uop().base(), "CPU").to_vec::<u8>();
        for (k, &byte) in bytes.iter().enumerate() {
            let (row, b, i) = (k / 32, k / 16 % 2, k % 16);
            let (panel, r) = (row / MATMUL_PANEL_ROWS, row % MATMUL_PANEL_ROWS);
            assert_eq!(
                stored[((panel * 2 + b) * 16 + i) * MATMUL_PANEL_ROWS + r],
                byte,
                "row {row} block {b} byte {i}"
            );
        }
        // a product of `DEQUANTIZE_ROWS` rows dequantizes from them
        let n = DEQUANTIZE_ROWS;
        let x: Vec<f32> = (0..n * 64).map(|e| ((e * 7) % 23) as f32 / 5.0 - 2.0).collect();
        let y = q.linear(&Tensor::from_vec(x.clone(), &[n, 64])).to_vec::<f32>();
        for (e, got) in y.into_iter().enumerate() {
            let (t, r) = (e / rows, e % rows);
            let exact: f64 = (0..64).map(|c| x[t * 64 + c] as f64 * values[r * 64 + c]).sum();
            assert!((got as f64 - exact).abs() <= 1e-5 * (1.0 + exact.abs()), "token {t} row {r}: {got} vs {exact}");
        }
    }

    #[test]
    fn an_8_bit_matrix_multiplies_many_rows_from_its_panel_copy() {
        // Q8_0 (no offset, 32 int8s a block; Q4_0 comes with its offset, as Q4_1): block b scaled (b + 1) / 8
        let rows = 2 * MATMUL_PANEL_ROWS;
        let blocks = rows * 2;
        let scale: Vec<f32> = (0..blocks).map(|b| (b + 1) as f32 / 8.0).collect();
        let quants: Vec<i8> = (0..blocks * 32).map(|k| ((5 * k) % 255) as i8).collect();
        let q = QuantizedTensor::new(
            &[rows, 64],
            Tensor::from_vec(scale.clone(), &[blocks, 1]),
            None,
            Tensor::from_vec(quants.clone(), &[blocks, 32]),
        )
        .realize();
        assert!(q.for_panels.is_some(), "a matrix of whole panels is stored for them too");
        let n = DEQUANTIZE_ROWS;
        let x: Vec<f32> = (0..n * 64).map(|e| ((e * 5) % 17) as f32 / 4.0 - 2.0).collect();
        let y = q.linear(&Tensor::from_vec(x.clone(), &[n, 64])).to_vec::<f32>();
        for (e, got) in y.into_iter().enumerate() {
            let (t, r) = (e / rows, e % rows);
            let exact: f64 = (0..64)
                .map(|c| {
                    let b = r * 2 + c / 32;
                    x[t * 64 + c] as f64 * scale[b] as f64 * quants[b * 32 + c % 32] as f64
                })
                .sum();
            assert!((got as f64 - exact).abs() <= 1e-5 * (1.0 + exact.abs()), "token {t} row {r}: {got} vs {exact}");
        }
    }

    #[test]
    fn a_matrix_of_too_few_rows_for_a_panel_is_stored_row_major() {
        let (q, bytes, _) = q4_1(UPCAST_AMOUNT - 1);
        let stored = Tensor::from_uop(q.realize().quants.uop().base(), "CPU").to_vec::<u8>();
        assert_eq!(stored, bytes);
    }
}
