"""The TF step executor: retracing policy, per-context graphs, and graph-safe gradient reducers."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.backend.tf_step import STEP_FN_KEY  # noqa: E402
from fe_ray.op.tensorop import LambdaOp, ModelOp  # noqa: E402
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
