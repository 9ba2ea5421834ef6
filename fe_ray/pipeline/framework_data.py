"""Framework data sources: a torch ``DataLoader`` or a ``tf.data.Dataset`` given to a Pipeline as a mode's data.

As in FastEstimator 1.7, such a source yields whole batches of its own: the Pipeline runs no ops on them and its
``batch_size``, ``shuffle`` and ``num_process`` do not apply. Each epoch is one fresh pass over the source (a new
iterator), cut short after ``steps_per_epoch`` batches; a pass that ends earlier ends the epoch (FastEstimator does
not restart a finished DataLoader or tf.data iterator within an epoch either). Batches are converted to
``{key: np.ndarray}`` dicts, so the Estimator turns them into the network's tensors as it does map-style batches
(a torch DataLoader may feed a TF model and the other way round).

Resuming mid-epoch re-creates the pass and skips the batches already handed out (``dataset.skip(n)`` for tf.data,
reading and dropping ``n`` batches for a DataLoader). That reproduces the remaining batches only if the source
yields the same batches on every pass; :func:`exact_resume` says whether that is known:

* DataLoader: exact when its sampler is sequential (``shuffle=False``), or random with a ``generator`` (the
  generators' states at the start of the epoch are checkpointed and restored before the pass is re-created). A
  random sampler drawing from torch's global RNG, a custom sampler or batch sampler, and an ``IterableDataset`` are
  not known to be exact. Randomness inside the dataset's own ``__getitem__`` is never covered.
* tf.data: exact unless its chain of datasets (with the functions of its ``map`` / ``filter`` / ``flat_map`` /
  ``interleave`` stages) holds a shuffle, a random dataset or sampling, a stateful random op or a
  ``tf.random.Generator`` draw, a Python function (``from_generator``, ``py_function``), or non-deterministic
  parallel ordering. A best-effort inspection: a dataset that cannot be inspected counts as not exact, and state
  kept outside the graph is not seen. A seeded ``shuffle`` counts as not exact too: it reshuffles on each pass,
  from a seed stream that a new process restarts.

The Pipeline records ``exact`` with the position and warns on restore when it is False, as
:class:`~fe_ray.dataset.GeneratorDataset` does.

No framework is imported here: an object can only be a DataLoader / tf.data.Dataset if its framework is loaded.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

# Parts of the names of tf.data graph ops that may give other results on each pass: shuffles, random datasets and
# sampling, stateful random ops (Stateless* ops are exempt), tf.random.Generator draws and Python functions.
_TF_UNSAFE_OPS = ("Shuffle", "Random", "Multinomial", "TruncatedNormal", "StatefulUniform", "StatefulStandardNormal",
                  "RngSkip", "RngReadAndSkip", "PyFunc", "DirectedInterleave", "Sampling", "NonDeterministic")


def framework_kind(data: Any) -> str | None:
    """``"torch"`` for a torch DataLoader, ``"tf"`` for a tf.data.Dataset, None for anything else."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.utils.data.DataLoader):
        return "torch"
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(data, tf.data.Dataset):
        return "tf"
    return None


def source_length(data: Any) -> int | None:
    """Batches in one pass over a framework source; None if unknown; -1 for an endless tf.data.Dataset."""
    if framework_kind(data) == "tf":
        cardinality = int(data.cardinality())
        infinite = int(sys.modules["tensorflow"].data.INFINITE_CARDINALITY)
        return -1 if cardinality == infinite else (cardinality if cardinality >= 0 else None)
    try:
        return len(data)
    except TypeError:  # a DataLoader of an IterableDataset without __len__
        return None


# ---------------------------------------------------------------------------------------------- determinism
def exact_resume(data: Any) -> bool:
    """Whether skipping a fresh pass's first ``n`` batches reproduces the batches ``n..`` of an earlier pass."""
    return _torch_exact(data) if framework_kind(data) == "torch" else _tf_exact(data)


def _torch_exact(loader: Any) -> bool:
    from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, SequentialSampler

    if isinstance(loader.dataset, IterableDataset):
        return False
    batch_sampler = loader.batch_sampler
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        return False  # a custom batch sampler: nothing is known about its order
    sampler = batch_sampler.sampler if batch_sampler is not None else loader.sampler
    if type(sampler) is SequentialSampler:
        return True
    return type(sampler) is RandomSampler and sampler.generator is not None


def _torch_generators(loader: Any) -> list[Any]:
    """The distinct torch generators a DataLoader's pass draws from (its own and its samplers')."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    found = [loader.generator, getattr(loader.sampler, "generator", None),
             getattr(getattr(batch_sampler, "sampler", None), "generator", None)]
    unique: list[Any] = []
    for generator in found:
        if generator is not None and all(generator is not seen for seen in unique):
            unique.append(generator)
    return unique


def rng_state(data: Any) -> list[list[int]] | None:
    """The states of a DataLoader's generators (plain ints, so checkpoints stay framework-free); None if none."""
    if framework_kind(data) != "torch":
        return None
    generators = _torch_generators(data)
    return [generator.get_state().tolist() for generator in generators] if generators else None


def set_rng_state(data: Any, states: list[list[int]] | None) -> None:
    """Put a DataLoader's generators back to :func:`rng_state`'s ``states`` (no-op for None; warns and leaves them
    as they are if the DataLoader has another number of generators than the saved one)."""
    if states is None or framework_kind(data) != "torch":
        return
    import torch

    generators = _torch_generators(data)
    if len(generators) != len(states):
        warnings.warn(f"Pipeline state holds {len(states)} generator state(s) for a DataLoader that draws from "
                      f"{len(generators)}; its generators are left as they are, so its shuffle differs from the "
                      "checkpointed run's. Restore into a DataLoader built like the checkpointed one.", stacklevel=4)
        return
    for generator, state in zip(generators, states):
        generator.set_state(torch.tensor(state, dtype=torch.uint8))


def _tf_exact(dataset: Any) -> bool:
    try:
        if dataset.options().deterministic is False:
            return False  # parallel stages may hand out their elements in any order
        return not any(_tf_unsafe(name) for name in _tf_names(dataset))
    except Exception:  # noqa: BLE001 - a tf.data that cannot be inspected is not known to be exact
        return False


def _tf_names(dataset: Any) -> Iterator[str]:
    """The class names of a tf.data chain's datasets and the op types of their functions (nested ones included).

    The chain is walked through ``_inputs()`` (tf.data's own graph walk); functions are read as graph defs, which
    hold their nested functions but not the data, so a large in-memory dataset costs nothing here.
    """
    stack, seen = [dataset], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield type(node).__name__
        if getattr(node, "_deterministic", None) == "false":
            yield "NonDeterministic"  # a parallel map / interleave with deterministic=False
        for value in vars(node).values():
            graph = getattr(getattr(value, "function", None), "graph", None)
            if graph is not None:
                graph_def = graph.as_graph_def()
                yield from (op.op for op in graph_def.node)
                yield from (op.op for function in graph_def.library.function for op in function.node_def)
        stack.extend(node._inputs())


def _tf_unsafe(name: str) -> bool:
    """Whether a dataset class or op may give other results on another pass (stateless random ops do not)."""
    return not name.startswith("Stateless") and any(part in name for part in _TF_UNSAFE_OPS)


def warn_inexact(positions: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
    """Warn for each restored mid-epoch position of a source that a skip is not known to reproduce."""
    for (mode, ds_id), position in positions.items():
        if position.get("exact", True) or position["batches"] == 0:
            continue
        where = f"mode {mode!r}" + (f", ds_id {ds_id!r}" if ds_id else "")
        warnings.warn(f"Pipeline cannot resume the DataLoader / tf.data.Dataset of {where} exactly: epoch "
                      f"{position['epoch']} resumes by skipping the {position['batches']} batch(es) already handed "
                      "out from a fresh pass, but that source is not known to repeat its batches (a shuffle or "
                      "random op without a checkpointed generator, a Python function, or a custom sampler), so the "
                      "remaining batches may differ from the uninterrupted run's. Give a DataLoader a seeded "
                      "generator=torch.Generator(), or use a map-style dataset, where exact resumption matters.",
                      stacklevel=3)


# ---------------------------------------------------------------------------------------------- the loader
class FrameworkLoader:
    """The batches of one (mode, epoch, ds_id) of a DataLoader / tf.data.Dataset, as ``{key: np.ndarray}`` dicts.

    The counterpart of :class:`~fe_ray.pipeline.loader.Loader` for sources that batch themselves: a context
    manager and an iterable, ``len()`` the epoch's batch count where known (a TypeError otherwise, as for any
    iterable of unknown length), ``on_batch`` called with the number handed out right before each batch is yielded
    and ``on_end`` once the pass ran out.

    Args:
        data: The DataLoader or tf.data.Dataset.
        mode: The mode.
        epoch: The epoch (1-based).
        ds_id: The dataset id.
        steps_per_epoch: Cut the pass after this many batches; None for the whole pass.
        start: Batches to skip (a resumed epoch).

    Raises:
        ValueError: For an endless tf.data.Dataset without ``steps_per_epoch`` (the epoch would never end).
    """

    def __init__(self, data: Any, mode: str, epoch: int, ds_id: str, steps_per_epoch: int | None = None,
                 start: int = 0) -> None:
        self.data = data
        self.kind = framework_kind(data)
        assert self.kind is not None, "FrameworkLoader needs a DataLoader or a tf.data.Dataset"
        self.mode, self.epoch, self.ds_id = mode, epoch, ds_id
        length = source_length(data)
        where = f"mode {mode!r}" + (f", ds_id {ds_id!r}" if ds_id else "")
        if length == -1 and steps_per_epoch is None:
            raise ValueError(f"The tf.data.Dataset of {where} repeats forever, so an epoch would never end; pass "
                             "Estimator(train_steps_per_epoch=... / eval_steps_per_epoch=...) or end it with "
                             "dataset.take(n).")
        if length == -1 or length is None:
            self.num_batches = steps_per_epoch
        else:
            self.num_batches = length if steps_per_epoch is None else min(length, steps_per_epoch)
        self.steps_per_epoch = steps_per_epoch
        self.start = start if self.num_batches is None else min(start, self.num_batches)
        self.on_batch: Callable[[int], None] | None = None
        self.on_end: Callable[[], None] | None = None
        # Training needs {key: values} batches; Pipeline.get_results lifts this to show any batch, as FastEstimator.
        self.require_dict = True
        self._cursor = self.start
        self._iterators: list[Iterator[dict[str, np.ndarray]]] = []
        self._source: Iterator[Any] | None = None

    def __len__(self) -> int:
        """The number of batches in this epoch (including skipped ones).

        Raises:
            TypeError: If the source does not know its length and no ``steps_per_epoch`` bounds it.
        """
        if self.num_batches is None:
            raise TypeError(f"The {type(self.data).__name__} of mode {self.mode!r} does not know its length.")
        return self.num_batches

    @property
    def remaining(self) -> int | None:
        """How many batches iterating may still hand out (None if unknown)."""
        return None if self.num_batches is None else self.num_batches - self._cursor

    def _open(self) -> Iterator[Any]:
        if self._source is None:
            if self.kind == "tf":
                # skip() drops the first batches inside tf.data, without converting them to numpy.
                self._source = iter(self.data.skip(self.start) if self.start else self.data)
            else:
                self._source = iter(self.data)
                for _ in range(self.start):
                    if next(self._source, None) is None:
                        break
        return self._source

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        iterator = self._batches()
        self._iterators.append(iterator)
        return iterator

    def _batches(self) -> Iterator[dict[str, np.ndarray]]:
        source = self._open()
        while self.num_batches is None or self._cursor < self.num_batches:
            try:
                raw = next(source)
            except StopIteration:
                if self.on_end is not None:
                    self.on_end()
                return
            if self.require_dict or isinstance(raw, Mapping):
                batch = as_numpy_batch(raw, self.mode)
            else:
                from fe_ray.backend import to_tensor

                batch = to_tensor(raw, "np")
            self._cursor += 1
            if self.on_batch is not None:
                self.on_batch(self._cursor)
            yield batch

    def close(self) -> None:
        """Stop any iteration in progress and drop the source's iterator (a DataLoader's workers with it)."""
        for iterator in self._iterators:
            iterator.close()  # type: ignore[attr-defined]
        self._iterators.clear()
        self._source = None

    def __enter__(self) -> FrameworkLoader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"FrameworkLoader({type(self.data).__name__}, mode={self.mode!r}, epoch={self.epoch}, "
                f"ds_id={self.ds_id!r}, batches={self.num_batches}, start={self.start})")


def as_numpy_batch(raw: Any, mode: str) -> dict[str, Any]:
    """A source's batch as ``{key: np.ndarray}`` (framework tensors converted, a list of strings made an array; other
    values kept).

    Raises:
        TypeError: If the batch is not a dict, which FastEstimator requires too (keys name the data).
    """
    if not isinstance(raw, Mapping):
        raise TypeError(f"A DataLoader / tf.data.Dataset given as {mode} data must yield dict batches "
                        f"({{key: batched values}}), got a {type(raw).__name__}; e.g. make its dataset's items dicts, "
                        "or map a tf.data.Dataset with lambda x, y: {'x': x, 'y': y}.")
    from fe_ray.backend import to_tensor

    return {str(key): _strings_to_array(value) for key, value in to_tensor(dict(raw), "np").items()}


def _strings_to_array(value: Any) -> Any:
    # default_collate batches strings as a list; a map-style Pipeline batch holds them as an array of str.
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, (str, bytes)) for item in value):
        return np.asarray(value)
    return value
