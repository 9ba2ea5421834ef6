"""RayNetwork: the driver side of data-parallel training; a drop-in Network for :class:`fe_ray.Estimator`.

RayNetwork *is* a :class:`~fe_ray.network.BaseNetwork` (so key inference, scheduling, the user's slicers, pops,
``transform`` and ``state_dict`` behave exactly as in-process) whose per-minibatch execution runs on N replicas:

1. ``with network(mode, epoch, ...)`` configures every replica for the same context (and pushes learning rates
   that traces changed on the driver's models).
2. ``run_step(batch)`` applies the user's slicers on the driver, exactly like the in-process Network; each
   (mini)batch is then cut along the batch axis into one contiguous slice per replica (a ``ChunkSlicer`` with
   ``n_chunks=num_replicas``), the slices travel with the call (or through the object store when large), and the
   replicas run them in parallel while all-reducing gradients weighted by slice size, so each update equals the
   in-process one.
3. The replicas' outputs are merged (:mod:`fe_ray.distributed.batching`): batch arrays concatenated in input
   order, scalars by a NaN-aware mean weighted by slice size, a non-finite replica logged by rank. Each replica's
   value of such keys stays available in :attr:`RayNetwork.replica_outputs` (check it, or the next step's loss: a
   NaN loss on one replica also makes the all-reduced gradients, and so every replica's weights, NaN).
4. The pops run on the driver on the merged batch.

The driver's model objects are kept as the reference copy: :meth:`RayNetwork.sync_models_to_driver` pulls rank 0's
exact state into them (the Estimator calls it before saving, and RayNetwork after every epoch of training), and
:meth:`RayNetwork.load_models_from_driver` pushes them to every replica (after a restore, or after editing them).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.distributed import cluster
from fe_ray.distributed.batching import batch_size_of, merge_outputs, slice_nbytes, split_for_replicas, unchanged_since
from fe_ray.distributed.checkpointing import ReplicaCheckpoints
from fe_ray.distributed.errors import is_replica_failure  # re-exported
from fe_ray.distributed.lifecycle import ReplicaLifecycle
from fe_ray.distributed.lr_mirror import LrMirror
from fe_ray.distributed.options import check_options, placement_timeout, replica_env_vars
from fe_ray.distributed.replica_calls import writable
from fe_ray.distributed.serialization import check_picklable
from fe_ray.distributed.state_transfer import pull_rank0, push_to_replicas, share_buffers
from fe_ray.distributed.supervisor import GroupHolder
from fe_ray.io.checkpoint import normalize_location
from fe_ray.network import BaseNetwork, OpsArg, detect_framework

logger = logging.getLogger(__name__)

# Slices up to this size are sent as call arguments; larger ones go through the object store (see _put_slices).
# Ray inlines call arguments up to its max_direct_call_object_size (100 KiB by default) and puts bigger ones into
# the object store itself; 1 KiB is left for the pickled dict around the arrays.
INLINE_SLICE_BYTES = 100 * 1024 - 1024


class RayNetwork(ReplicaLifecycle, BaseNetwork):
    """A Network whose steps run data-parallel on ``num_replicas`` Ray actors. Create it with ``fe.Network``.

    Args:
        ops: TensorOps (or Schedulers of them), as for the in-process Network.
        pops: NumpyOps run on the driver on the merged batch.
        slicers: Slicers applied on the driver before the data-parallel split (in-process semantics).
        num_replicas: Number of replicas (>= 1).
        framework: "torch" or "tf"; detected from the models when omitted.
        resources_per_replica: Ray resources of one replica, e.g. ``{"CPU": 2}`` or ``{"GPU": 1, "CPU": 4}``.
            Default: ``{"GPU": 1}`` when the cluster has GPUs, else ``{"CPU": 1}``.
        max_failures: How many replica failures (death or hang) the Estimator may recover from by restarting the
            replicas and restoring the latest checkpoint in ``checkpoint_dir``; 0 raises on the first failure.
        step_timeout_s: Longest a step may take before a ReplicaTimeoutError (configuring a context and state
            transfers get at least 120 s, since the first ones include imports and graph building).
        checkpoint_dir: Where recoverable runs keep their checkpoints (needed when ``max_failures > 0``).
        placement_timeout_s: How long to wait for resources before raising PlacementError; None (default): 60 s, or
            30 minutes with ``wait_for_nodes`` (cloud GPU nodes take minutes to boot).
        collective_timeout_s: Timeout of the replicas' collective (rendezvous, each all-reduce); defaults to
            twice ``step_timeout_s``, so that a hung replica is reported by the step timeout, naming every rank
            that did not answer, rather than by its peers' all-reduce as a timed-out receive.
        runtime_env: Extra Ray runtime environment for the replica actors. fe_ray adds the CPU replicas' thread
            counts and glibc malloc settings that keep freed memory for the next step
            (:func:`fe_ray.distributed.cluster.replica_env`); values set here win.
        placement_strategy: One of "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD".
        collective_backend: torch only: "gloo" or "nccl". None (default) uses NCCL when every replica has a whole
            GPU of its own, else gloo (NCCL cannot put two ranks on one GPU, e.g. ``{"GPU": 0.5}``).
        step_transport: "stream" (default): one TCP stream per replica carries the steps, Ray serves everything
            else (:mod:`fe_ray.distributed.step_stream`; falls back to "calls" when the driver cannot reach the
            replicas); "calls": one Ray actor call per replica and step; "compiled": a Ray Compiled Graph,
            busy-waiting a core per replica (:mod:`fe_ray.distributed.step_graph`).
        wait_for_nodes: On an autoscaling cluster, wait (up to ``placement_timeout_s``) for the autoscaler to add
            the nodes the replicas need, at the start and when failed replicas are replaced. By default a request
            larger than the cluster's current total resources fails at once with a PlacementError. GPU replicas on
            a cluster with no GPU node up yet need ``resources_per_replica={"GPU": 1}``: the default bundle asks for
            GPUs only when the cluster has some.

    Attributes:
        replica_outputs: For each output key reduced by a weighted mean in the last step, the value of every
            replica that held samples: ``{key: {rank: value}}``.
        failures: How many replica failures this network has seen.
        recoveries: How many of them :meth:`recover` let the run resume from.
    """

    def __init__(self, ops: OpsArg, pops: OpsArg = None, slicers: Any = None, num_replicas: int = 2,
                 framework: str | None = None, resources_per_replica: Mapping[str, float] | None = None,
                 max_failures: int = 0, step_timeout_s: float = 300.0, checkpoint_dir: str | None = None,
                 placement_timeout_s: float | None = None, collective_timeout_s: float | None = None,
                 runtime_env: Mapping[str, Any] | None = None, placement_strategy: str = "PACK",
                 collective_backend: str | None = None, step_transport: str = "stream",
                 wait_for_nodes: bool = False) -> None:
        framework = framework or detect_framework(ops)
        if framework not in ("torch", "tf"):
            raise ValueError(f"framework must be 'torch' or 'tf', got {framework!r}.")
        placement_timeout_s = placement_timeout(placement_timeout_s, wait_for_nodes)
        check_options(num_replicas, max_failures, step_timeout_s, checkpoint_dir, placement_timeout_s,
                       collective_timeout_s, placement_strategy, step_transport, wait_for_nodes,
                       replica_env_vars(runtime_env))
        device: Any = None
        if framework == "torch":
            import torch

            device = torch.device("cpu")  # the driver only holds the reference copy; replicas own the devices
        super().__init__(framework, device, ops, pops, slicers)
        self.num_replicas = int(num_replicas)
        self.resources_per_replica = (cluster.check_bundle(resources_per_replica)
                                      if resources_per_replica is not None else None)
        self.max_failures = int(max_failures)
        self.step_timeout_s = float(step_timeout_s)
        # Setup-like calls (configure, state transfers) can be slow the first time (imports, large states): they
        # get at least two minutes even when steps are expected to be fast.
        self._control_timeout_s = max(self.step_timeout_s, 120.0)
        self.checkpoint_dir = normalize_location(checkpoint_dir) if checkpoint_dir else None
        self.placement_timeout_s = float(placement_timeout_s)
        self.wait_for_nodes = wait_for_nodes
        self.collective_timeout_s = float(collective_timeout_s or 2 * step_timeout_s)
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self.placement_strategy = placement_strategy
        if collective_backend not in (None, "gloo", "nccl"):
            raise ValueError(f"collective_backend must be None (automatic), 'gloo' or 'nccl', got "
                             f"{collective_backend!r}.")
        self.collective_backend = collective_backend
        self.step_transport = step_transport
        self.failures = 0
        self.recoveries = 0
        self.replica_outputs: dict[str, dict[int, Any]] = {}
        self._ops_list = list(self.ops)
        check_picklable(self._ops_list, self.models)  # a TypeError naming op and attribute, before any actor starts
        self._holder = GroupHolder()
        # Runs when the network is garbage collected and at interpreter exit: no orphaned actors either way.
        self._finalizer = weakref.finalize(self, self._holder.stop)
        self._lrs = LrMirror()
        self._prefetched: tuple[dict[str, Any], list[Any], list[int], int] | None = None
        self._lookahead: Callable[[], Mapping[str, Any] | None] | None = None
        self._checkpoints = ReplicaCheckpoints()
        # A checkpoint write may take long on slow storage: waiting for one gets at least ten minutes.
        self._checkpoint_timeout_s = max(self.step_timeout_s, 600.0)
        self._pending_exit: list[Any] = []
        self._pending_rng: list[Any] | None = None  # replica generator states to apply when replicas start
        self._weights_at_sync: list[Any] | None = None  # the driver's weights when the replicas last had the same
        self._trainable_at_start: list[tuple[int, ...]] | None = None  # which weights trained when replicas started

    # ------------------------------------------------------------------ background checkpoints
    def save_checkpoint_async(self, root: str, payload: Mapping[str, Any], keep: int | None = 2,
                              info: Mapping[str, Any] | None = None) -> None:
        """Commit ``payload`` plus replica rank 0's model states as the next checkpoint under ``root``, written in
        the background by rank 0 (see :mod:`fe_ray.distributed.checkpointing`); returns once rank 0 has copied its
        state. Needs replicas (started here if they are not running yet).

        Args:
            root: The checkpoint directory (path or fsspec URL), reachable from rank 0's node.
            payload: ``System.capture_state(models=False)``: everything but the models.
            keep: How many committed checkpoints to keep.
            info: Extra manifest entries.

        Raises:
            ValueError: If ``payload`` holds model states (rank 0 adds its own, the live ones).
            Exception: The error of the previous background write, if it failed.
        """
        if "models" in payload:
            raise ValueError("save_checkpoint_async takes a snapshot without model states "
                             "(System.capture_state(models=False)): replica rank 0 adds its own.")
        with self._replicas(keep_if_alive=True) as group:
            self._checkpoints.save(group, root, payload, keep, info, self._checkpoint_timeout_s)

    def flush_checkpoints(self) -> str | None:
        """Wait for the background checkpoint write in flight; returns the URL of the newest committed checkpoint
        (None if none).

        Raises:
            CheckpointWriterError: Rank 0 died before committing it.
            Exception: The write's own error.
        """
        if not self.started:  # stopped: _stop_replicas finished the write in flight first
            return self._checkpoints.last_committed
        with self._replicas(keep_if_alive=True) as group:
            return self._checkpoints.finish(group, self._checkpoint_timeout_s)

    def replica_info(self) -> list[dict[str, Any]]:
        """Rank, pid, node IP, device (torch: also intra-op CPU threads) of every replica, starting them if needed."""
        with self._replicas() as group:
            group.infos = group.call("info", timeout_s=self._control_timeout_s)
        return [dict(info) for info in group.infos]

    # ------------------------------------------------------------------ contexts
    def _enter_context(self) -> None:
        group = self._holder.group
        if group is not None and not group.of_this_session():
            # The user called ray.shutdown() (and perhaps ray.init()) since: the replicas went with that connection.
            logger.warning("fe_ray: the replicas' Ray connection has ended (ray.shutdown() since they started); "
                           "starting new replicas from the driver's models.")
            self._stop_replicas()
        elif self.started and self._layout_changed():
            # A layer frozen (or unfrozen) on the driver between runs: the replicas' copies of the models cannot be
            # told, weights and optimizer states are all a transfer carries, so they start again from the driver's.
            logger.warning("fe_ray: which weights of the models train changed on the driver since the replicas "
                           "started (a layer frozen or unfrozen); restarting the replicas from the driver's models.")
            self._stop_replicas()
        self._group()  # started before the rates are compared: fresh replicas get the driver's rates with its models
        state = self.ctx_state
        desired = set(self.ctx_outputs)
        args = (state["mode"], state["epoch"], state["ds_id"], desired, state["warmup"], state["eager"],
                self._lrs.changes(self.models))
        try:
            with self._replicas() as group:
                group.wait(self._pending_exit, self._control_timeout_s, "leaving the previous context")
                self._pending_exit = []
                if self._weights_at_sync != self._weights_fingerprint():
                    # Written on the driver since the replicas last had them: load_model or set_weights after fit,
                    # before test(), transform() or another fit().
                    logger.info("fe_ray: the driver's model weights changed since the replicas last had them; "
                                "sending them to the replicas.")
                    self._push_models(group, op_states=None)
                group.call("configure", args=args, timeout_s=self._control_timeout_s, what="configuring")
        finally:
            self._pending_exit = []

    def _exit_context(self) -> None:
        self._prefetched = None
        if self.started:
            mode = self.ctx_state.get("mode")
            group = self._holder.group
            assert group is not None
            # Not awaited here (the next configure waits for it), so leaving a context costs no round trip.
            self._pending_exit = group.submit("exit_context")
            if mode == "train" and not self.ctx_state.get("warmup"):
                # Keep the driver's models current at epoch ends (traces such as BestModelSaver read them).
                self._lrs.keep_unsent(self.models, self.sync_models_to_driver)
                if self.num_replicas > 1:
                    with self._replicas() as group:
                        share_buffers(group, self.models, self.target_type, self._control_timeout_s)

    # ------------------------------------------------------------------ steps
    def prefetch(self, batch: Mapping[str, Any]) -> None:
        """Split ``batch`` and put its slices into the object store now, ahead of ``run_step(batch)``, which reuses
        them. Only without active slicers (with slicers, the minibatches are made inside run_step)."""
        group = self._holder.group  # inside a context: its connection was checked on entering it
        if self.ctx_slicers or group is None or not group.alive or not self.ctx_state:
            return
        refs, n_local, n_total = self._put_slices(batch)
        self._prefetched = (dict(batch), refs, n_local, n_total)

    def set_lookahead(self, peek: Callable[[], Mapping[str, Any] | None] | None, may_change: bool = False) -> None:
        """Offer the batch the *following* step will run: ``peek()`` returns it (None after the last batch). The next
        ``run_step`` calls it once its step was sent, so making that batch and putting its slices into the object
        store overlap the replicas' compute (the Estimator and :meth:`transform` use this). ``may_change``: the
        batch may still be edited before its step (a trace's on_batch_begin), so only making it overlaps."""
        self._lookahead = peek if peek is None or not may_change else (lambda: (peek(), None)[1])

    def _put_slices(self, batch: Mapping[str, Any]) -> tuple[list[Any], list[int], int]:
        import ray

        slices, n_local, n_total = split_for_replicas(batch, self.ctx_gpu_inputs, self.num_replicas)
        if self._group().sends_values:
            return slices, n_local, n_total  # written straight into the replicas' streams or graph channels
        # Small slices travel inside the task message itself (passed by value, Ray inlines them): a ray.put plus each
        # replica's fetch from the object store cost more than that copy. Large ones are put (and can be prefetched).
        sent = [piece if slice_nbytes(piece) <= INLINE_SLICE_BYTES else ray.put(piece) for piece in slices]
        return sent, n_local, n_total

    def _run_step(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Run one (mini)batch on the replicas and merge their outputs (BaseNetwork.run_step does the rest)."""
        if self._prefetched is not None and unchanged_since(batch, self._prefetched[0]):
            refs, n_local, n_total = self._prefetched[1:]
        else:
            refs, n_local, n_total = self._put_slices(batch)
        self._prefetched = None
        lrs = self._lrs.changes(self.models, read=False)
        per_rank = [(refs[rank], n_local[rank], n_total, lrs) for rank in range(self.num_replicas)]
        peek, self._lookahead = self._lookahead, None
        # While the replicas compute this batch, the following one is made and its slices are put.
        overlap = None if peek is None else lambda: self._prefetch_following(peek)
        with self._replicas() as group:
            results = group.run_steps(per_rank, self.step_timeout_s, overlap=overlap)
        outputs, self.replica_outputs = merge_outputs(results, n_local)
        # The framework's CPU tensors, as in-process, so traces written for one (argmax(dim=1)) run on the other.
        return get_backend(self.target_type).to_tensor(outputs)

    def _prefetch_following(self, peek: Callable[[], Mapping[str, Any] | None]) -> None:
        following = peek()
        if following is not None:
            self.prefetch(following)

    def transform(self, data: Mapping[str, Any] | Iterable[Mapping[str, Any]], mode: str, epoch: int = 1,
                  ds_id: str = "") -> dict[str, Any] | list[dict[str, Any]]:
        """As :meth:`BaseNetwork.transform`; for a list of batches, each batch's slices are put ahead."""
        if isinstance(data, Mapping) or (hasattr(data, "get_results") and callable(data)):
            return super().transform(data, mode, epoch=epoch, ds_id=ds_id)
        batches = [self._backend.to_tensor(dict(batch)) for batch in data]  # as run_step sees them: no re-put
        results: list[dict[str, Any]] = []
        with self(mode=mode, epoch=epoch, ds_id=ds_id, warmup=False, eager=False):
            for pos, batch in enumerate(batches):
                self.set_lookahead((lambda following=batches[pos + 1]: following) if pos + 1 < len(batches) else None)
                results.append(self.run_step(batch))
        return results

    # ------------------------------------------------------------------ state
    def sync_models_to_driver(self) -> None:
        """Copy rank 0's exact model / optimizer / op state into the driver's objects (no-op if not started)."""
        if not self.started:
            return
        with self._replicas() as group:
            self._load_op_states(pull_rank0(group, self.models, self.target_type, self._control_timeout_s))
        self._lrs.assume_synced(self.models)
        self._weights_at_sync = self._weights_fingerprint()

    def load_models_from_driver(self) -> None:
        """Push the driver's models, optimizers and op states to every replica (no-op if not started).

        Weights written on the driver outside a context (``load_model`` after ``fit``) need no call: entering the
        next context sends them, with the optimizers, when they differ from those the replicas were last given."""
        if not self.started:
            return
        with self._replicas() as group:
            self._push_models(group, self._op_states())

    def _push_models(self, group: Any, op_states: Mapping[str, Any] | None) -> None:
        push_to_replicas(group, self.models, self.target_type, op_states, self._control_timeout_s)
        self._lrs.assume_synced(self.models)
        self._weights_at_sync = self._weights_fingerprint()

    def _trainable_layout(self) -> list[tuple[int, ...]]:
        """Which of the driver's model weights train (their identities, per model): freezing a layer changes it."""
        return [tuple(map(id, self._backend.trainable_variables(model))) for model in self.models]

    def _layout_changed(self) -> bool:
        """Whether :meth:`_trainable_layout` differs from the replicas' start. A model without weights then (a Keras
        model not built on the driver, which the first sync from the replicas builds) is not a change."""
        start = self._trainable_at_start or []
        return any(before and before != now for before, now in zip(start, self._trainable_layout()))

    def _weights_fingerprint(self) -> list[Any]:
        """The driver's models' :meth:`weights_fingerprint`s, to tell whether they were written since a transfer."""
        return [self._backend.weights_fingerprint(model) for model in self.models]

    def state_dict(self) -> dict[str, Any]:
        """Op / slicer / pop states; the ops' from rank 0 outside a context, inside one the last sync's copies."""
        if self.started and not self.ctx_lock.locked():
            with self._replicas() as group:
                group.settle_steps(self._control_timeout_s)  # see ReplicaGroup.settle_steps
                state = group.call_one(0, "get_state", args=(False,), timeout_s=self._control_timeout_s,
                                       what="sending its op states")
            self._load_op_states(writable(state["network"]))
        return BaseNetwork.state_dict(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore op / slicer / pop states on the driver and on every replica."""
        BaseNetwork.load_state_dict(self, state)
        if self.started:
            with self._replicas() as group:
                group.call("set_state", args=({"network": self._op_states()},), timeout_s=self._control_timeout_s,
                           what="loading op states")

    def _op_states(self) -> dict[str, Any]:
        """The part of the network state that replicas hold: their ops (slicers and pops live on the driver)."""
        return {"ops": BaseNetwork.state_dict(self)["ops"]}

    def _load_op_states(self, replica_state: Mapping[str, Any]) -> None:
        state = BaseNetwork.state_dict(self)
        state["ops"] = replica_state["ops"]
        BaseNetwork.load_state_dict(self, state)

    def __repr__(self) -> str:
        return f"RayNetwork(framework={self.target_type!r}, num_replicas={self.num_replicas}, started={self.started})"


__all__ = ["RayNetwork", "batch_size_of", "is_replica_failure", "merge_outputs", "split_for_replicas"]
