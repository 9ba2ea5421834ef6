"""Ops for tests of failure handling."""

from __future__ import annotations

from typing import Any

from fe_ray.op.tensorop.model import UpdateOp


class BrokenUpdate(UpdateOp):
    """An UpdateOp whose update fails with a RuntimeError("the update broke") (with ``Network.start_step`` and
    on replicas it runs after the step's outputs are known)."""

    def forward(self, data: Any, state: dict[str, Any]) -> None:
        raise RuntimeError("the update broke")


__all__ = ["BrokenUpdate"]
