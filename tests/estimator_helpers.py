"""Shared pieces for estimator/trace/summary tests: a tiny in-memory pipeline and tiny models.

``ToyPipeline`` implements the Pipeline contract the Estimator relies on (``__call__`` context yielding numpy batch
dicts, ``get_modes``, ``get_ds_ids``, ``data``, ``state_dict`` / ``load_state_dict`` with a mid-epoch position),
so these tests do not depend on the real Pipeline's internals.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.trace import Trace  # noqa: E402 - after the TF log level is set


class ToyPipeline:
    """Batches of ``{"x", "y"}`` from in-memory arrays, reshuffled per train epoch by a seeded, checkpointed RNG."""

    def __init__(self, train: dict[str, np.ndarray], eval: dict[str, np.ndarray] | None = None,
                 batch_size: int = 8, seed: int = 0, test: dict[str, np.ndarray] | None = None) -> None:
        self.data = {"train": {"": train}}
        if eval is not None:
            self.data["eval"] = {"": eval}
        if test is not None:
            self.data["test"] = {"": test}
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self.position: dict[str, Any] = {}  # mode -> {"epoch", "order", "consumed"} of an unfinished epoch

    def get_modes(self, epoch: int | None = None) -> set[str]:
        return set(self.data)

    def get_ds_ids(self, epoch: int, mode: str) -> list[str]:
        return list(self.data.get(mode, {}))  # none for a mode without data, as fe.Pipeline

    @contextlib.contextmanager
    def __call__(self, mode: str, epoch: int, ds_id: str = "", shuffle: bool | None = None,
                 steps_per_epoch: int | None = None) -> Iterator[Any]:
        arrays = self.data[mode][ds_id]
        n = len(next(iter(arrays.values())))
        pos = self.position.get(mode)
        if shuffle is False:
            order, consumed, track = np.arange(n), 0, False
        elif pos is not None and pos["epoch"] == epoch:
            order, consumed, track = np.asarray(pos["order"]), pos["consumed"], True
        else:
            order = self.rng.permutation(n) if (shuffle or mode == "train") else np.arange(n)
            consumed, track = 0, True
        total = steps_per_epoch or -(-n // self.batch_size)

        def batches() -> Iterator[dict[str, np.ndarray]]:
            nonlocal consumed
            while consumed < total:
                start = (consumed * self.batch_size) % n
                idx = np.take(order, range(start, min(start + self.batch_size, n)))
                consumed += 1
                if track:
                    self.position[mode] = {"epoch": epoch, "order": order.tolist(), "consumed": consumed}
                yield {key: value[idx] for key, value in arrays.items()}

        yield batches()
        if track and consumed >= total:
            self.position.pop(mode, None)

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "position": {k: dict(v) for k, v in self.position.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.position = {k: dict(v) for k, v in state["position"].items()}


def digits_arrays(framework: str = "torch", n_train: int = 256, n_eval: int = 64) -> tuple[dict, dict]:
    """sklearn digits as float32 8x8 images (channel axis per framework) with int labels."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8)
    x = x[:, None] if framework == "torch" else x[..., None]
    y = y.astype(np.int64)
    return ({"x": x[:n_train], "y": y[:n_train]}, {"x": x[n_train:n_train + n_eval], "y": y[n_train:n_train + n_eval]})


def torch_mlp(name: str = "mlp", seed: int = 0, lr: float = 0.05) -> Any:
    import torch

    import fe_ray as fe

    torch.manual_seed(seed)

    def make() -> Any:
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(),
                                   torch.nn.Linear(16, 10), torch.nn.Softmax(dim=-1))

    return fe.build(make, optimizer_fn=lambda p: torch.optim.Adam(p, lr=lr), model_name=name)


def tf_mlp(name: str = "mlp", seed: int = 0, lr: float = 0.05, dropout: float = 0.0) -> Any:
    """The Keras twin of :func:`torch_mlp`; ``dropout`` > 0 adds a Dropout layer on the inputs (a random op whose
    masks come from the layer's own Keras seed generator)."""
    import keras

    import fe_ray as fe

    keras.utils.set_random_seed(seed)

    def make() -> Any:
        random_ops = [keras.layers.Dropout(dropout)] if dropout else []
        return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), *random_ops,
                                 keras.layers.Dense(16, "relu"), keras.layers.Dense(10, "softmax")])

    return fe.build(make, optimizer_fn=lambda: keras.optimizers.Adam(lr), model_name=name)


def tf_global_noise(x: Any) -> Any:
    """A random op for a TensorOp: adds noise drawn from TensorFlow's global tf.random.Generator."""
    import tensorflow as tf

    return x + tf.random.get_global_generator().normal(tf.shape(x), stddev=0.5)


def classifier_network(model: Any) -> Any:
    import fe_ray as fe
    from fe_ray.op.tensorop.loss import CrossEntropy
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp

    return fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                           CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                           UpdateOp(model=model, loss_name="ce")])


def model_weights(model: Any) -> list[np.ndarray]:
    from fe_ray.backend import get_backend

    state = get_backend(model).get_state(model)["model"]
    values = state.values() if isinstance(state, dict) else state
    return [np.array(v) for v in values]



class Feed(Trace):
    """A trace that writes a scripted value per evaluation epoch under 'score' (epoch N writes ``values[N - 1]``)."""

    def __init__(self, values: list[float]) -> None:
        super().__init__(outputs="score", mode="eval")
        self.values = values

    def on_epoch_end(self, data: Any) -> None:
        data.write_with_log("score", self.values[self.system.epoch_idx - 1])


class AtTrainStep(Trace):
    """A training trace that calls :meth:`act` with the batch just before global step ``step`` (None: never)."""

    def __init__(self, step: int | None = None) -> None:
        super().__init__(mode="train")
        self.step = step

    def on_batch_begin(self, data: Any) -> None:
        if self.system.global_step == self.step:
            self.act(data)

    def act(self, data: Any) -> None:
        raise NotImplementedError
