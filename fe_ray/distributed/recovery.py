"""What a recoverable distributed run needs, checked when ``fit`` starts and again when a replica fails.

A :class:`~fe_ray.distributed.coordinator.RayNetwork` with ``max_failures > 0`` resumes a failed run from the
newest committed checkpoint in its ``checkpoint_dir``; a RestoreWizard trace writing to that directory makes those
checkpoints and restores the newest one when the Estimator runs its loop again. Both name the directory in their
own words (a relative path, an absolute one, a ``file://`` URL), so they are compared by :func:`same_location`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.io.checkpoint import normalize_location


def same_location(first: str, second: str) -> bool:
    """Whether two checkpoint directories (paths or fsspec URLs) name the same place."""
    return normalize_location(first) == normalize_location(second)


def restore_wizards(traces: Iterable[Any], checkpoint_dir: str) -> list[Any]:
    """The RestoreWizard traces among ``traces`` that write their checkpoints to ``checkpoint_dir``."""
    return [trace for trace in traces
            if type(trace).__name__ == "RestoreWizard" and same_location(trace.directory, checkpoint_dir)]


def check_recoverable(max_failures: int, checkpoint_dir: str | None, traces: Iterable[Any]) -> None:
    """Refuse a run that asks to survive failures but has no RestoreWizard writing the checkpoints it would resume
    from: found out only after a failure, it would cost the whole run.

    Raises:
        ValueError: Naming the directory, the RestoreWizard directories present, and the fix.
    """
    if max_failures == 0 or not checkpoint_dir:
        return
    traces = list(traces)
    if restore_wizards(traces, checkpoint_dir):
        return
    present = [normalize_location(trace.directory) for trace in traces if type(trace).__name__ == "RestoreWizard"]
    found = f"the RestoreWizard traces write to {present}" if present else "there is no RestoreWizard trace"
    raise ValueError(f"max_failures={max_failures} resumes a failed run from the checkpoints in checkpoint_dir="
                     f"{normalize_location(checkpoint_dir)!r}, but {found}. Add "
                     f"RestoreWizard({checkpoint_dir!r}) to the Estimator's traces (the same directory), or build the "
                     "network with max_failures=0.")


__all__ = ["check_recoverable", "restore_wizards", "same_location"]
