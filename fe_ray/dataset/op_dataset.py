"""OpDataset: a dataset whose samples come out with NumpyOps applied, for a DataLoader of the user's own."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from fe_ray.op.numpyop.numpyop import Batch, NumpyOp, check_numpy_ops, forward_numpyop
from fe_ray.pipeline.collation import owned_sample
from fe_ray.types import FilteredData
from fe_ray.util import check_mode, to_list
from fe_ray.util.compat import warn


class OpDataset:
    """Wrap ``dataset`` so that each item comes out with ``ops`` run on it, as FastEstimator's ``OpDataset``.

    A map-style dataset (``len`` and ``[index]``), so a torch ``DataLoader`` with a sampler of the user's own can
    load it and still use FastEstimator's per-sample NumpyOps; the loader can then go into a Pipeline::

        op_ds = OpDataset(dataset=train_data, ops=[ExpandDims("x", "x"), Minmax("x", "x")], mode="train")
        loader = DataLoader(op_ds, batch_sampler=my_sampler)
        pipeline = fe.Pipeline(train_data=loader)

    Each item is a copy of the dataset's (ops editing arrays in place leave the dataset as it was); the ops run on it
    in order with ``state = {"mode": mode}``. As in FastEstimator, every op given runs whatever its own ``mode`` or
    ``ds_id``: pick the ops for the mode first (``fe.schedule.get_current_items(ops, run_modes=mode)``). An item that
    is a list of samples (a BatchDataset's) has the ops run on each sample, once per distinct sample. Random ops
    draw from numpy's global generator here (seed it per DataLoader worker, with ``worker_init_fn``), not from the
    per-sample generators of a Pipeline's epoch.

    Args:
        dataset: The dataset to wrap: ``dataset[index]`` is a sample dict (or a list of them).
        ops: The NumpyOps to run on each sample, in order.
        mode: The mode handed to the ops: 'train', 'eval', 'test' or 'infer'.
        output_keys: The keys to keep in each sample after the ops; None or empty keeps all. Dropped keys are
            named once, as FastEstimator warns about keys it prunes.
        deep_remainder: Accepted for FastEstimator's signature; fe_ray always copies a sample whole.

    Raises:
        ValueError: If ``mode`` is not a valid mode, or ``ops`` holds a Batch op (batching is the DataLoader's).
        TypeError: If an entry of ``ops`` is not a NumpyOp (a Scheduler, a TensorOp).
    """

    _warned: ClassVar[set[str]] = set()  # keys whose pruning was reported (once per process, as in FastEstimator)
    _warn_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, dataset: Any, ops: NumpyOp | Iterable[NumpyOp] | None, mode: str,
                 output_keys: Iterable[str] | None = None, deep_remainder: bool = True) -> None:
        self.dataset = dataset
        self.ops: list[NumpyOp] = [op for op in to_list(ops) if op is not None]
        check_numpy_ops(self.ops, "OpDataset")
        batch_ops = [type(op).__name__ for op in self.ops if isinstance(op, Batch)]
        if batch_ops:
            raise ValueError(f"OpDataset runs per-sample ops only, got {batch_ops}; batch with the DataLoader (its "
                             "batch_size / batch_sampler and collate_fn) or give the ops to a Pipeline instead.")
        self.mode = check_mode(mode)
        self.output_keys: set[str] | None = set(to_list(output_keys)) or None
        self.deep_remainder = deep_remainder

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any] | list[dict[str, Any] | FilteredData] | FilteredData:
        """Sample ``index`` with the ops applied (a list of samples where the dataset's item is a list); a
        :class:`~fe_ray.types.FilteredData` in place of a sample an op filtered out."""
        item = self.dataset[index]
        if isinstance(item, list):
            done: dict[int, dict[str, Any] | FilteredData] = {}  # a batch may hold one sample twice: process it once
            results = []
            for sample in item:
                if id(sample) not in done:
                    done[id(sample)] = self._process(sample, index)
                results.append(done[id(sample)])
            return results
        return self._process(item, index)

    def _process(self, sample: Mapping[str, Any], index: int) -> dict[str, Any] | FilteredData:
        data = owned_sample(sample, f"{type(self.dataset).__name__} item {index}")
        filtered = forward_numpyop(self.ops, data, {"mode": self.mode})
        if filtered is not None:
            return filtered  # an op (a RemoveIf) dropped the sample: say so, as FastEstimator's OpDataset does
        if self.output_keys:
            unused = set(data) - self.output_keys
            for key in unused:
                del data[key]
            self._report_pruned(unused)
        return data

    @classmethod
    def _report_pruned(cls, keys: set[str]) -> None:
        new = keys - cls._warned
        if not new:
            return
        with cls._warn_lock:
            new = keys - cls._warned
            cls._warned |= new
        if new:
            warn("The following key(s) are being pruned since they are unused outside of the Pipeline. To prevent "
                 "this, you can declare the key(s) as inputs to Traces or TensorOps: " + ", ".join(sorted(new)))
