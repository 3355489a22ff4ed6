"""Tensors on several devices from Python: tinygrad's shard, shard_, to and to_ with a tuple."""
import unittest

import numpy as np
from lazygrad import Tensor

DEVICES = ("CPU", "CPU:1", "CPU:2")


class TestMulti(unittest.TestCase):
    def test_shard_splits_and_reads_back_whole(self):
        a = np.arange(18, dtype=np.float32).reshape(6, 3)
        s = Tensor(a).shard(DEVICES, axis=0)
        self.assertEqual(s.device, DEVICES)
        np.testing.assert_array_equal(s.numpy(), a)
        np.testing.assert_allclose((s * 2).sum(0).numpy(), (a * 2).sum(0))
        self.assertEqual(s.realize().uop.axis, 0)

    def test_to_a_tuple_replicates_and_to_moves_in_place(self):
        a = np.arange(6, dtype=np.float32)
        r = Tensor(a).to(DEVICES)
        self.assertEqual(r.device, DEVICES)
        self.assertIsNone(r.realize().uop.axis)
        t = Tensor(a)
        t.to_(list(DEVICES[:2]))
        self.assertEqual(t.device, DEVICES[:2])
        np.testing.assert_array_equal(t.numpy(), a)
        u = Tensor(a)
        u.shard_(DEVICES, axis=0)
        self.assertEqual((u.device, u.uop.axis), (DEVICES, 0))
        np.testing.assert_array_equal(u.numpy(), a)
        with self.assertRaises(ValueError):
            u.shard(DEVICES, axis=0)

    def test_a_shard_that_cannot_split_evenly_is_an_error(self):
        with self.assertRaises(ValueError):
            Tensor.ones(4, 3).shard(DEVICES, axis=0)


if __name__ == "__main__":
    unittest.main()
