"""Python values in and out as Python users expect them (issues 38 and 39): numbers that do not fit
a dtype (wrapped to a dtype asked for, as tinygrad and torch do; an inferred one holds them), numpy arrays of every dtype, empty data, truth values, iteration, errors as the Python
exceptions tinygrad raises, dtypes as dict keys, gradients, the graph's buffers, and state dicts of
cyclic objects."""

import array
import unittest

import numpy as np

from lazygrad import Device, Tensor, UOp, Variable, dtypes
from lazygrad.nn import Linear
from lazygrad.nn.state import get_state_dict


class TestNumbers(unittest.TestCase):
    def test_an_inferred_dtype_holds_the_ints_and_one_asked_for_wraps_them(self):
        # without a dtype, ints past int32 are int64, as numpy infers (tinygrad wraps them to int32)
        big = Tensor([2**40, 2**32 + 5])
        self.assertEqual((big.dtype, big.tolist()), (dtypes.int64, [2**40, 2**32 + 5]))
        # a dtype asked for wraps them to its width, as tinygrad and torch do
        self.assertEqual(Tensor([-1, 256, True], dtype=dtypes.uint8).tolist(), [255, 0, 1])
        data = [1 << 33, 1 << 32, (1 << 32) - 1, 1, -(1 << 33), -1]
        np.testing.assert_array_equal(Tensor(data, dtype=dtypes.uint32).numpy(), np.array(data).astype(np.uint32))
        self.assertEqual(Tensor([2**40], dtype=dtypes.int64).tolist(), [2**40])
        self.assertEqual(Tensor(2**64 - 1, dtype=dtypes.uint64).tolist(), 2**64 - 1)
        with self.assertRaises(ValueError):
            Tensor([2**64])
        for value in [float("nan"), float("inf")]:
            with self.assertRaises(OverflowError):
                Tensor([value], dtype=dtypes.int32)

    def test_an_int_past_int64_fits_a_float_dtype_and_a_fill_past_int32_is_int64(self):
        # as torch: a float dtype takes any int Python can round (it raised "does not fit 64 bits")
        self.assertEqual(Tensor([2**100], dtype=dtypes.float32).tolist(), [float(np.float32(2.0**100))])
        self.assertEqual(Tensor([2**200], dtype=dtypes.float32).tolist(), [float("inf")])
        # full inferred int32 and wrapped 2**40 to 0
        self.assertEqual((Tensor.full((2,), 2**40).dtype, Tensor.full((2,), 2**40).tolist()), (dtypes.int64, [2**40] * 2))

    def test_empty_data_is_float32(self):
        self.assertEqual(Tensor([]).dtype, dtypes.float32)
        self.assertEqual(Tensor([]).numpy().shape, (0,))

    def test_float16_rounds_once_from_a_python_float(self):
        x = 1.0 + 2.0**-11 + 2.0**-30  # just above half a float16 step past 1: rounds up
        # through float32 it would first become the tie 1 + 2**-11, which rounds to even: 1
        self.assertEqual(Tensor([x], dtype=dtypes.float16).tolist(), [1.0 + 2.0**-10])


class TestNumpy(unittest.TestCase):
    def test_every_dtype_round_trips(self):
        for name in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64"]:
            a = (np.arange(12).reshape(3, 4) % 3).astype(name)
            out = Tensor(a).numpy()
            self.assertEqual(out.dtype, a.dtype, name)
            np.testing.assert_array_equal(out, a, name)

    def test_layouts_numpy_hands_over(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.testing.assert_array_equal(Tensor(a.T).numpy(), a.T)  # not contiguous
        np.testing.assert_array_equal(Tensor(a.astype(">f4")).numpy(), a)  # big-endian
        np.testing.assert_array_equal(Tensor(a, dtype=dtypes.int32).numpy(), a.astype(np.int32))
        self.assertEqual(Tensor(np.zeros((0, 3))).numpy().shape, (0, 3))
        self.assertEqual(Tensor(np.float32(2.5)).dtype, dtypes.float32)

    def test_bytes_are_uint8(self):
        self.assertEqual(Tensor(b"\x01\x02\xff").tolist(), [1, 2, 255])


class TestTruthAndIteration(unittest.TestCase):
    def test_a_tensor_has_no_truth_value(self):
        for t in [Tensor([0.0]), Tensor([1.0]), Tensor([1, 2])]:
            with self.assertRaises(TypeError):
                bool(t)

    def test_membership_compares_values_not_always_true(self):
        t = Tensor([1.0])
        self.assertIn(t, [t])  # identity
        with self.assertRaises(TypeError):
            Tensor([1.0]) in [Tensor([2.0])]

    def test_a_0d_tensor_is_not_iterable(self):
        # as torch; the fallback through __getitem__ gave an empty list
        with self.assertRaises(TypeError):
            list(Tensor(1.0))

    def test_iteration_stops_at_the_end(self):
        rows = list(Tensor([[1, 2], [3, 4], [5, 6]]))
        self.assertEqual([r.tolist() for r in rows], [[1, 2], [3, 4], [5, 6]])
        with self.assertRaises(IndexError):
            Tensor([1, 2, 3])[3]


class TestErrors(unittest.TestCase):
    def test_programmer_errors_are_value_errors(self):
        with self.assertRaises(ValueError):
            Tensor.ones(2, 3) + Tensor.ones(4)
        with self.assertRaises(ValueError):
            Tensor.zeros(-1, 2)

    def test_a_wrong_type_is_a_type_error(self):
        with self.assertRaises(TypeError):
            Tensor(["a"])
        with self.assertRaises(TypeError):
            Tensor.ones(2) + "a"


class TestDTypes(unittest.TestCase):
    def test_dtypes_hash_and_answer_getattr_hasattr_dir(self):
        self.assertEqual({dtypes.float32: 1}[dtypes.float], 1)
        self.assertEqual(getattr(dtypes, "float16"), dtypes.half)
        self.assertFalse(hasattr(dtypes, "float7"))
        self.assertIn("float32", dir(dtypes))


class TestGradient(unittest.TestCase):
    def test_gradient_of_unused_target_is_zeros(self):
        x, unused = Tensor([1.0, 2.0]), Tensor([3.0])
        gx, gu = (x * x).sum().gradient(x, unused)
        self.assertEqual(gx.tolist(), [2.0, 4.0])
        self.assertEqual(gu.tolist(), [0.0])


class TestGraph(unittest.TestCase):
    def test_a_buffer_is_one_object_and_a_clone_has_its_own(self):
        a = Tensor([[1.0, 2.0], [3.0, 4.0]]).realize()
        self.assertIs(a.uop.base.buffer, a.reshape(4).uop.base.buffer)
        self.assertIs(a[1:].uop.base.buffer, a.uop.buffer)
        self.assertIsNot(a.clone().realize().uop.base.buffer, a.uop.base.buffer)
        self.assertTrue(a.uop.has_buffer_identity())
        self.assertEqual((a.uop.op, a.uop.base.op, a.uop.buffer.size), ("RESHAPE", "BUFFER", 4))
        with self.assertRaises(RuntimeError):
            (a + 1).uop.buffer

    def test_a_tensor_of_a_constant_node_is_deviceless_unless_put_on_one(self):
        t = Tensor(UOp.const(2.0).cast(dtypes.float16))
        self.assertEqual((t.device, t.uop.device), (None, None))
        self.assertEqual(repr(t), "<Tensor <UOp None () half> on None with grad None>")
        u = t.uop
        self.assertIs(t.realize().uop, u)  # nowhere to store it: realize leaves it
        self.assertEqual((t.shape, t.dtype, t.numpy().item()), ((), dtypes.float16, 2.0))
        self.assertEqual(((t + 1).tolist(), (t + 1).device), (3.0, Device.DEFAULT))
        on_cpu = Tensor(UOp.const(3), device="CPU")
        self.assertEqual((on_cpu.device, on_cpu.clone().tolist()), ("CPU", 3))
        # a node with storage is on its buffer's device, and one object per node
        a = Tensor([1.0, 2.0], device="INTERP").realize()
        self.assertEqual((a.uop.device, Tensor(a.uop).device), ("INTERP", "INTERP"))
        self.assertIs(a.uop, a.uop)
        self.assertEqual(repr(a), "<Tensor <UOp INTERP (2,) float> on INTERP with grad None>")

    def test_from_blob_uses_host_memory_in_place(self):
        from lazygrad.helpers import mv_address
        host = memoryview(bytearray(16)).cast("I")
        t = Tensor.from_blob(mv_address(host), (2, 2), dtype=dtypes.uint32, device="CPU")
        self.assertEqual((t.shape, t.dtype, (t + 1).tolist()), ((2, 2), dtypes.uint32, [[1, 1], [1, 1]]))
        host[:] = array.array("I", [0, 1, 2, 3])
        self.assertEqual((t * 10).tolist(), [[0, 10], [20, 30]])
        t.assign(t + 5).realize()  # a kernel writes into it
        self.assertEqual(host.tolist(), [5, 6, 7, 8])
        data = np.arange(3, dtype=np.float32)
        self.assertEqual(Tensor.from_blob(data.ctypes.data, (3,)).numpy().tolist(), [0.0, 1.0, 2.0])
        with self.assertRaises(RuntimeError):  # a null pointer is no memory
            Tensor.from_blob(0, (3,), device="CPU")
        with self.assertRaises(ValueError):  # float32 elements at an odd address
            Tensor.from_blob(data.ctypes.data + 1, (2,), device="CPU")
        # 32 MiB written through memory off the 64-byte grid: refused, not a crash
        big = np.ones((8 << 20) + 16, dtype=np.float32)
        off = (-big.ctypes.data % 64) // 4 + 4
        lent = Tensor.from_blob(big[off:].ctypes.data, (8 << 20,), device="CPU")
        self.assertEqual(lent[:4].tolist(), [1.0] * 4)
        with self.assertRaises(ValueError):
            lent.assign(lent * 2).realize()

    def test_a_schedule_is_inspected_then_run(self):
        from lazygrad.engine import compile_linear, run_linear
        from lazygrad.uop import Ops
        a, b = Tensor([1.0, 2.0]).realize(), Tensor([10.0, 20.0]).realize()
        table = (a + a).contiguous()
        out = table + b
        linear, var_vals = out.linear_with_vars()
        self.assertEqual(var_vals, {})
        self.assertEqual([call.src[0].op is Ops.SINK for call in compile_linear(linear).src], [True, True])
        # a kernel's SINK has no shape; a tensor's node shows its own
        self.assertEqual([repr(call.src[0]) for call in linear.src], ["<UOp SINK>", "<UOp SINK>"])
        self.assertEqual(repr((a + b).uop), "<UOp ADD [2]>")
        run_linear(linear)
        self.assertEqual((out.tolist(), table.tolist()), ([12.0, 24.0], [2.0, 4.0]))
        with self.assertRaises(RuntimeError):
            run_linear(linear)

    def test_a_variable_shaped_tensor_reads_back_at_its_bound_size(self):
        # numpy() and tolist() reshaped to the largest size and failed; at 0, 2 and the maximum
        data = np.arange(15, dtype=np.float32).reshape(5, 3)
        for n in [0, 2, 5]:
            part = Tensor(data)[:Variable("n", 0, 5).bind(n)]
            np.testing.assert_array_equal(part.numpy(), data[:n])
            self.assertEqual((part * 2).tolist(), (data[:n] * 2).tolist())

    def test_a_variable_in_a_shape_is_at_its_largest_in_max_shape(self):
        v = UOp.variable("v", 1, 32)
        t = Tensor.empty(2, v, 4)
        self.assertEqual((t.max_shape, t.max_numel()), ((2, 32, 4), 256))
        self.assertEqual(Tensor.empty((2, v)).max_shape, (2, 32))


class TestStateDict(unittest.TestCase):
    def test_a_cycle_is_walked_once(self):
        class Model:
            pass
        m = Model()
        m.layer = Linear(2, 3)
        m.me = m
        m.friends = [m, {"back": m}]
        self.assertEqual(sorted(get_state_dict(m)), ["layer.bias", "layer.weight"])


if __name__ == "__main__":
    unittest.main()
