"""The Batch op in a Pipeline: which ops run per sample and which per batch, and with what batching settings.

A :class:`~fe_ray.op.numpyop.Batch` op in ``Pipeline(ops=...)`` splits the ops active in one (mode, epoch, ds_id)
into the per-sample ops before it and the batched ops after it (:func:`split_ops`), and its settings override the
Pipeline's there (:func:`make_stage`). A :class:`Stage` is the resulting recipe for the batches of one dataset.

Batched ops run on whole batches, so the per-sample generators of :mod:`fe_ray.op.numpyop.randomness` do not apply
to them: a random batched op draws instead from a generator seeded by the batch's position in the epoch
(:func:`batch_entropy`), so that it too gives the same batches after a resume and with any ``num_process``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from fe_ray.op.numpyop.numpyop import Batch, NumpyOp
from fe_ray.pipeline.composite import interleaved
from fe_ray.pipeline.framework_data import framework_kind
from fe_ray.schedule import Scheduler, get_current_items, get_signature_epochs
from fe_ray.util import MODES

#: Tags the entropy of batched ops apart from the per-sample augmentation stream and the shuffle.
_BATCH_OPS_TAG = 0x42415443

#: Epochs scanned for a second Batch op when the ops hold Schedulers other than EpochScheduler / RepeatScheduler.
_SCAN_EPOCHS = 100

Collate = Callable[[list[dict[str, Any]]], Mapping[str, Any]]


class OpSplit(NamedTuple):
    """The ops of one (mode, epoch, ds_id), split at its Batch op."""

    #: The ops before the Batch op (all of them without one), run on each sample.
    sample_ops: list[NumpyOp]
    #: The active Batch op, or None.
    batch: Batch | None
    #: The ops after the Batch op, run on each collated batch (``forward_batch``).
    batch_ops: list[NumpyOp]


class Stage(NamedTuple):
    """How the batches of one dataset are made: per-sample ops, collation, then batched ops."""

    #: Ops run on each sample.
    ops: list[NumpyOp]
    #: Ops run on each collated batch.
    batch_ops: list[NumpyOp]
    #: Samples per batch; None where the dataset sizes its own batches (or the Loader's ``batch_size`` applies).
    batch_size: int | None
    #: Drop the last, partial batch of each pass.
    drop_last: bool
    #: Padding of samples that differ in shape (see :func:`fe_ray.pipeline.collation.collate`).
    pad_value: float | None
    #: Makes a batch from the list of sample dicts instead of stacking them.
    collate_fn: Collate | None


def split_ops(ops: Iterable[NumpyOp], where: str) -> OpSplit:
    """Split the active ops of one context at its Batch op.

    Args:
        ops: The ops already resolved for one mode, epoch and ds_id, in order.
        where: The context, for the error message (e.g. "mode 'train', epoch 1").

    Raises:
        ValueError: If more than one Batch op is active there.
    """
    ops = list(ops)
    found = [op for op in ops if isinstance(op, Batch)]
    if len(found) > 1:
        raise ValueError(f"Pipeline ops hold {len(found)} Batch ops active in {where}: "
                         f"{', '.join(repr(op) for op in found)}; at most one Batch op may run per mode, epoch and "
                         "ds_id. Give them mode= / ds_id= filters that keep them apart, or schedule them in different "
                         "epochs with an EpochScheduler.")
    if not found:
        return OpSplit(ops, None, [])
    position = ops.index(found[0])
    return OpSplit(ops[:position], found[0], ops[position + 1:])


def check_batch_ops(ops: list[Any], contexts: Mapping[str, Iterable[str]]) -> None:
    """Check, when the Pipeline is built, that no (mode, ds_id, epoch) has two Batch ops (as FastEstimator does).

    Epochs are those where the scheduled Batch ops change (see :func:`~fe_ray.schedule.get_signature_epochs`); with
    a Scheduler of another kind, the first 100 epochs. The Loader checks every context again when it opens.

    Args:
        ops: The Pipeline's ops (plain ops and Schedulers of them).
        contexts: ``{mode: ds_ids}`` to check.

    Raises:
        ValueError: From :func:`split_ops`, naming the context and its Batch ops.
    """
    relevant = [op for op in ops if isinstance(op, Batch) or (isinstance(op, Scheduler) and any(
        isinstance(value, Batch) for value in op.get_all_values()))]
    if len(relevant) < 2:
        return
    for mode, ds_ids in contexts.items():
        for epoch in get_signature_epochs(relevant, _SCAN_EPOCHS, mode):
            for ds_id in ds_ids:
                split_ops(get_current_items(relevant, run_modes=mode, epoch=epoch, ds_id=ds_id),
                          describe(mode, epoch, ds_id))


def describe(mode: str, epoch: int, ds_id: str) -> str:
    """A context as error messages name it."""
    return f"mode {mode!r}, epoch {epoch}" + (f", ds_id {ds_id!r}" if ds_id else "")


def sized_modes(ops: list[Any]) -> set[str]:
    """The modes in which some Batch op that sets a ``batch_size`` may run (at any epoch, for any ds_id)."""
    sized = [op for op in get_current_items(ops) if isinstance(op, Batch) and op.batch_size is not None]
    return {mode for mode in MODES if get_current_items(sized, run_modes=mode)}


def make_stage(split: OpSplit, batch_size: int | None, drop_last: bool, pad_value: float | None,
               collate_fn: Collate | None) -> Stage:
    """Combine the Pipeline's batching settings with the split's Batch op.

    The caller resolves the batch size (the op's ``batch_size`` wins over the Pipeline's, but never applies to a
    dataset that sizes its own batches). The op's ``drop_last=True`` turns dropping on; its ``pad_value`` or
    ``collate_fn``, if either is given, replaces the Pipeline's pair.
    """
    op = split.batch
    if op is not None:
        drop_last = drop_last or op.drop_last
        if op.pad_value is not None or op.collate_fn is not None:
            pad_value, collate_fn = op.pad_value, op.collate_fn
    return Stage(split.sample_ops, split.batch_ops, batch_size, drop_last, pad_value, collate_fn)


def op_batch_size(split: OpSplit) -> int | None:
    """The batch size the split's Batch op sets, or None."""
    return None if split.batch is None else split.batch.batch_size


def batch_entropy(seed: int, mode: str, ds_id: str, epoch: int, index: int) -> tuple[int, ...]:
    """The entropy of batch ``index`` of an epoch, from which its random batched ops draw.

    A pure function of the batch's position, as batch ``index`` itself is (see
    :class:`~fe_ray.pipeline.loader.Loader`); tagged apart from the per-sample entropy of
    :func:`fe_ray.op.numpyop.randomness.pass_entropy`, which starts with the same seed and epoch.
    """
    return (_BATCH_OPS_TAG, int(seed), zlib.crc32(mode.encode()), zlib.crc32(ds_id.encode()), int(epoch), int(index))


def self_batching(data: Any) -> bool:
    """Whether every dataset ``data`` may be (one, or a Scheduler's) sizes its own batches: gives whole batches
    (``fe_batched``), is an InterleaveDataset whose batch sizes were set, or is a DataLoader / tf.data.Dataset."""
    values = data.get_all_values() if isinstance(data, Scheduler) else [data]
    return all(getattr(value, "fe_batched", False) or _sized_interleave(value) or framework_kind(value) is not None
               for value in values if value is not None)


def _sized_interleave(dataset: Any) -> bool:
    interleave = interleaved(dataset)
    return interleave is not None and interleave.explicit_batch_sizes is not None
