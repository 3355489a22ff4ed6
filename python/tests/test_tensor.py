"""The Python package against exact values and numpy: creation, dtypes, arithmetic with Python
numbers on either side, reductions, movement, matmul and softmax, autograd, and the INTERP device.

Run by .ci/run after `tools/setup.sh --python` builds the package into tools/.venv-python:
`tools/.venv-python/bin/python -m unittest discover -s python/tests -v`."""

import unittest

import numpy as np

from lazygrad import Tensor, UOp, dtypes


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class TestCreation(unittest.TestCase):
    def test_nested_lists_give_shape_and_default_dtypes(self):
        self.assertEqual(Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).shape, (2, 3))
        self.assertEqual(Tensor([[1.0, 2]]).dtype, dtypes.float32)
        self.assertEqual(Tensor([1, 2]).dtype, dtypes.int32)
        self.assertEqual(Tensor([True, False]).dtype, dtypes.bool)
        self.assertEqual(Tensor(2.5).shape, ())
        self.assertEqual(Tensor(2.5).item(), 2.5)
        self.assertEqual(Tensor([]).shape, (0,))

    def test_a_dtype_by_object_or_name(self):
        t = Tensor([1, 2, 3], dtype=dtypes.float64)
        self.assertEqual(t.dtype, dtypes.double)
        self.assertEqual(t.tolist(), [1.0, 2.0, 3.0])
        self.assertEqual(Tensor([3_000_000_000], dtype="int64").tolist(), [3_000_000_000])
        self.assertEqual(repr(dtypes.float), "dtypes.float")
        # int64 and float64 values keep every digit (not passed through float64 or float32)
        self.assertEqual(Tensor([2**60 + 1], dtype="int64").tolist(), [2**60 + 1])
        self.assertEqual(Tensor([0.1, 1 / 3], dtype=dtypes.float64).tolist(), [0.1, 1 / 3])

    def test_ragged_lists_and_other_objects_are_errors(self):
        with self.assertRaises(ValueError):
            Tensor([[1.0, 2.0], [3.0]])
        with self.assertRaises(ValueError):
            Tensor([[1.0], 2.0])
        with self.assertRaises(TypeError):
            Tensor(["a"])
        looped = [1.0]
        looped.append(looped)
        with self.assertRaises((TypeError, ValueError)):
            Tensor(looped)
        # as tinygrad's getattr(dtypes, name)
        with self.assertRaises(AttributeError):
            Tensor([1.0], dtype="float128")

    def test_constructors(self):
        self.assertEqual(Tensor.zeros(2, 3).tolist(), [[0.0] * 3] * 2)
        self.assertEqual(Tensor.ones((2,)).tolist(), [1.0, 1.0])
        self.assertEqual(Tensor.arange(4).tolist(), [0, 1, 2, 3])
        Tensor.manual_seed(7)
        a = Tensor.rand(100).tolist()
        Tensor.manual_seed(7)
        self.assertEqual(Tensor.rand(100).tolist(), a)
        self.assertTrue(all(0.0 <= v < 1.0 for v in a))


class TestMath(unittest.TestCase):
    def test_numbers_on_either_side_are_weak(self):
        a = Tensor([1.0, 2.0, 4.0])
        self.assertEqual((a + 1).tolist(), [2.0, 3.0, 5.0])
        self.assertEqual((1 + a).tolist(), [2.0, 3.0, 5.0])
        self.assertEqual((10 - a).tolist(), [9.0, 8.0, 6.0])
        self.assertEqual((a - 10).tolist(), [-9.0, -8.0, -6.0])
        self.assertEqual((2 * a).tolist(), [2.0, 4.0, 8.0])
        self.assertEqual((1 / a).tolist(), [1.0, 0.5, 0.25])
        self.assertEqual((a / 4).tolist(), [0.25, 0.5, 1.0])
        self.assertEqual((-a).tolist(), [-1.0, -2.0, -4.0])
        i = Tensor([1, 2, 3])
        self.assertEqual((i * 2).dtype, dtypes.int32)
        self.assertEqual((i * 2.5).tolist(), [2.5, 5.0, 7.5])
        self.assertEqual((a < 2).tolist(), [True, False, False])
        self.assertEqual((a > 1).tolist(), [False, True, True])

    def test_broadcasting_tensors(self):
        a = Tensor([[1.0], [2.0]])
        b = Tensor([10.0, 20.0, 30.0])
        self.assertEqual((a * b).tolist(), [[10.0, 20.0, 30.0], [20.0, 40.0, 60.0]])

    def test_unary_ops_against_numpy(self):
        x = rand(64)
        t = Tensor(x.tolist())
        for name, ref in [("exp", np.exp), ("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0)),
                          ("sigmoid", lambda v: 1 / (1 + np.exp(-v)))]:
            np.testing.assert_allclose(getattr(t, name)().numpy(), ref(x), rtol=1e-6, atol=1e-7, err_msg=name)
        pos = np.abs(x) + 0.5
        np.testing.assert_allclose(Tensor(pos.tolist()).log().numpy(), np.log(pos), rtol=1e-6)
        np.testing.assert_allclose(Tensor(pos.tolist()).sqrt().numpy(), np.sqrt(pos), rtol=1e-6)

    def test_reductions(self):
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        t = Tensor(x.tolist())
        self.assertEqual(t.sum().item(), 276.0)
        self.assertEqual(t.sum(axis=1).tolist(), x.sum(axis=1).tolist())
        self.assertEqual(t.sum(axis=(0, 2), keepdim=True).shape, (1, 3, 1))
        self.assertEqual(t.max(axis=-1).tolist(), x.max(axis=-1).tolist())
        self.assertEqual(t.mean(axis=0).tolist(), x.mean(axis=0).tolist())

    def test_matmul_and_softmax_against_numpy(self):
        a, b = rand(33, 17, seed=1), rand(17, 9, seed=2)
        ta, tb = Tensor(a.tolist()), Tensor(b.tolist())
        np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ta.matmul(tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(ta.softmax().numpy(), e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(ta.log_softmax(0).numpy(), a - np.log(np.exp(a).sum(axis=0)), rtol=1e-5,
                                   atol=1e-5)

    def test_the_interpreter_computes_what_the_cpu_does(self):
        a = rand(8, 8, seed=3)
        cpu = (Tensor(a.tolist()) @ Tensor(a.tolist())).exp().sum(axis=1).tolist()
        interp = (Tensor(a.tolist(), device="INTERP") @ Tensor(a.tolist(), device="INTERP")).exp().sum(axis=1)
        self.assertEqual(interp.device, "INTERP")
        np.testing.assert_allclose(interp.tolist(), cpu, rtol=1e-6)


class TestMovement(unittest.TestCase):
    def test_reshape_permute_transpose(self):
        x = np.arange(6).reshape(2, 3)
        t = Tensor(x.tolist())
        self.assertEqual(t.reshape(3, 2).tolist(), x.reshape(3, 2).tolist())
        self.assertEqual(t.reshape((-1,)).tolist(), list(range(6)))
        self.assertEqual(t.T.tolist(), x.T.tolist())
        self.assertEqual(t.transpose().tolist(), x.T.tolist())
        self.assertEqual(t.reshape(1, 2, 3).permute(2, 0, 1).shape, (3, 1, 2))
        with self.assertRaises(ValueError):
            Tensor.zeros(-1)


class TestErrors(unittest.TestCase):
    def test_programmer_errors_are_value_errors_naming_the_op_and_shapes(self):
        # a Rust panic, raised as pyo3's PanicException, would escape `except Exception`
        with self.assertRaisesRegex(ValueError, r"add: shapes do not broadcast \(shapes \[2\], \[3\]\)"):
            Tensor([1.0, 2.0]) + Tensor([1.0, 2.0, 3.0])
        with self.assertRaisesRegex(ValueError, "reshape"):
            Tensor.zeros(2, 3).reshape(4, 2)
        # an axis out of range is an IndexError, as in tinygrad and torch
        with self.assertRaises(IndexError):
            Tensor.zeros(2).sum(axis=3)
        # what the world breaks (devices, compilers) is a RuntimeError
        with self.assertRaisesRegex(RuntimeError, "unknown device"):
            Tensor([1.0], device="NOSUCHDEVICE").tolist()

    def test_each_kind_of_error_is_its_exception(self):
        import lazygrad

        t = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        # a broken precondition is a lazygrad.InvalidArgument: a ValueError and a RuntimeError
        self.assertTrue(issubclass(lazygrad.InvalidArgument, ValueError))
        self.assertTrue(issubclass(lazygrad.InvalidArgument, RuntimeError))
        for kind, op in [("shapes", lambda: t.reshape(4, 2)), ("shapes", lambda: t @ t),
                         ("dtypes", lambda: t & t), ("devices", lambda: t + Tensor.zeros(2, 3, device="INTERP")),
                         ("value", lambda: t.chunk(0)), ("value", lambda: t.clamp())]:
            with self.assertRaises(lazygrad.InvalidArgument, msg=kind):
                op()
        # an index or axis out of range is an IndexError, a number a dtype cannot hold an OverflowError
        for op in [lambda: t[2], lambda: t[0, 0, 0], lambda: t.sum(axis=2), lambda: t.transpose(0, 5),
                   lambda: t.gather(1, Tensor([[0], [7]]))]:
            with self.assertRaises(IndexError):
                op()
        with self.assertRaises(OverflowError):
            Tensor.arange(2**31, 2**31 + 2, dtype=dtypes.int32)
        # a variable bound outside its range, or made with no range, is a broken precondition
        v = UOp.variable("v", 1, 8)
        for op in [lambda: v.bind(0), lambda: v.bind(9), lambda: UOp.variable("w", 8, 1)]:
            with self.assertRaises(lazygrad.InvalidArgument):
                op()
        # no broken precondition is an internal error
        for op in [lambda: t.reshape(4, 2), lambda: t[2], lambda: t.sum(axis=2), lambda: v.bind(0)]:
            try:
                op()
            except Exception as e:
                self.assertNotIn("internal error", str(e))


class TestMoreOps(unittest.TestCase):
    def test_unary_forwards_against_numpy(self):
        x = rand(64, seed=10)
        t = Tensor(x.tolist())
        pos = np.abs(x) + 0.5
        tp = Tensor(pos.tolist())
        for name, ref, v, tv in [("sin", np.sin, x, t), ("cos", np.cos, x, t), ("exp2", np.exp2, x, t),
                                 ("log2", np.log2, pos, tp), ("rsqrt", lambda a: 1 / np.sqrt(a), pos, tp),
                                 ("reciprocal", lambda a: 1 / a, pos, tp), ("sign", np.sign, x, t),
                                 ("floor", np.floor, x * 3, t * 3), ("ceil", np.ceil, x * 3, t * 3),
                                 ("square", np.square, x, t), ("abs", np.abs, x, t)]:
            np.testing.assert_allclose(getattr(tv, name)().numpy(), ref(v), rtol=2e-6, atol=1e-6, err_msg=name)
        self.assertEqual(Tensor([0.5, 1.5, 2.5, -0.5]).round().tolist(), [0.0, 2.0, 2.0, -0.0])
        self.assertEqual(t.zeros_like().tolist(), [0.0] * 64)
        self.assertEqual(Tensor([1, 2]).ones_like().tolist(), [1, 1])

    def test_creation(self):
        self.assertEqual(Tensor.full((2, 2), 7).tolist(), [[7, 7], [7, 7]])
        self.assertEqual(Tensor.eye(3).tolist(), np.eye(3).tolist())
        self.assertEqual(Tensor([1.0, 2.0]).full_like(3.5).tolist(), [3.5, 3.5])
        self.assertEqual(Tensor.stack(Tensor([1, 2]), Tensor([3, 4]), dim=1).tolist(), [[1, 3], [2, 4]])
        # a method as in tinygrad: the tensor it is called on is the first of the stack
        self.assertEqual(Tensor([1, 2]).stack(Tensor([3, 4])).tolist(), [[1, 2], [3, 4]])
        # and, as tinygrad's argfix, one tuple or list of tensors in its place
        a, b, c = Tensor([1, 2]), Tensor([3, 4]), Tensor([5, 6])
        self.assertEqual(Tensor.stack((a, b, c), dim=1).tolist(), [[1, 3, 5], [2, 4, 6]])
        self.assertEqual(Tensor.stack([a, b]).tolist(), [[1, 2], [3, 4]])
        with self.assertRaises(ValueError):
            Tensor.stack((a, b), c)
        with self.assertRaises(IndexError):
            a.stack(b, dim=5)
        with self.assertRaises(TypeError):
            a.stack(b, axis=1)
        Tensor.manual_seed(11)
        u = Tensor.uniform(1000, low=-2.0, high=3.0).numpy()
        self.assertTrue(u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.2)

    def test_movement_against_numpy(self):
        x = np.arange(12).reshape(3, 4)
        t = Tensor(x.tolist())
        self.assertEqual(t.unsqueeze(0).shape, (1, 3, 4))
        self.assertEqual(t.unsqueeze(0).squeeze().shape, (3, 4))
        self.assertEqual(t.reshape(3, 1, 4).expand(3, 2, 4).tolist(), np.broadcast_to(x.reshape(3, 1, 4), (3, 2, 4)).tolist())
        self.assertEqual(t.pad([(1, 0), (0, 2)]).tolist(), np.pad(x, ((1, 0), (0, 2))).tolist())
        self.assertEqual(t.shrink([(1, 3), (0, 2)]).tolist(), x[1:3, 0:2].tolist())
        self.assertEqual(t.flip(1).tolist(), x[:, ::-1].tolist())
        self.assertEqual(t.flip((0, 1)).tolist(), x[::-1, ::-1].tolist())
        self.assertEqual(t.repeat(2, 1).tolist(), np.tile(x, (2, 1)).tolist())

    def test_reductions_against_numpy(self):
        x = rand(4, 5, seed=12)
        t = Tensor(x.tolist())
        np.testing.assert_allclose(t.min(axis=1).numpy(), x.min(axis=1))
        np.testing.assert_allclose(t.prod(axis=0).numpy(), x.prod(axis=0), rtol=1e-5)
        np.testing.assert_allclose(t.var(axis=1).numpy(), x.var(axis=1, ddof=1), rtol=1e-5)
        np.testing.assert_allclose(t.std(correction=0).numpy(), x.std(), rtol=1e-5)
        self.assertEqual(t.argmin(axis=0).tolist(), x.argmin(axis=0).tolist())
        np.testing.assert_array_equal(t.maximum(0.0).numpy(), np.maximum(x, 0))
        np.testing.assert_array_equal(t.minimum(t * 2).numpy(), np.minimum(x, x * 2))
        np.testing.assert_array_equal(t.clip(-0.5, 0.5).numpy(), np.clip(x, -0.5, 0.5))
        np.testing.assert_array_equal(t.clip(max_=0.0).numpy(), np.minimum(x, 0.0))

    def test_functional_against_numpy(self):
        x, w, b = rand(6, 8, seed=13), rand(3, 8, seed=14), rand(3, seed=15)
        t = Tensor(x.tolist())
        want = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(t.layernorm().numpy(), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(t.linear(Tensor(w.T.tolist()), Tensor(b.tolist())).numpy(), x @ w.T + b,
                                   rtol=1e-5, atol=1e-5)
        self.assertEqual(Tensor([0, 2]).one_hot(3).tolist(), [[1, 0, 0], [0, 0, 1]])
        q, k, v = rand(2, 4, 8, seed=16), rand(2, 5, 8, seed=17), rand(2, 5, 3, seed=18)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(8)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        want = (p / p.sum(axis=-1, keepdims=True)) @ v
        got = Tensor(q.tolist()).scaled_dot_product_attention(Tensor(k.tolist()), Tensor(v.tolist())).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        self.assertEqual(t.dropout(0.5).tolist(), t.tolist(), "no dropout outside training")
        with Tensor.train():
            kept = Tensor.ones(10000).dropout(0.5).numpy()
        self.assertEqual(set(kept.tolist()), {0.0, 2.0})
        self.assertLess(abs(kept.mean() - 1.0), 0.05)


class TestConvolutionsAndInPlace(unittest.TestCase):
    def test_conv2d_avg_pool_cumsum_gather_against_numpy(self):
        x, w = rand(1, 1, 4, 4, seed=20), rand(2, 1, 2, 2, seed=21)
        want = np.zeros((1, 2, 3, 3), dtype=np.float64)
        for i in range(3):
            for j in range(3):
                want[0, :, i, j] = (x[0, 0, i:i + 2, j:j + 2] * w[:, 0]).sum(axis=(1, 2))
        np.testing.assert_allclose(Tensor(x.tolist()).conv2d(Tensor(w.tolist())).numpy(), want, rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(Tensor(x.tolist()).avg_pool2d().numpy(),
                                   x.reshape(1, 1, 2, 2, 2, 2).mean(axis=(3, 5)), rtol=1e-6)
        self.assertEqual(Tensor([[1, 2, 3], [4, 5, 6]]).cumsum(1).tolist(), [[1, 3, 6], [4, 9, 15]])
        self.assertEqual(Tensor([[1, 2], [3, 4]]).gather(1, Tensor([[1, 0], [0, 0]])).tolist(), [[2, 1], [3, 3]])

    def test_casts_len_and_assign(self):
        self.assertEqual(Tensor([1.7, -1.7]).int().tolist(), [1, -1])
        self.assertEqual(Tensor([1, 0]).float().dtype, dtypes.float32)
        self.assertEqual(Tensor([1.0]).half().dtype, dtypes.float16)
        self.assertEqual(Tensor([2, 0]).bool().tolist(), [True, False])
        self.assertEqual(len(Tensor.zeros(5, 2)), 5)
        with self.assertRaises(TypeError):
            len(Tensor(1.0))
        t = Tensor([1.0, 2.0, 3.0]).realize()
        t[1:].assign(Tensor([20.0, 30.0])).realize()
        self.assertEqual(t.tolist(), [1.0, 20.0, 30.0])
        t.assign(t * 2).realize()
        self.assertEqual(t.tolist(), [2.0, 40.0, 60.0])

    def test_plus_equals_on_a_lazy_tensor_is_the_sum_bit_for_bit(self):
        # (1 + 2**-12)**2 - 1 is 2**-11 + 2**-24 with one rounding (the fused multiply-add inside
        # one kernel), 2**-11 when the product is stored first
        x, z = Tensor([1.0 + 2.0**-12]).realize(), Tensor([-1.0]).realize()
        fused = (x * x + z).tolist()
        self.assertEqual(fused, [2.0**-11 + 2.0**-24])
        a = x * x
        a += z
        self.assertEqual(a.tolist(), fused)

    def test_setitem_writes_tensors_and_numbers_into_views(self):
        x = np.arange(6, dtype=np.float32).reshape(3, 2)
        t = Tensor(x.tolist()).realize()
        t[1] = Tensor([30.0, 40.0])
        x[1] = [30.0, 40.0]
        t[0, 1] = 7
        x[0, 1] = 7
        t[2:] = 0.5
        x[2:] = 0.5
        t[:, 0] = Tensor([9, 8, 7])
        x[:, 0] = [9, 8, 7]
        # a tensor index writes the rows it selects (it wrote into a gathered copy)
        t[Tensor([2, 0])] = Tensor([[-1.0, -2.0], [-3.0, -4.0]])
        x[[2, 0]] = [[-1.0, -2.0], [-3.0, -4.0]]
        self.assertEqual(t.tolist(), x.tolist())
        with self.assertRaisesRegex(ValueError, "setitem"):
            t[0] = Tensor([1.0, 2.0, 3.0])


class TestIndexingAndComparisons(unittest.TestCase):
    def test_ints_slices_none_ellipsis_and_tensors_index_as_numpy_does(self):
        x = np.arange(24).reshape(2, 3, 4)
        t = Tensor(x.tolist())
        self.assertEqual(t[1].tolist(), x[1].tolist())
        self.assertEqual(t[:, 1:3].tolist(), x[:, 1:3].tolist())
        self.assertEqual(t[..., ::2].tolist(), x[..., ::2].tolist())
        self.assertEqual(t[None, 0, -1].tolist(), x[None, 0, -1].tolist())
        self.assertEqual(t[Tensor([1, 0, 1])].tolist(), x[[1, 0, 1]].tolist())
        with self.assertRaises(TypeError):
            t["a"]

    def test_comparisons_are_elementwise_and_tensors_hash_by_identity(self):
        a, b = Tensor([1, 2, 3]), Tensor([3, 2, 1])
        self.assertEqual((a == b).tolist(), [False, True, False])
        self.assertEqual((a != 2).tolist(), [True, False, True])
        self.assertEqual((a <= b).tolist(), [True, True, False])
        self.assertEqual((a >= 2).tolist(), [False, True, True])
        self.assertEqual(len({a, b, a}), 2)

    def test_randint_draws_int32_in_its_range(self):
        Tensor.manual_seed(3)
        r = Tensor.randint(1000, low=5, high=9)
        self.assertEqual(r.dtype, dtypes.int32)
        self.assertEqual(sorted(set(r.tolist())), [5, 6, 7, 8])

    def test_max_pool2d_and_sequential(self):
        x = rand(2, 3, 8, 8, seed=6)
        want = x.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5))
        t = Tensor(x.tolist())
        np.testing.assert_array_equal(t.max_pool2d().numpy(), want)
        out = t.sequential([Tensor.max_pool2d, lambda v: v.flatten(1), Tensor.relu])
        np.testing.assert_array_equal(out.numpy(), np.maximum(want.reshape(2, -1), 0))

    def test_realize_takes_more_tensors_to_compute_together(self):
        a = Tensor([1.0, 2.0])
        b, c = a * 2, a + 1
        self.assertIs(type(b.realize(c)), Tensor)
        self.assertEqual((b.tolist(), c.tolist()), ([2.0, 4.0], [2.0, 3.0]))


class TestResults(unittest.TestCase):
    def test_numpy_keeps_the_dtype(self):
        self.assertEqual(Tensor([1.5, 2.5]).numpy().dtype, np.float32)
        self.assertEqual(Tensor([1, 2], dtype="int64").numpy().dtype, np.int64)
        self.assertEqual(Tensor([True]).numpy().dtype, np.bool_)

    def test_item_needs_one_element(self):
        self.assertEqual(Tensor([[4]]).item(), 4)
        with self.assertRaises(ValueError):
            Tensor([1, 2]).item()


class TestAutograd(unittest.TestCase):
    def test_gradient_of_a_sum_of_squares(self):
        x = Tensor([1.0, -2.0, 3.0]).requires_grad_()
        self.assertTrue(x.requires_grad)
        (x * x).sum().backward()
        self.assertEqual(x.grad.tolist(), [2.0, -4.0, 6.0])

    def test_gradient_of_a_matmul_against_the_formula(self):
        a, b = rand(5, 4, seed=4), rand(4, 3, seed=5)
        ta, tb = Tensor(a.tolist()).requires_grad_(), Tensor(b.tolist()).requires_grad_()
        (ta @ tb).relu().sum().backward()
        mask = (a @ b > 0).astype(np.float32)
        np.testing.assert_allclose(ta.grad.numpy(), mask @ b.T, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tb.grad.numpy(), a.T @ mask, rtol=1e-5, atol=1e-6)
        self.assertIsNone(Tensor([1.0]).grad)


if __name__ == "__main__":
    unittest.main()
