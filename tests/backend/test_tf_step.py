"""The TF step executor: retracing policy, per-context graphs, and graph-safe gradient reducers."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.backend.tf_step import STEP_FN_KEY  # noqa: E402
from fe_ray.op.tensorop import LambdaOp, ModelOp, TensorOp  # noqa: E402
from tests.helpers.models import tf_dense  # noqa: E402


def state(epoch: int = 1) -> dict[str, Any]:
    return {"mode": "eval", "epoch": epoch, "ds_id": "", "warmup": False, "req_grad": False, "deferred": {},
            "eager": False, "grad_reducer": None}


def traced_chain() -> tuple[list[Any], list[int], Any]:
    traces: list[int] = []
    model = tf_dense("sgd")
    ops = [LambdaOp(lambda x: traces.append(1) or x, inputs="x", outputs="x"),
           ModelOp(model=model, inputs="x", outputs="pred")]
    for op in ops:
        op.build("tf")
    return ops, traces, model


def run(ops: list[Any], ctx: dict[str, Any], rows: int = 2) -> Any:
    data = {"x": np.ones((rows, 3), dtype=np.float32)}
    return get_backend("tf").run_step(ops, data, ctx, {"x"}, {"pred"})["pred"]


def test_one_trace_per_context_across_epochs_and_steps() -> None:
    ops, traces, _ = traced_chain()
    ctx = state()
    for epoch in (1, 2, 3):
        ctx["epoch"] = epoch  # a tensor inside the graph: no retrace
        out = run(ops, ctx)
    assert len(traces) == 1
    np.testing.assert_allclose(out.numpy(), [[6.0], [6.0]])
    fn = ctx[STEP_FN_KEY]
    fresh = state()
    run(ops, fresh)
    assert fresh[STEP_FN_KEY] is not fn and len(traces) == 2  # a new context traces its own graph


def test_optimizer_switch_and_freezing_force_retrace() -> None:
    ops, traces, model = traced_chain()
    ctx = state()
    run(ops, ctx)
    run(ops, ctx)
    assert len(traces) == 1
    model.current_optimizer = get_backend("tf").make_optimizer(model, "adam", False)
    run(ops, ctx)
    assert len(traces) == 2
    model.layers[0].trainable = False
    run(ops, ctx)
    assert len(traces) == 3


class WarmupProbe(TensorOp):
    """Passes its input through and records the state's warm-up flag each time the step is traced."""

    def __init__(self, seen: list[bool]) -> None:
        super().__init__(inputs="x", outputs="x")
        self.seen = seen

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.seen.append(state["warmup"])
        return data


def test_python_state_values_select_their_own_graph() -> None:
    _, _, model = traced_chain()
    seen: list[bool] = []
    ops = [WarmupProbe(seen), ModelOp(model=model, inputs="x", outputs="pred")]
    for op in ops:
        op.build("tf")
    ctx = state()
    for warmup in (False, True, False, True):
        ctx["warmup"] = warmup
        run(ops, ctx)
    assert seen == [False, True]  # each value traced once, then its graph reused
    assert len(ctx[STEP_FN_KEY]) == 2


def test_batch_size_change_shares_a_relaxed_trace() -> None:
    ops, traces, _ = traced_chain()
    ctx = state()
    for rows in (2, 3, 4, 5):
        out = run(ops, ctx, rows=rows)
    assert out.shape == (5, 1)
    assert len(ctx[STEP_FN_KEY]) == 1 and len(traces) <= 2  # the second size relaxes the shape; no more traces


def test_eager_state_runs_without_graph() -> None:
    import tensorflow as tf

    seen: list[bool] = []
    model = tf_dense("sgd")
    ops = [LambdaOp(lambda x: seen.append(tf.executing_eagerly()) or x, inputs="x", outputs="x"),
           ModelOp(model=model, inputs="x", outputs="pred")]
    for op in ops:
        op.build("tf")
    ctx = state()
    ctx["eager"] = True
    run(ops, ctx)
    assert seen == [True] and STEP_FN_KEY not in ctx


def test_graph_safe_reducer_runs_a_reducer_eagerly_on_each_steps_values() -> None:
    import tensorflow as tf

    from fe_ray.backend.tf_step import graph_safe_reducer

    eager: list[bool] = []

    def double(model: Any, gradients: list[Any]) -> list[Any]:
        eager.append(tf.executing_eagerly())
        return [g * 2 for g in gradients]

    reduce = graph_safe_reducer(double)
    shapes: list[Any] = []

    @tf.function
    def step(g: Any) -> Any:
        out = reduce(None, [g, g + 1])
        shapes.extend(o.shape for o in out)  # static shapes kept for the optimizer
        return out

    out = step(tf.constant([1.0, 2.0]))
    np.testing.assert_allclose(out[0].numpy(), [2.0, 4.0])
    np.testing.assert_allclose(out[1].numpy(), [4.0, 6.0])
    assert eager == [True] and shapes == [(2,), (2,)]


def test_graph_safe_reducer_hands_a_numpy_reducer_the_arrays_directly() -> None:
    """A reducer with ``reduce_numpy`` (fe_ray's all-reduce) gets numpy arrays from the graph and is never called
    with eager tensors: no conversion of each gradient to a tensor and back."""
    import tensorflow as tf

    from fe_ray.backend.tf_step import graph_safe_reducer

    class NumpyReducer:
        def __init__(self) -> None:
            self.seen: list[list[type]] = []

        def reduce_numpy(self, *arrays: np.ndarray) -> list[np.ndarray]:
            self.seen.append([type(a) for a in arrays])
            return [a * 3 for a in arrays]

        def __call__(self, model: Any, gradients: list[Any]) -> list[Any]:
            raise AssertionError("inside a graph, reduce_numpy is called directly")

    reducer = NumpyReducer()
    reduce = graph_safe_reducer(reducer)
    shapes: list[Any] = []

    @tf.function
    def step(g: Any) -> Any:
        out = reduce(None, [g, tf.reshape(g, (1, 2))])
        shapes.extend(o.shape for o in out)
        return out

    for value in ([1.0, 2.0], [2.0, 0.5]):
        out = step(tf.constant(value))
        np.testing.assert_allclose(out[0].numpy(), np.multiply(value, 3))
        np.testing.assert_allclose(out[1].numpy(), [np.multiply(value, 3)])
    assert reducer.seen == [[np.ndarray, np.ndarray]] * 2
    assert shapes == [(2,), (1, 2)] and step.experimental_get_tracing_count() == 1
