"""Weights saved from FastEstimator 1.7's torch architectures load into fe_ray's, whose submodules are named
otherwise (same tensors, same order). The FastEstimator key lists were read from the FastEstimator 1.7.0 wheel's
models (fe17_torch_state_dict_keys.json)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import fe_ray as fe  # noqa: E402
from fe_ray.architecture.pytorch import AttentionUNet, ResNet9, UNet, WideResidualNetwork  # noqa: E402

FE_KEYS = json.load(open(os.path.join(os.path.dirname(__file__), "fe17_torch_state_dict_keys.json")))
MODELS: list[tuple[Any, dict[str, Any]]] = [(ResNet9, {}), (UNet, {}), (AttentionUNet, {}),
                                            (WideResidualNetwork, {"depth": 10, "widen_factor": 2})]


def fe_layout_state(model: Any, name: str) -> dict[str, Any]:
    """The model's tensors (fresh random values for floats) under FastEstimator's names, in order."""
    keys = FE_KEYS[name]
    own = model.state_dict()
    assert len(keys) == len(own) and list(own) != keys
    return {key: torch.randn(value.shape, dtype=value.dtype) if value.is_floating_point() else value + 1
            for key, value in zip(keys, own.values())}


@pytest.mark.parametrize("cls, kwargs", MODELS, ids=[cls.__name__ for cls, _ in MODELS])
def test_fastestimators_saved_weights_load(cls: Any, kwargs: dict[str, Any], tmp_path: Any) -> None:
    state = fe_layout_state(cls(**kwargs), cls.__name__)
    path = tmp_path / "fe_saved.pt"
    torch.save(state, path)
    model = fe.build(lambda: cls(**kwargs), optimizer_fn=None, weights_path=str(path))
    loaded = list(model.state_dict().values())
    assert all(torch.equal(got, expected) for got, expected in zip(loaded, state.values()))
    # fe_ray's own layout loads as before, and a dict of the wrong shapes is still refused by torch
    other = cls(**kwargs)
    other.load_state_dict(model.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(other.state_dict().values(), loaded))
    wrong = {key: value[..., :1] if value.dim() else value for key, value in state.items()}
    with pytest.raises(RuntimeError):
        cls(**kwargs).load_state_dict(wrong)
