"""A replica's state: exact snapshots of its models and ops, checkpoint writes, and its random generators.

:class:`ReplicaState` is a base class of :class:`~fe_ray.distributed.replica.Replica` (kept apart so the actor's
step path and its state transfers read on their own); every method runs on the replica through Ray.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fe_ray.distributed.replica_calls import failure_of, guarded, writable


class ReplicaState:
    """The state methods of a replica: the driver's model syncs, pushes, checkpoints and random-state transfers.

    The replica provides ``framework``, ``network`` (its in-process Network), ``_saver`` (the checkpoint writer or
    None) and ``_stores`` (checkpoint stores by root and ``keep``), plus what :func:`guarded` needs.
    """

    framework: str
    network: Any
    _saver: Any
    _stores: dict[tuple[str, int | None], Any]

    # ------------------------------------------------------------------ state
    @guarded
    def get_state(self, models: bool = True) -> dict[str, Any]:
        """Exact numpy snapshot of every model (weights + optimizer) and of the network's op states."""
        from fe_ray.backend import get_backend

        backend = get_backend(self.framework)
        state: dict[str, Any] = {"network": self.network.state_dict()}
        if models:
            # Views: Ray serialises an actor method's result as it returns, before this replica runs anything else.
            state["models"] = {m.model_name: backend.get_state(m, copy=False) for m in self.network.models}
        return state

    @guarded
    def set_state(self, state: Mapping[str, Any]) -> bool:
        """Restore :meth:`get_state` (either part may be missing)."""
        from fe_ray.backend import get_backend

        backend = get_backend(self.framework)
        state = writable(state)
        for model in self.network.models:
            snapshot = state.get("models", {}).get(model.model_name)
            if snapshot is not None:
                backend.set_state(model, snapshot, copy=False)  # writable() made the arrays ours
        if state.get("network") is not None:
            self.network.load_state_dict(state["network"])
        return True

    @guarded
    def set_buffers(self, buffers: Mapping[str, Any]) -> bool:
        """Load ``{model_name: backend.get_buffers(model)}`` (running statistics) into this replica's models."""
        from fe_ray.backend import get_backend

        backend = get_backend(self.framework)
        for model in self.network.models:
            if model.model_name in buffers:
                backend.set_buffers(model, buffers[model.model_name])
        return True

    # ------------------------------------------------------------------ checkpoints
    @guarded
    def save_checkpoint(self, root: str, keep: int | None, payload: Mapping[str, Any],
                        info: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Commit this replica's models with ``payload`` (a System snapshot without models) as the next checkpoint
        under ``root``, written by a background thread (see :mod:`fe_ray.distributed.checkpointing`).

        Waits for the previous write, then copies the model states into reused buffers: only that copy holds up
        training.

        Returns:
            ``{"committed": URL or None}`` (the newest checkpoint committed so far), or ``{"error": RemoteFailure}``
            when the previous write failed or the snapshot does not fit in memory (no snapshot is taken then). Such
            errors come back as data, not as a failure of this replica, which is healthy.
        """
        from fe_ray.io.background_save import BackgroundSaver
        from fe_ray.io.checkpoint import CheckpointStore
        from fe_ray.summary.state_parts import snapshot_models

        if self._saver is None:
            self._saver = BackgroundSaver()
        key = (root, keep)
        if key not in self._stores:
            self._stores[key] = CheckpointStore(root, keep=keep)
        models = self.network.models
        if payload.get("network") is not None:
            # The driver's op states are those of its last sync; this replica's ops hold the live ones (merge_grad
            # accumulators, the TensorOp meta ops' generators), as its models hold the live weights. Copied: the
            # write runs while training changes them.
            ops = copy.deepcopy(self.network.state_dict()["ops"])  # after finishing a step answered early
            payload = {**payload, "network": {**payload["network"], "ops": ops}}
        try:
            self._saver.save(self._stores[key],
                             lambda buffers: {**payload, "models": snapshot_models(models, buffers=buffers)}, info)
        except Exception as exc:  # noqa: BLE001 - the write's error, for the driver to raise
            return {"error": failure_of(self, exc)}
        return {"committed": self._saver.last_committed}

    def finish_checkpoint(self) -> dict[str, Any]:
        """Wait for the checkpoint write in flight, then free the writer's thread and snapshot buffers (a copy of
        the model states; the next save starts afresh). Returns ``{"committed": URL or None}`` or
        ``{"error": ...}``.

        Not handed to the step thread like the guarded methods: it must answer while that thread is stuck (in an
        all-reduce whose peer died, say), since the driver lets the write finish before it stops the group.
        """
        saver, self._saver = self._saver, None
        if saver is None:
            return {"committed": None}
        try:
            return {"committed": saver.wait()}
        except BaseException as exc:  # noqa: BLE001 - the write's error, for the driver to raise
            return {"error": failure_of(self, exc)}
        finally:
            saver.close()

    # ------------------------------------------------------------------ random state
    @guarded
    def seed_rng(self, seed: int) -> bool:
        """Seed this process's generators and its models' Keras seed generators (the network's random ops draw
        from them; a Keras model unpickled here got seeds from this process's unseeded Python generator)."""
        from fe_ray.backend.determinism import seed_generators

        seed_generators(seed, self._models())
        return True

    @guarded
    def get_rng(self) -> dict[str, Any]:
        """This process's generator states (see :func:`fe_ray.backend.determinism.get_rng_state`)."""
        from fe_ray.backend.determinism import get_rng_state

        return get_rng_state(self._models())

    @guarded
    def set_rng(self, state: Mapping[str, Any]) -> bool:
        """Restore :meth:`get_rng`."""
        from fe_ray.backend.determinism import set_rng_state

        set_rng_state(state, self._models())
        return True

    def _models(self) -> list[Any]:
        return list(self.network.models) if self.network is not None else []


__all__ = ["ReplicaState"]
