"""The in-process Network: runs TensorOps on a batch, with slicers and post-processing ops (pops).

A distributed replica owns exactly one of these networks; nothing here knows about Ray. Framework-specific
execution (grad contexts, tf.function, device moves) lives in :mod:`fe_ray.backend.torch` / ``.tf``, and finding
the ops' models and framework in :mod:`fe_ray.network_framework`.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from fe_ray.allocator import tune_process_malloc
from fe_ray.backend import BACKEND_CACHE_KEY, get_backend
from fe_ray.network_framework import OpsArg, check_batch, collect_models, detect_framework, io_keys, unique_by_identity
from fe_ray.op.numpyop.numpyop import Batch, NumpyOp, check_numpy_ops, forward_numpyop
from fe_ray.op.tensorop.tensorop import TensorOp
from fe_ray.schedule import Scheduler, get_current_items
from fe_ray.slicer import Slicer, forward_slicers, reverse_slicers, sanity_assert_slicers
from fe_ray.util import check_ds_id, check_epoch, check_mode, drop_nones, to_list


class BaseNetwork:
    """The framework-neutral part of a Network.

    Use it as ``with network(mode="train", epoch=1, ds_id=""): network.run_step(batch)``.

    Args:
        target_type: 'torch' or 'tf'.
        device: The device models run on (torch), or None.
        ops: TensorOps (or Schedulers of them) defining the step.
        postprocessing: NumpyOps run on the whole merged batch after the ops, on the CPU (FastEstimator's name for
            the classes' argument; ``pops``, the :func:`Network` factory's name, is taken as a keyword too).
        slicers: Slicers cutting each batch into minibatches that run through the ops one after another.

    Attributes:
        grad_reducer: Optional ``fn(model, gradients) -> gradients`` placed in the step state; UpdateOps call it
            before applying gradients. The distributed layer sets it to an all-reduce; in-process it is None.
    """

    def __init__(self, target_type: str, device: Any, ops: OpsArg, postprocessing: OpsArg = None, slicers: Any = None,
                 *, pops: OpsArg = None) -> None:
        self.target_type = target_type
        self.device = device
        self.ops: list[Any] = drop_nones(to_list(ops))
        self.postprocessing: list[Any] = drop_nones(to_list(_either_pops(postprocessing, pops)))
        self.slicers: list[Any] = drop_nones(to_list(slicers))
        self._verify_inputs()
        for op in get_current_items(self.ops):
            op.build(framework=target_type, device=device)
        self.models: list[Any] = collect_models(self.ops)
        precisions = {bool(getattr(model, "mixed_precision", False)) for model in self.models}
        if len(precisions) > 1:
            raise ValueError("Cannot mix full-precision and mixed-precision models in one Network; build all models "
                             "with the same mixed_precision setting.")
        self.mixed_precision = precisions == {True}
        self.grad_reducer: Any = None
        # Handed to the backend in every context's state: what it may keep across contexts (the TF backend's traced
        # step functions, so each epoch does not trace again).
        self.backend_cache: dict[str, Any] = {}
        self._backend = get_backend(target_type)
        self.ctx_lock = threading.Lock()
        self._reset_ctx()

    def _reset_ctx(self) -> None:
        self._unfinished: Any = None  # what start_step left of the last step
        self.ctx_inputs: set[str] = set()
        self.ctx_gpu_inputs: set[str] = set()
        self.ctx_outputs: set[str] = set()
        self.ctx_ops: list[TensorOp] = []
        self.ctx_postprocessing: list[NumpyOp] = []
        self.ctx_slicers: list[Slicer] = []
        self.ctx_models: list[Any] = []
        self.ctx_state: dict[str, Any] = {}

    def _verify_inputs(self) -> None:
        for pos, op in enumerate(get_current_items(self.ops)):
            if not isinstance(op, TensorOp):
                raise TypeError(f"Network ops must be TensorOps, but op #{pos} is a {type(op).__name__}. NumpyOps "
                                "belong in Pipeline(ops=...) or Network(pops=...).")
        check_numpy_ops(get_current_items(self.postprocessing), "Network pops")
        if any(isinstance(op, Batch) for op in get_current_items(self.postprocessing)):
            raise TypeError("Network pops got a Batch op, which only marks where a Pipeline batches samples (pops "
                            "already see whole batches): put it in Pipeline(ops=...).")
        for slicer in get_current_items(self.slicers):
            if not isinstance(slicer, Slicer):
                raise TypeError(f"Network slicers must be Slicers, got {type(slicer).__name__}.")

    # ------------------------------------------------------------------ configuration
    def get_scheduled_items(self, mode: str) -> list[Any]:
        """Everything whose schedule can change the step, in FastEstimator's order: ops, then (in train) each model's
        optimizer (None for a model built without one), then pops and slicers."""
        optimizers = [getattr(model, "optimizer", None) for model in self.models] if mode == "train" else []
        return self.ops + optimizers + self.postprocessing + self.slicers

    def get_loss_keys(self) -> set[str]:
        """Keys that some UpdateOp uses as a loss."""
        keys: set[str] = set()
        for op in get_current_items(self.ops):
            keys |= op.get_fe_loss_keys()
        return keys

    def get_io_keys(self, mode: str, epoch: int, ds_id: str = "",
                    desired_keys: set[str] | None = None) -> tuple[set[str], set[str], set[str]]:
        """Return (inputs the network needs, inputs the TensorOps need, outputs it returns) for a context.

        Raises:
            ValueError: If slicers are active and a wanted output key is sliced but never un-sliced.
        """
        return io_keys(get_current_items(self.ops, mode, epoch, ds_id=ds_id),
                       get_current_items(self.postprocessing, mode, epoch, ds_id=ds_id),
                       get_current_items(self.slicers, mode, epoch, ds_id=ds_id), desired_keys,
                       where=repr({"mode": mode, "epoch": epoch, "ds_id": ds_id}))

    def __call__(self, mode: str, epoch: int, ds_id: str = "", desired_output_keys: set[str] | None = None,
                 warmup: bool = False, eager: bool = False) -> BaseNetwork:
        """Configure the network for a (mode, epoch, ds_id) context; use the result in a ``with`` block.

        Raises:
            ValueError: If ``mode`` is not a mode or ``epoch`` is not an int >= 1.
            TypeError: If ``ds_id`` is not a str.
        """
        check_mode(mode)
        epoch = check_epoch(epoch)
        check_ds_id(ds_id)
        if self.ctx_lock.locked():
            raise ValueError("You cannot configure a Network while it is in use (already inside a `with` block).")
        self.ctx_inputs, self.ctx_gpu_inputs, self.ctx_outputs = self.get_io_keys(
            mode, epoch, ds_id, desired_keys=desired_output_keys)
        self.ctx_ops = get_current_items(self.ops, mode, epoch, ds_id=ds_id)
        self.ctx_postprocessing = get_current_items(self.postprocessing, mode, epoch, ds_id=ds_id)
        self.ctx_slicers = get_current_items(self.slicers, mode, epoch, ds_id=ds_id)
        sanity_assert_slicers(self.ctx_slicers)
        self.ctx_models = unique_by_identity([model for op in self.ctx_ops for model in op.get_fe_models()])
        gradient_ops = [op for op in self.ctx_ops if op.fe_retain_graph() is not None]
        for idx, op in enumerate(gradient_ops):
            # Every gradient computation but the last must keep the graph alive for the ones after it.
            op.fe_retain_graph(idx != len(gradient_ops) - 1)
        self.ctx_state = {"warmup": warmup, "mode": mode, "epoch": epoch, "ds_id": ds_id,
                          "req_grad": bool(gradient_ops), "deferred": {}, "eager": eager,
                          "grad_reducer": self.grad_reducer, BACKEND_CACHE_KEY: self.backend_cache}
        for model in self.ctx_models:
            optimizer = getattr(model, "optimizer", None)
            if optimizer is not None:
                model.current_optimizer = (optimizer.get_current_value(epoch) if isinstance(optimizer, Scheduler)
                                           else optimizer)
        return self

    def __enter__(self) -> BaseNetwork:
        if not self.ctx_state:
            raise ValueError("Configure the network before entering it: `with network(mode='train', epoch=1):`.")
        if not self.ctx_lock.acquire(blocking=False):
            raise ValueError("This network is already in use.")
        try:
            self._enter_context()
        except BaseException:
            # A context that fails to start never reaches __exit__: free the network here, or every later use (a
            # distributed network's recovery with fresh replicas included) would find it still in use.
            self._reset_ctx()
            self.ctx_lock.release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if exc[0] is None:
                self.finish_step()  # after a failed block, what the last step left is dropped with the context
        finally:
            try:
                self._exit_context()
            finally:
                self._reset_ctx()
                self.ctx_lock.release()

    def _enter_context(self) -> None:
        """Framework hook run when a context starts (device moves, defer defaults)."""
        # The steps run in this process: keep their freed tensors for the next step (fe_ray.allocator; once per
        # process, and not where the user chose malloc settings). RayNetwork overrides this hook: its driver only
        # slices and merges.
        tune_process_malloc()
        prepare = getattr(self._backend, "enter_context", None)
        if prepare is not None:
            prepare(self.ctx_models, self.ctx_state["mode"], self.device)

    def _exit_context(self) -> None:
        """Framework hook run when a context ends (free graphs, move models back)."""
        release = getattr(self._backend, "exit_context", None)
        if release is not None:
            release(self.ctx_models, self.ctx_state.get("mode", ""), self.device)

    # ------------------------------------------------------------------ execution
    def run_step(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Run the ops (per slice if slicers are active), merge, then run the pops.

        Args:
            batch: The input batch (numpy arrays or framework tensors).

        Returns:
            The input batch overlaid with the network's outputs, as the framework's tensors (values it cannot
            represent, such as strings for torch, stay as they are).

        Raises:
            ValueError: If called outside a configured ``with network(...)`` block.
            KeyError: If a key an op needs is missing from the batch (naming the key and the op).
        """
        return self._run_whole(self._begin_step(batch, "run_step"))

    def _run_whole(self, batch: dict[str, Any]) -> dict[str, Any]:
        """:meth:`run_step` on a batch :meth:`_begin_step` prepared."""
        if self.ctx_slicers:
            minibatches = forward_slicers(self.ctx_slicers, batch)
            results = [{**mb, **self._run_step(mb)} for mb in minibatches]
            merged = reverse_slicers(self.ctx_slicers, results, original_data=batch)
        else:
            merged = {**batch, **self._run_step(batch)}
        if self.ctx_postprocessing:  # checked here: a step without pops makes no call for them
            self._run_pops(merged)
        return merged

    def _run_pops(self, merged: dict[str, Any]) -> None:
        """Run the context's pops on the merged batch in place.

        Raises:
            ValueError: If a pop returns FilteredData (e.g. a RemoveIf): a trained batch cannot be taken back.
        """
        filtered_by: list[NumpyOp] = []
        if forward_numpyop(self.ctx_postprocessing, merged, self.ctx_state, batched=True,
                           filtered_by=filtered_by) is not None:
            name = type(filtered_by[-1]).__name__ if filtered_by else "a pop"
            raise ValueError(f"Network pops cannot filter batches, but {name} returned FilteredData (as in "
                             "FastEstimator, filtering is not supported in network post-processing): filter samples "
                             "with RemoveIf in Pipeline(ops=...) instead.")

    def start_step(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`run_step`, returning as soon as the step's outputs are known: the trailing weight updates are left
        for :meth:`finish_step`.

        A replica answers the driver with these outputs and then finishes the step while its answer travels and the
        driver merges it and sends the next batch, so neither the hops nor the driver's work wait for the backward
        pass. The outputs are those :meth:`run_step` returns: the ops left for later write no key (trailing
        UpdateOps). Where nothing can be left (TF's one-graph steps, slicers, eval and infer), the whole step runs.

        The step's models must not be used before :meth:`finish_step`; :meth:`run_step`, :meth:`start_step`,
        :meth:`state_dict`, :meth:`load_state_dict` and leaving the context call it first.

        Raises:
            As :meth:`run_step`.
        """
        batch = self._begin_step(batch, "start_step")
        tail = self._deferrable_tail()
        start = getattr(self._backend, "start_step", None)
        if not tail or start is None or self.ctx_slicers:
            return self._run_whole(batch)
        outputs, self._unfinished = start(self.ctx_ops, dict(batch), self.ctx_state, self.ctx_gpu_inputs,
                                          self.ctx_outputs, device=self.device, mixed_precision=self.mixed_precision,
                                          tail=tail)
        merged = {**batch, **outputs}
        if self.ctx_postprocessing:
            self._run_pops(merged)
        return merged

    def finish_step(self) -> None:
        """Run what :meth:`start_step` left of the last step (its weight updates); nothing if it left nothing.

        Raises:
            Whatever those updates raise (e.g. a ValueError for a loss that reaches no weight).
        """
        finish, self._unfinished = self._unfinished, None
        if finish is not None:
            finish()

    def _deferrable_tail(self) -> int:
        """How many of the context's last ops :meth:`start_step` may leave for later (0: none)."""
        return 0

    def _begin_step(self, batch: Mapping[str, Any], caller: str) -> dict[str, Any]:
        """Finish any step left unfinished, then return ``batch`` as the framework's tensors, checked."""
        if not self.ctx_lock.locked() or not self.ctx_state:
            raise ValueError(f"{caller} must be called inside `with network(mode=..., epoch=...):`.")
        if self._unfinished is not None:
            self.finish_step()
        # The framework's tensors throughout, inputs included, as FastEstimator hands them to ops, pops and traces
        # (torch shares the arrays' memory; values already tensors pass through as the same objects).
        batch = self._backend.to_tensor(dict(batch))
        check_batch(batch, self.ctx_gpu_inputs, self.ctx_ops, self.ctx_state["mode"])
        return batch

    def _run_step(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Run the ops on one (mini)batch; return the prediction dict (outputs only)."""
        return self._backend.run_step(self.ctx_ops, dict(batch), self.ctx_state, self.ctx_gpu_inputs,
                                      self.ctx_outputs, device=self.device, mixed_precision=self.mixed_precision)

    def transform(self, data: Mapping[str, Any] | Iterable[Mapping[str, Any]], mode: str, epoch: int = 1,
                  ds_id: str = "") -> dict[str, Any] | list[dict[str, Any]]:
        """Run the network on one batch dict, a list of them, or a Pipeline (every batch of its ``mode`` data, in
        order: never shuffled).

        The ops of ``mode`` run as in a step of that mode: only ``mode="train"`` runs the UpdateOps, so only then do
        the weights change (as in FastEstimator).

        Returns:
            The batch(es) overlaid with predictions; a dict for a dict input, otherwise a list.
        """
        single = isinstance(data, Mapping)
        results: list[dict[str, Any]] = []
        with self(mode=mode, epoch=epoch, ds_id=ds_id, warmup=False, eager=single and not self.slicers):
            if hasattr(data, "get_results") and callable(data):  # a Pipeline
                with data(mode=mode, epoch=epoch, ds_id=ds_id, shuffle=False) as loader:
                    batches: Iterable[Any] = list(loader)
            else:
                batches = [data] if single else list(data)
            for batch in batches:
                results.append(self.run_step(batch))
        return results[0] if single else results

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """States of every op, slicer and pop (scheduled ones included), tagged with their class names."""
        self.finish_step()
        return {group: [{"type": type(obj).__name__, "state": obj.state_dict()} for obj in objs]
                for group, objs in self._stateful_groups().items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`, checking that the configuration (counts and classes) is unchanged.

        Raises:
            ValueError: Naming the group, position and classes that differ.
        """
        self.finish_step()
        for group, objs in self._stateful_groups().items():
            saved = state.get(group, [])
            if len(saved) != len(objs):
                raise ValueError(f"Checkpoint has {len(saved)} network {group} but this Network has {len(objs)}: "
                                 f"saved {[s['type'] for s in saved]} vs current {[type(o).__name__ for o in objs]}.")
            for pos, (obj, entry) in enumerate(zip(objs, saved)):
                if entry["type"] != type(obj).__name__:
                    raise ValueError(f"Network {group} #{pos} is a {type(obj).__name__} but the checkpoint holds a "
                                     f"{entry['type']}; the checkpoint is from a different configuration.")
                obj.load_state_dict(entry["state"])

    def _stateful_groups(self) -> dict[str, list[Any]]:
        return {"ops": get_current_items(self.ops), "slicers": get_current_items(self.slicers),
                "pops": get_current_items(self.postprocessing)}


class TorchNetwork(BaseNetwork):
    """A Network of PyTorch models. Trailing UpdateOps are deferred to step end so chained models (GANs) work."""

    def __init__(self, ops: OpsArg, postprocessing: OpsArg = None, slicers: Any = None, *, pops: OpsArg = None) -> None:
        super().__init__("torch", get_backend("torch").get_device(), ops, postprocessing, slicers, pops=pops)

    def _enter_context(self) -> None:
        super()._enter_context()
        self._saved_defer: list[tuple[Any, bool]] = []
        for op in reversed(self.ctx_ops):
            if op.fe_retain_graph() is None or not hasattr(op, "defer"):
                break
            # Overwriting a torch model's weights mid-step would invalidate the autograd graph of later ops.
            self._saved_defer.append((op, op.defer))
            op.defer = True

    def _deferrable_tail(self) -> int:
        # The trailing UpdateOps that write no key: the outputs are final before they run.
        tail = 0
        for op, _ in getattr(self, "_saved_defer", []):
            if op.outputs:
                break
            tail += 1
        return tail

    def _exit_context(self) -> None:
        for op, defer in getattr(self, "_saved_defer", []):
            op.defer = defer
        self._saved_defer = []
        super()._exit_context()


class TFNetwork(BaseNetwork):
    """A Network of TensorFlow/Keras models, run as a tf.function unless ``eager=True``."""

    def __init__(self, ops: OpsArg, postprocessing: OpsArg = None, slicers: Any = None, *, pops: OpsArg = None) -> None:
        super().__init__("tf", None, ops, postprocessing, slicers, pops=pops)


def _either_pops(postprocessing: OpsArg, pops: OpsArg) -> OpsArg:
    """The post-processing ops given as ``postprocessing`` (FastEstimator's name) or ``pops`` (the factory's)."""
    if postprocessing is not None and pops is not None:
        raise TypeError("Pass the post-processing NumpyOps once, as postprocessing= or as pops=, not both.")
    return pops if postprocessing is None else postprocessing


def Network(ops: OpsArg, pops: OpsArg = None, slicers: Any = None, num_replicas: int | None = None,
            **distributed_options: Any) -> BaseNetwork:
    """Create a Network for ``ops``: in-process, or on ``num_replicas`` Ray actors.

    Args:
        ops: TensorOps (or Schedulers of them); models must be built with :func:`fe_ray.build`.
        pops: NumpyOps run on the merged batch after the ops.
        slicers: Slicers for cutting batches into minibatches.
        num_replicas: None (default) runs in this process; N >= 1 runs data-parallel on N Ray actors.
        **distributed_options: Options of the distributed network (``resources_per_replica``, ``max_failures``,
            ...); see :class:`fe_ray.distributed.RayNetwork`.

    Returns:
        A TorchNetwork or TFNetwork, or a RayNetwork when ``num_replicas`` is given.

    Raises:
        ValueError: For mixed frameworks, duplicate model names, or a bad ``num_replicas``.
    """
    if "framework" in distributed_options:
        raise TypeError("Network() takes no framework argument: the framework is that of the models the ops use "
                        f"(got framework={distributed_options['framework']!r}). Drop it.")
    if distributed_options:
        from fe_ray.distributed.options import check_option_names  # imports neither Ray nor a framework

        check_option_names(distributed_options)
    framework = detect_framework(ops)
    if num_replicas is None:
        if distributed_options:
            raise ValueError(f"Options {sorted(distributed_options)} need num_replicas=N (N >= 1).")
        return TorchNetwork(ops, pops, slicers) if framework == "torch" else TFNetwork(ops, pops, slicers)
    if not isinstance(num_replicas, numbers.Integral) or isinstance(num_replicas, bool) or num_replicas < 1:
        raise ValueError(f"num_replicas must be a positive int (or None to run in-process), got {num_replicas!r}.")
    num_replicas = int(num_replicas)  # a numpy integer from a sweep's grid works too
    from fe_ray.distributed import RayNetwork  # Ray is imported only when asked for

    return RayNetwork(ops, pops, slicers, num_replicas=num_replicas, framework=framework, **distributed_options)


from fe_ray.build import build  # noqa: E402  (FastEstimator exposes build from the network module)

__all__ = ["BaseNetwork", "Network", "OpsArg", "TFNetwork", "TorchNetwork", "build", "collect_models",
           "detect_framework"]
