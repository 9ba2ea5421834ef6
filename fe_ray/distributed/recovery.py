"""What a recoverable distributed run needs, checked when ``fit`` starts and again when a replica fails.

A :class:`~fe_ray.distributed.coordinator.RayNetwork` with ``max_failures > 0`` resumes a failed run from the
newest committed checkpoint in its ``checkpoint_dir``; a RestoreWizard trace writing to that directory makes those
checkpoints and restores the newest one when the Estimator runs its loop again. Both name the directory in their
own words (a relative path, an absolute one, a ``file://`` URL), so they are compared by :func:`same_location`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from fe_ray.distributed.errors import is_replica_failure
from fe_ray.io.checkpoint import normalize_location

logger = logging.getLogger(__name__)


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


def may_recover(error: BaseException, max_failures: int, recoveries: int, checkpoint_dir: str | None,
                traces: Iterable[Any] | None) -> bool:
    """Whether a run that failed with ``error`` may resume from its checkpoints (the caller then needs a committed
    one): only a failure of the replicas themselves (a dead or hung replica, or a collective broken by one; user-op
    errors are never retried), with ``max_failures > 0``, fewer ``recoveries`` so far and, unless ``traces`` is
    None, a RestoreWizard among them writing to ``checkpoint_dir``. Says why in the log where a recovery was asked
    for but cannot be made."""
    if max_failures == 0 or not checkpoint_dir or not is_replica_failure(error):
        return False
    if recoveries >= max_failures:
        logger.error("fe_ray: replica failure after %d recoveries (max_failures=%d); giving up.", recoveries,
                     max_failures)
        return False
    if traces is not None and not restore_wizards(traces, checkpoint_dir):
        logger.error("fe_ray: cannot recover: no RestoreWizard(directory=%r) trace writes the checkpoints that "
                     "recovery resumes from.", checkpoint_dir)
        return False
    return True


__all__ = ["check_recoverable", "may_recover", "restore_wizards", "same_location"]
