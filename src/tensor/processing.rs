//! Matrix products, expressed as broadcast multiply + sum (no handwritten kernels).

use super::Tensor;

impl Tensor {
    /// Matrix product with numpy semantics for 1-D and batched operands.
    pub fn matmul(&self, w: &Tensor) -> Tensor {
        let (xs, ws) = (self.shape(), w.shape());
        let (dx, dw) = (xs.len(), ws.len());
        assert!(dx > 0 && dw > 0, "matmul: both operands need at least 1 dimension, got {xs:?} and {ws:?}");
        let k_axis = dw - dw.min(2);
        assert_eq!(xs[dx - 1], ws[k_axis], "matmul: {xs:?} @ {ws:?}: inner dimensions differ");
        let ones = dx.min(dw).saturating_sub(1).min(1);
        let mut xshape: Vec<isize> = xs[..dx - 1].iter().map(|&d| d as isize).collect();
        xshape.extend(std::iter::repeat_n(1, ones));
        xshape.push(xs[dx - 1] as isize);
        let mut wshape: Vec<isize> = ws[..dw - dw.min(2)].iter().map(|&d| d as isize).collect();
        wshape.extend(std::iter::repeat_n(1, ones));
        wshape.extend(ws[dw - dw.min(2)..].iter().map(|&d| d as isize));
        let x = self.reshape(&xshape);
        let w = w.reshape(&wshape).transpose(-1, -(dw.min(2) as isize));
        x.mul(&w).sum(-1isize, false)
    }
    /// Alias of `matmul`.
    pub fn dot(&self, w: &Tensor) -> Tensor {
        self.matmul(w)
    }
}
