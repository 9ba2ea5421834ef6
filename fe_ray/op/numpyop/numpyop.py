"""NumpyOps: CPU ops on numpy data, run per sample in the Pipeline and per batch as Network pops."""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping, Sequence
from typing import Any, ClassVar

import numpy as np

from fe_ray.backend import is_model
from fe_ray.backend import numpy as numpy_backend
from fe_ray.op.numpyop.randomness import RNG_KEY, op_generator
from fe_ray.op.op import Op, get_inputs_by_op, write_outputs_by_op
from fe_ray.types import FilteredData


class NumpyOp(Op):
    """An op on numpy arrays, run on the CPU.

    In a Pipeline it sees one sample at a time (:meth:`forward`). As a Network pop it sees a whole batch
    (:meth:`forward_batch`); the default splits the batch and calls :meth:`forward` per sample, and ops that
    can work on a batch directly override it.

    Ops that draw random numbers set ``is_random = True`` and take their generator from
    :func:`fe_ray.op.numpyop.randomness.get_rng` (``state["rng"]``): in a Pipeline epoch it is a per-sample
    generator that makes the draws exact across resumes and worker threads.

    Raises:
        TypeError: If the op is handed a model: models run in TensorOps (ModelOp) inside a Network.
    """

    is_random: ClassVar[bool] = False

    def __init__(self, inputs: None | str | Iterable[str] = None, outputs: None | str | Iterable[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        """Run on a batch (axis 0); by default one :meth:`forward` per sample, restacked.

        Raises:
            ValueError: If the op reads no key, so the batch's samples cannot be told apart: such an op must
                override this method.
        """
        items = data if self.in_list else [data]
        if not items:
            raise ValueError(f"{type(self).__name__} reads no key, so its default forward_batch cannot split a batch "
                             "into samples (after a Batch op, or as a Network pop); give it inputs, or override "
                             "forward_batch to make the whole batch's outputs at once.")
        batch_size = len(items[0])
        results = [self.forward([item[i] for item in items] if self.in_list else items[0][i], state)
                   for i in range(batch_size)]
        if not self.outputs:
            return None
        if self.out_list:
            return [np.stack([res[j] for res in results]) for j in range(len(self.outputs))]
        return np.stack(results)


class LambdaOp(NumpyOp):
    """A NumpyOp running ``fn(*inputs)``: on one sample in a Pipeline, and once on the whole batch after a Batch op
    or as a Network pop (as FastEstimator's ``forward_batch`` does), so there ``fn`` sees arrays with the batch axis
    first and returns whole-batch values (``np.argmax(x, axis=-1)`` is per sample, ``x / x.max()`` scales by the
    batch's maximum). ``fn`` may take no inputs (e.g. to make a batch of noise).
    """

    def __init__(self, fn: Callable[..., Any], inputs: None | str | Iterable[str] = None,
                 outputs: None | str | Iterable[str] = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not callable(fn) or is_model(fn):
            raise TypeError(f"numpyop.LambdaOp needs a plain callable, got {type(fn).__name__}; models run on "
                            "tensors in a Network: use fe_ray.op.tensorop.model.ModelOp instead.")
        self.fn = fn
        self.in_list = True

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        return self.fn(*data)

    def forward_batch(self, data: list[Any], state: dict[str, Any]) -> Any:
        return self.fn(*data)

    def set_rua_level(self, magnitude_coef: float) -> None:
        """RUA's strength does not apply to a user's function: nothing to scale."""


def may_draw_globally(op: NumpyOp) -> bool:
    """Whether ``op`` may draw from numpy's or Python's global generator: it runs user code (a LambdaOp's or a
    RemoveIf's function, or is of an op class defined outside fe_ray), or it wraps such an op (Sometimes, OneOf,
    Fuse, Repeat).

    fe_ray's own ops draw only from the per-sample generator (:func:`~fe_ray.op.numpyop.randomness.get_rng`).
    """
    if isinstance(op, (LambdaOp, RemoveIf)) or not type(op).__module__.startswith("fe_ray."):
        return True
    return any(map(may_draw_globally, wrapped_ops(op)))


def wrapped_ops(op: NumpyOp) -> list[NumpyOp]:
    """The ops a meta op runs (``ops`` of OneOf and Fuse, ``op`` of Sometimes and Repeat); empty for other ops."""
    inner = getattr(op, "ops", None)
    if inner:
        return list(inner)
    return [op.op] if isinstance(getattr(op, "op", None), NumpyOp) else []


def check_collation(pad_value: Any, collate_fn: Any, owner: str = "") -> None:
    """Check the batching settings a Pipeline or a :class:`Batch` op takes.

    Args:
        pad_value: None, or a number (the fill of samples padded to one shape).
        collate_fn: None, or a callable making one batch dict from a list of sample dicts.
        owner: Prefix of the messages, e.g. ``"Batch "``.

    Raises:
        TypeError: If ``pad_value`` is not a number or ``collate_fn`` not callable.
    """
    numeric = isinstance(pad_value, (int, float, np.number)) and not isinstance(pad_value, bool)
    if pad_value is not None and not numeric:
        raise TypeError(f"{owner}pad_value must be a number (the fill of samples padded to one shape) or None, got "
                        f"{pad_value!r}.")
    if collate_fn is not None and not callable(collate_fn):
        raise TypeError(f"{owner}collate_fn must be callable (a list of sample dicts -> one batch dict) or None, got "
                        f"{type(collate_fn).__name__}.")


class Batch(NumpyOp):
    """Mark where a Pipeline's per-sample ops end and its batched ops begin, with the batching settings to use there.

    Ops listed before it in ``Pipeline(ops=...)`` run on one sample at a time; the samples are then collated into a
    batch, and ops listed after it run on that whole batch (their :meth:`NumpyOp.forward_batch`, e.g. to mix samples
    or to normalize with batch statistics). At most one Batch op may be active for a given mode, epoch and ds_id;
    filter or schedule several (``mode=``, ``ds_id=``, an EpochScheduler) to vary batching by context.

    Args:
        batch_size: Samples per batch where this op runs; overrides the Pipeline's ``batch_size`` (per mode or ds_id
            this way). None keeps the Pipeline's. A dataset that makes its own batches (BatchDataset) ignores it.
        drop_last: Drop the last, partial batch of each pass over the data. True turns dropping on where this op
            runs; False (the default) leaves the Pipeline's ``drop_last`` as it is. No effect on a BatchDataset.
        pad_value: Pad samples of one key that differ in shape with this value (at the end of each axis) up to the
            batch's largest shape. Exclusive with ``collate_fn``.
        collate_fn: Make each batch from the list of its sample dicts (returning one dict of batched values).
            Exclusive with ``pad_value``. Given either, the op's collation replaces the Pipeline's ``pad_value`` /
            ``collate_fn``; given neither, the Pipeline's apply.
        mode: Mode(s) in which this op applies; None for all, "!mode" to exclude one.
        ds_id: Dataset id(s) in which this op applies; None for all, "!id" to exclude one.

    Differences from FastEstimator: ``batch_size`` must be positive (FastEstimator accepts 0); ``collate_fn`` stays
    None when not given (FastEstimator fills in torch's default_collate), since fe_ray stacks numpy arrays itself;
    and fe_ray's Pipeline has its own ``drop_last`` / ``pad_value`` / ``collate_fn``, combined with the op's as
    described above.

    Raises:
        ValueError: If ``batch_size`` is not a positive int, or both ``pad_value`` and ``collate_fn`` are given.
        TypeError: If ``drop_last`` is not a bool, ``pad_value`` not a number or ``collate_fn`` not callable.
    """

    def __init__(self, batch_size: int | None = None, drop_last: bool = False, pad_value: int | float | None = None,
                 collate_fn: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id)
        if batch_size is not None and (not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool)
                                       or batch_size < 1):
            raise ValueError(f"Batch batch_size must be a positive int, or None to keep the Pipeline's, got "
                             f"{batch_size!r}.")
        if not isinstance(drop_last, (bool, np.bool_)):
            raise TypeError(f"Batch drop_last must be a bool, got {drop_last!r}.")
        check_collation(pad_value, collate_fn, "Batch ")
        if pad_value is not None and collate_fn is not None:
            raise ValueError(f"Batch got both pad_value={pad_value!r} and a collate_fn; give one of them (pad inside "
                             "your collate_fn if it needs padding).")
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.pad_value = pad_value
        self.collate_fn = collate_fn

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data  # a marker: the Pipeline does the batching, the op itself reads and writes nothing

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return data

    def __repr__(self) -> str:
        return (f"Batch(batch_size={self.batch_size}, drop_last={self.drop_last}, pad_value={self.pad_value!r}, "
                f"collate_fn={getattr(self.collate_fn, '__name__', self.collate_fn)!r}, mode={self.mode}, "
                f"ds_id={self.ds_id})")


class Delete(NumpyOp):
    """Remove key(s) from the data dictionary."""

    def __init__(self, keys: str | Iterable[str], mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=keys, mode=mode, ds_id=ds_id)


def check_numpy_ops(ops: Iterable[Any], where: str) -> None:
    """Raise TypeError if an entry is not a NumpyOp or a NumpyOp holds a model (``where`` names the container)."""
    for op in ops:
        if not isinstance(op, NumpyOp):
            raise TypeError(f"{where} accepts NumpyOps only, got {type(op).__name__}; TensorOps belong in "
                            "Network(ops=...).")
        for attr, value in vars(op).items():
            if is_model(value):
                raise TypeError(f"{type(op).__name__}.{attr} holds a model, but NumpyOps run on CPU numpy data in "
                                f"{where}; move the model into a ModelOp in Network(ops=...).")


class RemoveIf(NumpyOp):
    """Drop a sample from the Pipeline when ``fn(*inputs)`` is true (FastEstimator's ``RemoveIf``).

    Before a Batch op (or without one) ``fn`` sees one sample; after a Batch op it sees the whole batch's arrays
    (batch axis first) and a true answer drops the whole batch.

    Args:
        fn: Takes the values of ``inputs`` and returns a bool: True drops the sample (or batch).
        replacement: True: another sample takes the dropped one's place, so batches keep their size and the epoch
            its number of steps (a dropped batch is replaced by another batch). False: the sample is dropped
            without a replacement: its batch comes out shorter (a batch left empty, or dropped as a whole, is
            skipped, so the epoch has a step fewer).
        inputs: Key(s) whose values ``fn`` takes, in order.
        mode: Mode(s) in which this op applies; None for all, "!mode" to exclude one.
        ds_id: Dataset id(s) in which this op applies; None for all, "!id" to exclude one.

    Differences from FastEstimator: where the replacements come from, and where ``replacement=False`` shortens the
    epoch, see :class:`~fe_ray.pipeline.loader.Loader` (batch ``b`` stays a pure function of ``b``, so resumed and
    threaded epochs give the same batches).

    Raises:
        TypeError: If ``fn`` is not callable, or ``replacement`` is not a bool.
    """

    def __init__(self, fn: Callable[..., bool], replacement: bool = True, inputs: None | str | Iterable[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, mode=mode, ds_id=ds_id)
        if not callable(fn) or is_model(fn):
            raise TypeError(f"RemoveIf fn must be a plain callable taking the values of its inputs and returning a "
                            f"bool (True drops the sample), got {type(fn).__name__}.")
        if not isinstance(replacement, (bool, np.bool_)):
            raise TypeError(f"RemoveIf replacement must be a bool (True: replace dropped samples, False: shorten the "
                            f"batch), got {replacement!r}.")
        self.filter_fn = fn
        self.replacement = bool(replacement)
        self.in_list = True

    def forward(self, data: list[Any], state: dict[str, Any]) -> FilteredData | None:
        return FilteredData(replacement=self.replacement) if self._verdict(data) else None

    def forward_batch(self, data: list[Any], state: dict[str, Any]) -> FilteredData | None:
        # One answer for the whole batch, as FastEstimator (whose forward_batch calls fn on the batch's arrays).
        return self.forward(data, state)

    def _verdict(self, data: list[Any]) -> bool:
        answer = self.filter_fn(*data)
        try:
            return bool(answer)
        except ValueError:
            # numpy's "truth value of an array is ambiguous": fn answered per element (e.g. per sample of a batch).
            raise ValueError(f"RemoveIf fn must return one bool, got an array of shape {np.shape(answer)}; after a "
                             "Batch op fn sees the whole batch and its one answer drops the whole batch (reduce with "
                             "np.any / np.all, or move the RemoveIf before the Batch op to drop single samples).") \
                from None


def forward_numpyop(ops: list[NumpyOp], data: MutableMapping[str, Any], state: dict[str, Any],
                    batched: bool = False, entropy: Sequence[int] | None = None,
                    filtered_by: list[NumpyOp] | None = None) -> FilteredData | None:
    """Run ``ops`` in order on ``data`` in place; ``batched`` selects :meth:`NumpyOp.forward_batch`.

    Delete ops remove their keys; every other op writes its outputs back into ``data``. An op returning a
    :class:`~fe_ray.types.FilteredData` (e.g. :class:`RemoveIf`) stops the run: the ops after it do not run, and
    the FilteredData is returned for the caller to drop the sample (or batch).

    Args:
        ops: The ops, in order.
        data: The sample (or batch) dict, changed in place.
        state: The execution context handed to every op (``mode``, ``epoch``, ``ds_id``, ...).
        batched: Run :meth:`NumpyOp.forward_batch` on a batch instead of :meth:`NumpyOp.forward` on one sample.
        entropy: The sample's entropy (see :mod:`fe_ray.op.numpyop.randomness`): each random op then gets its own
            seeded generator as ``state["rng"]``. None leaves ``state`` as given.
        filtered_by: If given, the op that filtered ``data`` is appended to it (for error messages).

    Returns:
        The FilteredData an op returned, or None when every op ran.
    """
    for position, op in enumerate(ops):
        if isinstance(op, Delete):
            for key in op.inputs:
                if key not in data:
                    # As FastEstimator, whose Delete reads its keys first: a missing key is a mistake in the op
                    # list (a misspelled key, or one deleted or never written in this mode), not something to skip.
                    raise KeyError(f"Delete: key {key!r} is not in the data (keys: {sorted(data)}); delete only keys "
                                   "an earlier op or the dataset wrote in this mode.")
                del data[key]
            continue
        op_state = state
        if entropy is not None and op.is_random:
            # A copy per random op: the generator belongs to this op and sample only.
            op_state = {**state, RNG_KEY: op_generator(entropy, position)}
        inputs = get_inputs_by_op(op, data)
        if batched:
            inputs = [_to_numpy(x) for x in inputs] if op.in_list else _to_numpy(inputs)
            result = op.forward_batch(inputs, op_state)
        else:
            result = op.forward(inputs, op_state)
        if isinstance(result, FilteredData):
            if filtered_by is not None:
                filtered_by.append(op)
            return result
        if op.outputs:
            write_outputs_by_op(op, data, result)
    return None


def _to_numpy(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy"):  # a torch / TF tensor (bfloat16 included) from the network's step
        return numpy_backend.to_numpy(value)
    return np.asarray(value)
