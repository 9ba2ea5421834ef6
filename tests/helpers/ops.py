"""Ops for tests of failure handling and of stateful Pipelines."""

from __future__ import annotations

from typing import Any

from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.tensorop.model import UpdateOp


class BrokenUpdate(UpdateOp):
    """An UpdateOp whose update fails with a RuntimeError("the update broke") (with ``Network.start_step`` and
    on replicas it runs after the step's outputs are known)."""

    def forward(self, data: Any, state: dict[str, Any]) -> None:
        raise RuntimeError("the update broke")


class Warmup(NumpyOp):
    """A stateful Pipeline op: scales ``x`` up from 0 over the first ``ramp`` samples it makes (its state is how many
    it has made)."""

    def __init__(self, ramp: int = 60) -> None:
        super().__init__(inputs="x", outputs="x")
        self.ramp = ramp
        self.seen = 0

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.seen += 1
        return data * min(self.seen / self.ramp, 1.0)

    def state_dict(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seen = int(state["seen"])


__all__ = ["BrokenUpdate", "Warmup"]
