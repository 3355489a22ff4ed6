"""lazygrad.nn from Python: Linear against numpy, one SGD step against its formula, get_parameters,
and a small network trained with Adam inside Tensor.train()."""

import os
import tempfile
import unittest

import numpy as np

from lazygrad import Tensor, TinyJit
from lazygrad.nn import BatchNorm, Conv2d, Embedding, LayerNorm, Linear, RMSNorm
from lazygrad.nn.optim import SGD, Adam
from lazygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class MLP:
    def __init__(self):
        self.layers = [Linear(2, 16), Linear(16, 2)]

    def __call__(self, x):
        return self.layers[1](self.layers[0](x).relu())


class TestNN(unittest.TestCase):
    def test_linear_is_x_times_weight_transposed_plus_bias(self):
        Tensor.manual_seed(0)
        layer = Linear(3, 4)
        self.assertEqual(layer.weight.shape, (4, 3))
        self.assertEqual(layer.bias.shape, (4,))
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        want = x @ layer.weight.numpy().T + layer.bias.numpy()
        np.testing.assert_allclose(layer(Tensor(x.tolist())).numpy(), want, rtol=1e-6)
        self.assertIsNone(Linear(3, 4, bias=False).bias)

    def test_one_sgd_step_moves_each_parameter_against_its_gradient(self):
        Tensor.manual_seed(1)
        layer = Linear(3, 2)
        w, b = layer.weight.numpy(), layer.bias.numpy()
        x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], dtype=np.float32)
        opt = SGD([layer.weight, layer.bias], lr=0.1)
        opt.zero_grad()
        (layer(Tensor(x.tolist())) ** 2).sum().backward()
        y = x @ w.T + b
        with Tensor.train():
            opt.step()
        np.testing.assert_allclose(layer.weight.numpy(), w - np.float32(0.1) * (2 * y).T @ x, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.bias.numpy(), b - np.float32(0.1) * (2 * y).sum(axis=0), rtol=1e-5)
        self.assertAlmostEqual(opt.lr, 0.1, places=6)

    def test_stepping_outside_train_is_an_error(self):
        layer = Linear(2, 1)
        opt = SGD(get_parameters(layer))
        layer(Tensor([[1.0, 2.0]])).sum().backward()
        with self.assertRaisesRegex(ValueError, "TRAINING"):
            opt.step()

    def test_get_parameters_walks_attributes_lists_and_dicts(self):
        model = MLP()
        params = get_parameters(model)
        self.assertEqual([p.shape for p in params], [(16, 2), (16,), (2, 16), (2,)])
        self.assertEqual(len(get_parameters({"a": [Tensor([1.0]), (Tensor([2.0]),)]})), 2)

    def test_a_small_network_learns_xor_with_adam(self):
        Tensor.manual_seed(2)
        rng = np.random.default_rng(0)
        points = rng.uniform(-1, 1, size=(128, 2)).astype(np.float32)
        labels = (points[:, 0] * points[:, 1] > 0).astype(np.int32)
        x, y = Tensor(points.tolist()), Tensor(labels.tolist())
        model = MLP()
        opt = Adam(get_parameters(model), lr=0.05)
        losses = []
        with Tensor.train():
            for _ in range(150):
                opt.zero_grad()
                loss = model(x).sparse_categorical_crossentropy(y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        accuracy = (model(x).argmax(axis=1).numpy() == labels).mean()
        self.assertLess(losses[-1], 0.25 * losses[0])
        self.assertGreaterEqual(accuracy, 0.95)


class TestLayers(unittest.TestCase):
    def test_conv2d_against_a_direct_sum(self):
        Tensor.manual_seed(4)
        conv = Conv2d(2, 3, 3, padding=1)
        x = rand(1, 2, 5, 5, seed=7)
        w, b = conv.weight.numpy(), conv.bias.numpy()
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        want = np.zeros((1, 3, 5, 5), dtype=np.float64)
        for i in range(5):
            for j in range(5):
                want[0, :, i, j] = np.einsum("chw,ochw->o", padded[0, :, i:i + 3, j:j + 3], w) + b
        np.testing.assert_allclose(conv(Tensor(x.tolist())).numpy(), want, rtol=1e-5, atol=1e-5)
        self.assertEqual([p.shape for p in get_parameters(conv)], [(3, 2, 3, 3), (3,)])

    def test_batchnorm_uses_batch_statistics_only_in_training(self):
        bn = BatchNorm(2)
        x = rand(8, 2, 3, 3, seed=8) * 3 + 5
        t = Tensor(x.tolist())
        self.assertEqual(len(get_parameters(bn)), 5)
        np.testing.assert_allclose(bn(t).numpy(), x / np.sqrt(1 + 1e-5), rtol=1e-5)
        with Tensor.train():
            y = bn(t).numpy()
        np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), [0, 0], atol=1e-5)
        np.testing.assert_allclose(y.std(axis=(0, 2, 3)), [1, 1], rtol=1e-3)
        np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-5)


class TestNormsAndEmbeddings(unittest.TestCase):
    def test_layernorm_rmsnorm_and_embedding_against_numpy(self):
        x = rand(3, 6, seed=19)
        t = Tensor(x.tolist())
        ln = LayerNorm(6)
        self.assertEqual((ln.weight.shape, ln.bias.shape), ((6,), (6,)))
        want = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(ln(t).numpy(), want, rtol=1e-4, atol=1e-5)
        rms = RMSNorm(6)
        np.testing.assert_allclose(rms(t).numpy(), x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6),
                                   rtol=1e-5)
        Tensor.manual_seed(7)
        emb = Embedding(10, 4)
        table = emb.weight.numpy()
        np.testing.assert_array_equal(emb(Tensor([[3, 1], [0, 9]])).numpy(), table[[[3, 1], [0, 9]]])
        self.assertEqual(sorted(get_state_dict([ln, rms, emb])), ["0.bias", "0.weight", "1.weight", "2.weight"])
        with self.assertRaisesRegex(AttributeError, "LayerNorm has no gamma"):
            ln.gamma


class TestState(unittest.TestCase):
    def test_state_dict_names_follow_attributes_positions_and_keys(self):
        model = MLP()
        self.assertEqual(list(get_state_dict(model)), ["layers.0.bias", "layers.0.weight", "layers.1.bias",
                                                       "layers.1.weight"])
        names = sorted(get_state_dict({"bn": BatchNorm(4), "t": Tensor([1.0])}))
        self.assertEqual(names, ["bn.bias", "bn.num_batches_tracked", "bn.running_mean", "bn.running_var",
                                 "bn.weight", "t"])
        shared = Tensor([1.0, 2.0]).realize()
        self.assertEqual(len(get_parameters([shared, shared])), 1)

    def test_a_saved_model_loads_into_a_fresh_one(self):
        Tensor.manual_seed(6)
        trained, fresh = MLP(), MLP()
        x = Tensor(rand(4, 2, seed=9).tolist())
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mlp.safetensors")
            safe_save(get_state_dict(trained), path)
            loaded = safe_load(path)
            self.assertEqual(loaded["layers.1.weight"].shape, (2, 16))
            load_state_dict(fresh, loaded)
        np.testing.assert_array_equal(fresh(x).numpy(), trained(x).numpy())

    def test_mismatched_state_dicts_and_corrupt_files_are_errors(self):
        model = MLP()
        partial = {"layers.0.weight": Tensor.zeros(16, 2)}
        with self.assertRaisesRegex(ValueError, "missing from the state dict"):
            load_state_dict(model, partial)
        load_state_dict(model, partial, strict=False)
        self.assertEqual(model.layers[0].weight.numpy().max(), 0.0)
        with self.assertRaisesRegex(ValueError, "wrong shape"):
            load_state_dict(model, {"layers.0.weight": Tensor.zeros(2, 16)}, strict=False)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.safetensors")
            with open(path, "wb") as f:
                f.write(b"\xff" * 16)
            with self.assertRaisesRegex(RuntimeError, "bad.safetensors"):
                safe_load(path)


class TestJit(unittest.TestCase):
    def test_the_function_runs_twice_then_its_kernels_replay_on_new_inputs(self):
        calls = []

        @TinyJit
        def f(a, b):
            calls.append(1)
            return (a * b).sum(axis=1), a + 1

        for i in range(5):
            a, b = Tensor([[float(i), 1.0], [2.0, 3.0]]), Tensor([[1.0, 2.0], [3.0, float(i)]])
            s, p = f(a, b)
            self.assertEqual(s.tolist(), [i + 2.0, 6.0 + 3 * i])
            self.assertEqual(p.tolist(), [[i + 1.0, 2.0], [3.0, 4.0]])
        self.assertEqual(len(calls), 2)

    def test_errors_in_the_function_and_changed_inputs_are_raised(self):
        @TinyJit
        def bad(a):
            raise KeyError("inside")

        with self.assertRaises(KeyError):
            bad(Tensor([1.0]))

        @TinyJit
        def g(a):
            return a * 2

        g(Tensor([1.0]))
        with self.assertRaisesRegex(RuntimeError, "inputs changed"):
            g(Tensor([1.0, 2.0]))

    def test_a_jitted_train_step_trains(self):
        Tensor.manual_seed(5)
        layer = Linear(1, 1)
        opt = SGD(get_parameters(layer), lr=0.1)
        x, y = Tensor([[1.0], [2.0], [3.0]]), Tensor([[3.0], [5.0], [7.0]])

        @TinyJit
        @Tensor.train()
        def step():
            opt.zero_grad()
            loss = ((layer(x) - y) ** 2).mean()
            loss.backward()
            return loss.realize(*opt.schedule_step())

        losses = [step().item() for _ in range(200)]
        self.assertLess(losses[-1], 1e-4)
        np.testing.assert_allclose([layer.weight.item(), layer.bias.item()], [2.0, 1.0], atol=0.02)


if __name__ == "__main__":
    unittest.main()
