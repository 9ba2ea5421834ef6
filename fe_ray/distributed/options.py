"""Validation of :class:`~fe_ray.distributed.coordinator.RayNetwork`'s options (user errors, raised early)."""

from __future__ import annotations

import difflib
import numbers
import os
from collections.abc import Iterable, Mapping

#: Ray placement-group strategies a user may ask for.
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

#: The longest timeout accepted: finite (timers and the collectives' deadlines need one) and far below what
#: clocks and C timeouts overflow at (1e12 s overflowed ``time_t``).
MAX_TIMEOUT_S = 1e7

#: ``placement_timeout_s`` when not given: how long replicas wait for resources held by others.
PLACEMENT_TIMEOUT_S = 60.0
#: ``placement_timeout_s`` when not given with ``wait_for_nodes=True``: booting cloud GPU nodes and installing their
#: packages commonly takes 5-15 minutes.
NODE_WAIT_TIMEOUT_S = 1800.0

#: The keyword options of ``fe.Network(..., num_replicas=N, ...)`` beyond the ops (RayNetwork's parameters).
OPTION_NAMES = ("resources_per_replica", "max_failures", "step_timeout_s", "checkpoint_dir", "placement_timeout_s",
                "collective_timeout_s", "runtime_env", "placement_strategy", "collective_backend", "step_transport",
                "wait_for_nodes")

#: How steps may reach the replicas (see :mod:`fe_ray.distributed.step_stream` and ``step_graph``).
TRANSPORTS = ("stream", "calls", "compiled")


def check_options(num_replicas: int, max_failures: int, step_timeout_s: float, checkpoint_dir: str | None,
                  placement_timeout_s: float, collective_timeout_s: float | None, strategy: str,
                  step_transport: str = "stream", wait_for_nodes: bool = False,
                  replica_env_vars: Mapping[str, str] | None = None) -> None:
    """Check the options of ``fe.Network(..., num_replicas=N, ...)`` before anything starts.

    ``replica_env_vars`` are the variables the replicas' runtime environment adds to this process's.

    Raises:
        ValueError: Naming the bad option, its value, and what it accepts.
            Also a bad ``FE_RAY_STREAM_SPIN_US`` or ``FE_RAY_EARLY_ANSWER`` with the stream transport.
        TypeError: If ``wait_for_nodes`` is not a bool, or ``checkpoint_dir`` is neither None, a str nor a path.
    """
    if not isinstance(num_replicas, numbers.Integral) or isinstance(num_replicas, bool) or num_replicas < 1:
        raise ValueError(f"num_replicas must be a positive int, got {num_replicas!r}.")
    if not isinstance(max_failures, numbers.Integral) or isinstance(max_failures, bool) or max_failures < 0:
        raise ValueError(f"max_failures must be an int >= 0 (0 raises on the first failure), got {max_failures!r}.")
    if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, os.PathLike)):
        raise TypeError(f"checkpoint_dir must be a path or an fsspec URL string (e.g. '/nfs/run1' or "
                        f"'s3://bucket/run1'), got {type(checkpoint_dir).__name__}: {checkpoint_dir!r:.100}.")
    if max_failures > 0 and not checkpoint_dir:
        raise ValueError(f"max_failures={max_failures} needs checkpoint_dir=... so the run can resume from its latest "
                         "checkpoint after replacing failed replicas.")
    for name, value in (("step_timeout_s", step_timeout_s), ("placement_timeout_s", placement_timeout_s),
                        ("collective_timeout_s", collective_timeout_s)):
        if value is None and name == "collective_timeout_s":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT_S:
            raise ValueError(f"{name} must be a positive number of seconds up to {MAX_TIMEOUT_S:.0f} (about 115 "
                             f"days; every wait has a bound), got {value!r}.")
    if strategy not in STRATEGIES:
        raise ValueError(f"placement_strategy must be one of {list(STRATEGIES)}, got {strategy!r}.")
    if not isinstance(wait_for_nodes, bool):
        raise TypeError(f"wait_for_nodes must be True (wait for an autoscaler to add nodes) or False (fail at once "
                         f"when the cluster is too small), got {wait_for_nodes!r}.")
    if step_transport not in TRANSPORTS:
        raise ValueError(f"step_transport must be one of {list(TRANSPORTS)}, got {step_transport!r}.")
    if step_transport == "stream":
        from fe_ray.distributed.step_stream import early_answers, spin_seconds

        # The replicas read these: a bad value fails here, not in every replica's constructor.
        env = {**os.environ, **(replica_env_vars or {})}
        spin_seconds(env)
        early_answers(env)


def replica_env_vars(runtime_env: object) -> Mapping[str, str] | None:
    """The ``env_vars`` of the replicas' ``runtime_env`` (None without), after checking the two have Ray's types.

    Raises:
        TypeError: If ``runtime_env`` is not a dict (or None), or its ``env_vars`` is not a dict of strings.
    """
    if runtime_env is None:
        return None
    if not isinstance(runtime_env, Mapping):
        raise TypeError(f"runtime_env must be a dict of Ray's runtime environment fields (e.g. {{'env_vars': "
                        f"{{'NAME': 'value'}}, 'pip': [...]}}) or None, got {type(runtime_env).__name__}: "
                        f"{runtime_env!r:.100}.")
    env_vars = runtime_env.get("env_vars")
    if env_vars is not None and (not isinstance(env_vars, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in env_vars.items())):
        raise TypeError(f"runtime_env['env_vars'] must be a dict of strings ({{'NAME': 'value'}}), got "
                        f"{env_vars!r:.100}.")
    return env_vars


def placement_timeout(placement_timeout_s: float | None, wait_for_nodes: bool) -> float | None:
    """``placement_timeout_s``, or its default when None: longer when waiting for an autoscaler's nodes."""
    if placement_timeout_s is not None:
        return placement_timeout_s
    return NODE_WAIT_TIMEOUT_S if wait_for_nodes is True else PLACEMENT_TIMEOUT_S


__all__ = ["MAX_TIMEOUT_S", "NODE_WAIT_TIMEOUT_S", "PLACEMENT_TIMEOUT_S", "STRATEGIES", "TRANSPORTS", "check_options",
           "placement_timeout", "replica_env_vars"]


def check_option_names(given: Iterable[str]) -> None:
    """Raise a TypeError naming each option of ``fe.Network`` that is not one (with the closest valid name).

    Raises:
        TypeError: For an unknown option, naming it, a close valid name if there is one, and the valid options.
    """
    unknown = [name for name in given if name not in OPTION_NAMES and name != "num_replicas"]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, [*OPTION_NAMES, "num_replicas"], n=1)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise TypeError(f"fe.Network got unknown option(s) {', '.join(hints)}; its options are num_replicas and "
                        f"{', '.join(OPTION_NAMES)}.")
