//! Matrix products, einsum, interpolation, sorting and selection, all composed from tensor ops
//! (broadcast multiply + reduce, movement, `where`): no handwritten kernels.

use super::elementwise::broadcast_shape;
use super::movement::resolve_axis;
use super::reduce::{dtype_max, dtype_min};
use super::{check_devices, Scalar, Tensor};
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::uop::Call;

impl Tensor {
    /// Matrix product with numpy semantics for 1-D and batched operands.
    pub fn matmul(&self, w: &Tensor) -> Tensor {
        self.try_matmul(w).or_panic()
    }
    /// `matmul`, reporting 0-d operands, inner dimensions that differ, batch dimensions that do
    /// not broadcast, or different devices as an error.
    pub fn try_matmul(&self, w: &Tensor) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), w.shape());
        let (dx, dw) = (xs.len(), ws.len());
        let bad = |reason: &str| Err(Error::shape("matmul", &[&xs, &ws], reason));
        if dx == 0 || dw == 0 {
            return bad("both operands need at least 1 dimension");
        }
        if xs[dx - 1] != ws[dw - dw.min(2)] {
            return bad("inner dimensions differ");
        }
        if broadcast_shape(&xs[..dx.saturating_sub(2)], &ws[..dw.saturating_sub(2)]).is_none() {
            return bad("batch dimensions do not broadcast");
        }
        check_devices("matmul", &[self, w])?;
        // both operands matrices or more: x [..., m, 1, k] times w [..., 1, k, n] transposed, the
        // new axes inserted by unsqueeze (a reshape to those sizes could not tell which axis of
        // size 1 a variable one at most 1 long is)
        let (x, w_batched) = match dx.min(dw) >= 2 {
            true => (self.unsqueeze(-2), w.unsqueeze(-3)),
            false => (self.clone(), w.clone()),
        };
        let wt = w_batched.transpose(-1, -(dw.min(2) as isize));
        let product = x.mul(&wt).sum(-1isize, false);
        // a matrix right operand: the scheduler may lay it out for the device (`schedule/layout.rs`)
        Ok(match dw {
            2 => product.call(Call::Matmul, vec![], &[self, w]),
            _ => product,
        })
    }
    /// Alias of `matmul`.
    pub fn dot(&self, w: &Tensor) -> Tensor {
        self.matmul(w)
    }
    /// Alias of `try_matmul`.
    pub fn try_dot(&self, w: &Tensor) -> Result<Tensor> {
        self.try_matmul(w)
    }
}

/// `order` such that `v[order[0]] <= v[order[1]] <= ...`.
fn argsort_host<T: Ord>(v: &[T]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].cmp(&v[b]));
    idx
}

impl Tensor {
    /// Einstein summation, e.g. `"ij,jk->ik"`: each operand is permuted to a common sorted letter
    /// order, broadcast, multiplied, and summed over the letters missing from the output.
    /// Supports `...`, implicit outputs and repeated letters within an operand (diagonals).
    pub fn einsum(formula: &str, operands: &[&Tensor]) -> Tensor {
        Tensor::try_einsum(formula, operands).or_panic()
    }
    /// `einsum`, reporting a formula that does not fit its operands as an error.
    pub fn try_einsum(formula: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let shapes: Vec<Vec<usize>> = operands.iter().map(|t| t.shape()).collect();
        let bad =
            |reason: String| Error::shape("einsum", &shapes.iter().map(Vec::as_slice).collect::<Vec<_>>(), reason);
        check_devices("einsum", operands)?;
        let f: String = formula.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match f.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (f.clone(), None),
        };
        let mut inputs: Vec<String> = lhs.split(',').map(str::to_string).collect();
        if inputs.len() != operands.len() || operands.is_empty() {
            return Err(bad(format!("{formula:?} names {} operands", inputs.len())));
        }
        let mut ell = String::new();
        if f.contains("...") {
            let spare: Vec<char> = ('a'..='z').chain('A'..='Z').filter(|c| !f.contains(*c)).collect();
            for (inp, x) in inputs.iter_mut().zip(operands) {
                if let Some(named) = inp.len().checked_sub(3).filter(|_| inp.contains("...")) {
                    let n = x
                        .ndim()
                        .checked_sub(named)
                        .ok_or_else(|| bad(format!("{inp:?} has more letters than its operand has axes")))?;
                    let fill: String = spare[spare.len() - n..].iter().collect();
                    *inp = inp.replace("...", &fill);
                    if n > ell.len() {
                        ell = fill;
                    }
                }
            }
        }
        let joined: String = inputs.concat();
        let output = match rhs {
            Some(r) => r.replace("...", &ell),
            None => {
                let mut once: Vec<char> =
                    joined.chars().filter(|&c| joined.matches(c).count() == 1 && !ell.contains(c)).collect();
                once.sort();
                ell.chars().chain(once).collect()
            }
        };
        // take diagonals of letters repeated within one operand, then size every letter
        let mut xs: Vec<(Tensor, Vec<char>)> = vec![];
        let mut sizes: std::collections::BTreeMap<char, usize> = Default::default();
        for (inp, x) in inputs.iter().zip(operands) {
            let letters: Vec<char> = inp.chars().collect();
            if letters.len() != x.ndim() {
                return Err(bad(format!("{inp:?} does not match the rank of its operand")));
            }
            let (x, letters) = x.einsum_diagonals(letters).map_err(|e| bad(e.to_string()))?;
            for (c, &n) in letters.iter().zip(&x.shape()) {
                let e = sizes.entry(*c).or_insert(n);
                if *e != n && *e != 1 && n != 1 {
                    return Err(bad(format!("letter {c:?} has sizes {e} and {n} in {formula:?}")));
                }
                *e = (*e).max(n);
            }
            xs.push((x, letters));
        }
        let all: Vec<char> = sizes.keys().copied().collect();
        let full: Vec<usize> = sizes.values().copied().collect();
        let out_chars: Vec<char> = output.chars().collect();
        if !out_chars.iter().all(|c| sizes.contains_key(c)) {
            return Err(bad(format!("output {output:?} names a letter no input has")));
        }
        let mut product: Option<Tensor> = None;
        for (x, letters) in xs {
            let order: Vec<isize> = argsort_host(&letters).into_iter().map(|i| i as isize).collect();
            // the permuted axes follow `all`'s (sorted) order; letters this operand lacks get size 1
            let own = |c: &char| letters.iter().position(|l| l == c).map(|p| x.shape()[p]);
            let view: Vec<usize> = all.iter().map(|c| own(c).unwrap_or(1)).collect();
            let x = x.permute(&order).reshape(&view).expand(&full);
            product = Some(match product {
                None => x,
                Some(p) => p.mul(&x),
            });
        }
        let product = product.expect("einsum: no operands");
        let gone: Vec<isize> =
            all.iter().enumerate().filter(|(_, c)| !out_chars.contains(c)).map(|(i, _)| i as isize).collect();
        let summed = if gone.is_empty() { product } else { product.sum(gone.as_slice(), false) };
        let order: Vec<isize> = argsort_host(&argsort_host(&out_chars)).into_iter().map(|i| i as isize).collect();
        Ok(summed.permute(&order))
    }
    /// Replace each pair of axes sharing a letter by their diagonal (one axis, last).
    fn einsum_diagonals(&self, mut letters: Vec<char>) -> Result<(Tensor, Vec<char>)> {
        let mut x = self.clone();
        while let Some((p, q)) =
            (0..letters.len()).find_map(|p| (p + 1..letters.len()).find(|&q| letters[q] == letters[p]).map(|q| (p, q)))
        {
            let shape = x.shape();
            let n = shape[p];
            ensure(n == shape[q], || {
                Error::value(
                    "einsum",
                    format!("repeated letter {:?} on axes of sizes {n} and {}", letters[p], shape[q]),
                )
            })?;
            let mut order: Vec<isize> =
                (0..shape.len() as isize).filter(|&i| i != p as isize && i != q as isize).collect();
            order.extend([p as isize, q as isize]);
            let rest: Vec<usize> = order[..order.len() - 2].iter().map(|&i| shape[i as usize]).collect();
            let flat = x.permute(&order).flatten(-2, -1);
            let mut grow = vec![(0, 0); flat.ndim()];
            *grow.last_mut().unwrap() = (0, n);
            let rows = [rest.clone(), vec![n, n + 1]].concat();
            let mut keep: Vec<(usize, usize)> = rows.iter().map(|&d| (0, d)).collect();
            *keep.last_mut().unwrap() = (0, 1);
            x = flat.pad(&grow).reshape(&rows).shrink(&keep).reshape(&[rest, vec![n]].concat());
            let c = letters[p];
            letters = order[..order.len() - 2].iter().map(|&i| letters[i as usize]).chain([c]).collect();
        }
        Ok((x, letters))
    }

    /// Resize the last `size.len()` axes. `mode` is `"linear"` (with `align_corners`), `"nearest"` or
    /// `"nearest-exact"`; each axis is a contraction with a weight matrix built from index ramps.
    pub fn interpolate(&self, size: &[usize], mode: &str, align_corners: bool) -> Tensor {
        self.try_interpolate(size, mode, align_corners).or_panic()
    }
    /// `interpolate`, reporting a size that does not fit the shape or an unknown mode as an error.
    pub fn try_interpolate(&self, size: &[usize], mode: &str, align_corners: bool) -> Result<Tensor> {
        let shape = self.shape();
        ensure(!size.is_empty() && size.len() <= shape.len(), || {
            Error::shape("interpolate", &[&shape], format!("size {size:?} does not fit"))
        })?;
        ensure(["linear", "nearest", "nearest-exact"].contains(&mode), || {
            Error::value("interpolate", format!("unknown mode {mode:?}"))
        })?;
        ensure(!align_corners || mode == "linear", || {
            Error::value("interpolate", "align_corners needs mode \"linear\"")
        })?;
        let resized = &shape[shape.len() - size.len()..];
        ensure(resized.iter().zip(size).all(|(&n_in, &n_out)| n_in > 0 || n_out == 0), || {
            Error::shape("interpolate", &[&shape], format!("cannot resize empty axes to size {size:?}"))
        })?;
        let nd = shape.len();
        let mut x = self.clone();
        for j in (nd - size.len()..nd).rev() {
            let (n_in, n_out) = (shape[j], size[j + size.len() - nd]);
            let src = self.ramp(n_in).reshape(&[1, n_in]);
            // the values of `x` along axis j at `index` (one per output position), as a one-hot sum
            let xt = x.transpose(j as isize, -1).unsqueeze(-2);
            let pick =
                |index: &Tensor| src.eq(index.reshape(&[n_out, 1])).where_(&xt, 0).sum(-1isize, false).cast(x.dtype());
            x = if mode == "linear" {
                // source position num / den of each output, in integers (as tinygrad), so the
                // weights are exact and uint8 rounds as torch's does (`lerp`)
                let arr = self.ramp(n_out);
                let (num, den) = match align_corners {
                    true => (arr.mul((n_in.max(1) - 1) as i64), n_out.max(2) as i64 - 1),
                    false => (arr.mul(2).add(1).mul(n_in as i64).sub(n_out as i64), 2 * n_out as i64),
                };
                let num = num.clamp(Some(0), Some((n_in.max(1) as i64 - 1) * den));
                let (low, high) = (num.idiv(den), num.add(den - 1).idiv(den));
                let frac = num.mod_(den).cast(DType::FLOAT32).div(den as f64);
                pick(&low).lerp(&pick(&high), &frac)
            } else {
                let scale = n_in as f64 / n_out as f64;
                let arr = self.ramp(n_out).cast(DType::FLOAT32);
                let pos = if mode == "nearest" { arr.mul(scale) } else { arr.add(0.5).mul(scale) };
                pick(&pos.cast(DType::INT32).clamp(None, Some(n_in.max(1) as i64 - 1)))
            };
            x = x.transpose(j as isize, -1);
        }
        Ok(x.cast(self.dtype()))
    }

    /// Sort along `dim` with a bitonic network of movement and `where` ops (one kernel per
    /// compare stage); returns `(values, indices)`. Equal values keep their order (stable). NaN
    /// sorts above every number, as in PyTorch: last ascending, first descending.
    pub fn sort(&self, dim: isize, descending: bool) -> (Tensor, Tensor) {
        self.try_sort(dim, descending).or_panic()
    }
    /// `sort`, reporting an axis the tensor lacks as an error.
    pub fn try_sort(&self, dim: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        let shape = self.shape();
        let d = resolve_axis("sort", dim, shape.len(), &shape)?;
        if shape.is_empty() || shape[d] <= 1 {
            return Ok((self.clone(), self.full_like(0).cast(DType::INT32)));
        }
        let n = shape[d];
        let stages = (usize::BITS - (n - 1).leading_zeros()) as usize;
        // padding sorts last: NaN, above every float, ascending
        let fill = match (descending, self.dtype().is_float()) {
            (true, _) => dtype_min(self.dtype()),
            (false, true) => Scalar::Float(f64::NAN),
            (false, false) => dtype_max(self.dtype()),
        };
        let mut pads = vec![(0, 0); shape.len()];
        pads[d] = (0, ((1 << stages) - n) as isize);
        let bits: Vec<usize> = [&shape[..d], &vec![2; stages][..], &shape[d + 1..]].concat();
        // the network runs on detached data; values are re-read from `self` by the indices, so the
        // gradient is a scatter instead of a backward pass through every compare stage
        let src = self.detach();
        let mut x = src.pad_value(&pads, fill).reshape(&bits);
        for stage in 1..=stages {
            // flip every other block of 2^stage so that all comparators point the same way
            let cross = (d + stages).saturating_sub(stage + 1);
            let flips: Vec<isize> = (cross + 1..d + stages).map(|a| a as isize).collect();
            let crossover = |t: &Tensor| {
                Tensor::cat(&[&t.shrink_dim(cross, (0, 1)), &t.shrink_dim(cross, (1, 2)).flip(&flips)], cross as isize)
            };
            if stage != stages {
                x = crossover(&x).contiguous();
            }
            for sub in (0..stage).rev() {
                let partner = d + stages - sub - 1;
                let (top, bottom) = (x.shrink_dim(partner, (0, 1)), x.shrink_dim(partner, (1, 2)));
                let lt = sorts_before(&top, &bottom);
                let (small, large) = (lt.where_(&top, &bottom), lt.where_(&bottom, &top));
                let parts = if descending { [large, small] } else { [small, large] };
                x = Tensor::cat(&[&parts[0], &parts[1]], partner as isize).contiguous();
            }
            if stage != stages {
                x = crossover(&x);
            }
        }
        let mut full_shape = shape.clone();
        full_shape[d] = 1 << stages;
        let sorted = x.reshape(&full_shape).shrink_dim(d, (0, n));
        // index of each sorted value: the original position holding the same value with the same
        // occurrence count (k-th equal value in the sorted output is the k-th one in the input)
        let (jj, ii) = (self.ramp(n).reshape(&[n, 1]), self.ramp(n).reshape(&[1, n]));
        let tail = vec![1; shape.len() - d - 1];
        let upto = jj.ge(&ii).reshape(&[&[n, n][..], &tail].concat());
        let counts = |t: &Tensor| {
            upto.bitwise_and(same_value(&t.unsqueeze(d as isize), &t.unsqueeze(d as isize + 1)))
                .sum(d as isize + 1, false)
        };
        let (c_orig, c_sorted) = (counts(&src), counts(&sorted));
        let same = same_value(&src.unsqueeze(d as isize + 1), &sorted.unsqueeze(d as isize));
        let hit = same.bitwise_and(c_orig.unsqueeze(d as isize + 1).eq(c_sorted.unsqueeze(d as isize)));
        let pos = self.ramp(n).reshape(&[&[n, 1][..], &tail].concat());
        let idx = hit.where_(&pos, 0).sum(d as isize, false).cast(DType::INT32);
        Ok((self.gather(d as isize, &idx), idx))
    }
    /// The indices (int32) that sort along `dim`.
    pub fn argsort(&self, dim: isize, descending: bool) -> Tensor {
        self.sort(dim, descending).1
    }
    /// `argsort`, reporting an axis the tensor lacks as an error.
    pub fn try_argsort(&self, dim: isize, descending: bool) -> Result<Tensor> {
        Ok(self.try_sort(dim, descending)?.1)
    }
    /// The `k` largest (or smallest) values along `dim`, sorted, with their indices.
    pub fn topk(&self, k: usize, dim: isize, largest: bool) -> (Tensor, Tensor) {
        self.try_topk(k, dim, largest).or_panic()
    }
    /// `topk`, reporting an axis the tensor lacks or a `k` above its size as an error.
    pub fn try_topk(&self, k: usize, dim: isize, largest: bool) -> Result<(Tensor, Tensor)> {
        let shape = self.shape();
        let d = resolve_axis("topk", dim, shape.len(), &shape)?;
        let n = shape.get(d).copied().unwrap_or(1);
        ensure(k <= n, || {
            Error::shape("topk", &[&shape], format!("k={k} is more than the {n} elements of dim {dim}"))
        })?;
        let (v, i) = self.sort(dim, largest);
        let mut keep: Vec<(usize, usize)> = shape.iter().map(|&s| (0, s)).collect();
        if !shape.is_empty() {
            keep[d] = (0, k);
        }
        Ok((v.shrink(&keep), i.shrink(&keep)))
    }
    /// The elements where `mask` (broadcast to this shape) is true, flattened. The output size
    /// depends on the data, so the mask count is realized on the host first.
    pub fn masked_select(&self, mask: &Tensor) -> Tensor {
        self.masked_select_sized(mask, None, Scalar::Int(0))
    }
    /// `masked_select`, reporting a mask that does not broadcast or a failed realize as an error.
    pub fn try_masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        self.try_masked_select_sized(mask, None, Scalar::Int(0))
    }
    /// `masked_select` with tinygrad's `size`: `Some(n)` gives `n` elements, the first `n`
    /// selected ones then `fill_value` (nothing is read on the host, so it can be captured by a
    /// JIT); `None` gives as many as the mask selects.
    pub fn masked_select_sized(&self, mask: &Tensor, size: Option<usize>, fill_value: Scalar) -> Tensor {
        self.try_masked_select_sized(mask, size, fill_value).or_panic()
    }
    /// `masked_select_sized`, reporting a mask that does not broadcast to this shape, a mask on
    /// another device or a failed realize as an error.
    pub fn try_masked_select_sized(&self, mask: &Tensor, size: Option<usize>, fill_value: Scalar) -> Result<Tensor> {
        let shape = self.shape();
        check_devices("masked_select", &[self, mask])?;
        let x = self.flatten(0, -1);
        let m = mask.cast(DType::BOOL).try_broadcast_to(&shape)?.flatten(0, -1);
        let n = x.numel();
        let selected = m.sum(None::<isize>, false);
        let count = match size {
            Some(n) => n,
            None => selected.try_item::<i32>()? as usize,
        };
        if count == 0 {
            return Ok(x.shrink(&[(0, 0)])); // empty, but still a function of `self` (zero gradient)
        }
        let slot = m.cumsum(0).sub(m.cast(DType::INT32));
        let ramp = self.ramp(count);
        let pick = m.reshape(&[1, n]).bitwise_and(slot.reshape(&[1, n]).eq(ramp.reshape(&[count, 1])));
        let xs = x.reshape(&[1, n]);
        let values = pick.where_(&xs, 0).sum(1isize, false).cast(self.dtype());
        Ok(match size {
            None => values,
            Some(_) => ramp.lt(&selected).where_(&values, self.const_tensor(fill_value, self.dtype())),
        })
    }
    /// The coordinates (int32, one row of `ndim` per element) of the non-zero elements, in
    /// row-major order. As `masked_select`, `size` fixes the row count (padding with
    /// `fill_value`), else the count is read on the host.
    pub fn nonzero(&self, size: Option<usize>, fill_value: Scalar) -> Tensor {
        self.try_nonzero(size, fill_value).or_panic()
    }
    /// `nonzero`, reporting a failed realize of the count as an error.
    pub fn try_nonzero(&self, size: Option<usize>, fill_value: Scalar) -> Result<Tensor> {
        let shape = self.shape();
        let nonzero = self.ne(0);
        if shape.is_empty() {
            let rows = match size {
                Some(n) => n,
                None => usize::from(nonzero.try_item::<bool>()?),
            };
            return Ok(Tensor::full_dtype(&[rows, 0], 0, DType::INT32).to(self.device()));
        }
        let nd = shape.len();
        let axes: Vec<Tensor> = shape
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let along: Vec<usize> = (0..nd).map(|j| if j == i { s } else { 1 }).collect();
                self.ramp(s).reshape(&along).expand(&shape).flatten(0, -1)
            })
            .collect();
        let coords = Tensor::stack(&axes.iter().collect::<Vec<_>>(), -1);
        let m = nonzero.flatten(0, -1).unsqueeze(-1).expand(&coords.shape());
        Ok(coords.try_masked_select_sized(&m, size.map(|n| n * nd), fill_value)?.reshape(&[-1, nd as isize]))
    }
}

/// Whether `a` sorts before `b` ascending: a smaller number, or any number before a NaN.
fn sorts_before(a: &Tensor, b: &Tensor) -> Tensor {
    match a.dtype().is_float() {
        true => a.lt(b).bitwise_or(b.isnan().bitwise_and(a.isnan().logical_not())),
        false => a.lt(b),
    }
}

/// Whether `a` and `b` are the same value, a NaN the same as a NaN.
fn same_value(a: &Tensor, b: &Tensor) -> Tensor {
    match a.dtype().is_float() {
        true => a.eq(b).bitwise_or(a.isnan().bitwise_and(b.isnan())),
        false => a.eq(b),
    }
}
