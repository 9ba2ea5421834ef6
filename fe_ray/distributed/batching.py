"""Cutting a batch into one slice per replica, and merging the replicas' outputs back.

Pure numpy, no Ray: the coordinator (:mod:`fe_ray.distributed.coordinator`) calls these on the driver, and they
are tested in-process.

Merging follows two rules, applied leaf by leaf inside dicts, lists and tuples (a model returning several outputs
under one key). Arrays whose leading dimension is each replica's slice size are concatenated in rank (= input)
order; an output without a batch axis whose length happens to equal every slice size cannot be told apart from a
per-sample one and is concatenated too (as FastEstimator's multi-GPU gathering concatenates every non-scalar
output). Other floating-point values (scalar losses, metrics) get a NaN-aware mean weighted by slice size: the
weighted mean over the replicas whose value is finite (element-wise), so one replica's NaN / inf does not hide the
others'; it is logged as a warning naming the key and the rank(s), and only when every replica is non-finite is the
merged value non-finite. Integer and boolean values keep their dtype: the value the replicas agree on (a flag, an
epoch), else their weighted mean rounded to it (a boolean: the value of most samples), with a warning once per key.
Replicas holding only padding (weight 0) never contribute, not even a NaN. Anything else (a flattened or masked
output whose length differs between replicas, a string) is the first active rank's value; where the replicas' values
differ that is logged once per key as a warning.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.slicer import split_bounds

logger = logging.getLogger("fe_ray.distributed.coordinator")  # the name users filter the NaN warnings by


def _to_array(value: Any) -> Any:
    if isinstance(value, np.ndarray) or value is None:
        return value
    # Each step's batch reaches the split as the torch CPU tensors the Estimator made from the Pipeline's arrays
    # (sharing their memory): one call hands the array back, where the backend's generic path costs ~4 us per key.
    # GPU, bfloat16 and grad-tracking tensors, TF tensors and other objects take the generic path below.
    if getattr(value, "is_cpu", False) and getattr(value, "requires_grad", True) is False:
        try:
            return value.numpy()
        except (TypeError, RuntimeError):  # e.g. bfloat16, which numpy lacks: to_number widens it
            pass
    if np.isscalar(value):
        return value
    try:
        from fe_ray.backend import to_number

        return to_number(value)
    except Exception:  # noqa: BLE001 - leave unknown objects as they are
        return value


def batch_size_of(arrays: Mapping[str, Any]) -> int | None:
    """The batch size: the most common leading dimension among the arrays (None if none has an axis). Arrays of
    another length are per-batch constants (a class-weight vector), which every replica gets whole.

    Raises:
        ValueError: If two leading dimensions are equally common: which arrays hold the samples is then unknown
            (in process, such a batch runs as in FastEstimator, whose ops then meet the mismatch).
    """
    sizes = {key: int(np.shape(v)[0]) for key, v in arrays.items() if np.ndim(v) >= 1}
    if not sizes:
        return None
    counts = Counter(sizes.values())
    if len(counts) == 1:  # the usual batch: every array has the same leading dimension
        return next(iter(counts))
    top = max(counts.values())
    tied = [size for size, count in counts.items() if count == top]
    if len(tied) > 1:
        raise ValueError(f"Ragged batch: the keys the network reads have different batch sizes {sizes}, none the "
                         "most common, so the replicas' slices cannot be cut; every per-sample array needs the same "
                         "leading (batch) dimension. Batch all keys together in the Pipeline (resize or pad "
                         "variable-length samples to one shape); an array of another length (a per-batch constant) "
                         "goes whole to every replica.")
    return tied[0]


def split_for_replicas(batch: Mapping[str, Any], keys: Iterable[str],
                       num_replicas: int) -> tuple[list[dict[str, Any]], list[int], int]:
    """Cut the ``keys`` of ``batch`` into one contiguous slice per replica.

    Arrays whose leading dimension is the batch size are sliced (``split_bounds``, as ``ChunkSlicer(n_chunks=N)``);
    other values go whole to every replica. No replica gets a single sample out of a batch of several: a model in
    training mode with BatchNorm cannot take one (torch raises), while the same batch trains in-process; so a
    batch smaller than twice ``num_replicas`` (a last, partial batch) uses fewer replicas. Replicas without samples
    run the first two samples (one if that is all) as padding, with weight 0. A batch without a batch axis runs
    whole on rank 0 (weight 1).

    Returns:
        (slices, samples per replica, total samples).
    """
    data = {key: _to_array(batch[key]) for key in sorted(keys) if key in batch}
    size = batch_size_of(data)
    if size is None or size == 0:
        return [dict(data) for _ in range(num_replicas)], [1] + [0] * (num_replicas - 1), 1
    bounds = split_bounds(size, min(num_replicas, max(1, size // 2)))
    slices, n_local = [], []
    for rank in range(num_replicas):
        start, stop, weight = (*bounds[rank], None) if rank < len(bounds) else (0, min(2, size), 0)
        slices.append({key: value[start:stop] if np.ndim(value) >= 1 and np.shape(value)[0] == size else value
                       for key, value in data.items()})
        n_local.append(stop - start if weight is None else 0)
    return slices, n_local, size


def slice_nbytes(piece: Mapping[str, Any]) -> int:
    """Bytes of the arrays in one replica's slice (other values count as small)."""
    return sum(int(getattr(value, "nbytes", 0)) for value in piece.values())


def unchanged_since(batch: Mapping[str, Any], snapshot: Mapping[str, Any]) -> bool:
    """Whether ``batch`` holds exactly the values ``snapshot`` recorded (the same objects under the same keys).

    Slices put ahead of a step (step pipelining) are reused only then: a trace's ``on_batch_begin`` may replace a
    batch value, or add one, before the step runs. The dict itself may be another one (the network's run_step
    makes a new dict of the same tensors).
    """
    return len(batch) == len(snapshot) and all(key in snapshot and value is snapshot[key]
                                               for key, value in batch.items())


def merge_outputs(results: list[dict[str, Any]],
                  n_local: list[int]) -> tuple[dict[str, Any], dict[str, dict[int, Any]]]:
    """Merge the replicas' outputs (see the module docstring); dicts, lists and tuples of outputs (a model
    returning several) are merged leaf by leaf.

    Returns:
        (merged outputs, per-replica values of the top-level keys reduced by a weighted mean).
    """
    active = [rank for rank, count in enumerate(n_local) if count > 0]
    if len(active) == 1:
        return dict(results[active[0]]), {}
    weights = [n_local[rank] for rank in active]
    merged: dict[str, Any] = {}
    per_replica: dict[str, dict[int, Any]] = {}
    for key in results[active[0]]:
        merged[key] = _merge([results[rank].get(key) for rank in active], weights, active, key, per_replica)
    return merged, per_replica


def _merge(values: list[Any], weights: list[int], active: list[int], name: str,
           per_replica: dict[str, dict[int, Any]] | None) -> Any:
    """One output's merged value from every active replica's ``values`` (``per_replica`` is None below the top)."""
    if all(isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == w for v, w in zip(values, weights)) \
            and _same_trailing_shape(values):
        return np.concatenate(values, axis=0)
    first = values[0]
    if isinstance(first, Mapping) and all(isinstance(v, Mapping) and v.keys() == first.keys() for v in values):
        return {sub: _merge([v[sub] for v in values], weights, active, f"{name}[{sub!r}]", None) for sub in first}
    if isinstance(first, (list, tuple)) and all(type(v) is type(first) for v in values):
        if isinstance(first, list) and all(len(v) == w for v, w in zip(values, weights)) \
                and not any(isinstance(item, (np.ndarray, Mapping, list, tuple)) for item in first):
            return [item for v in values for item in v]  # a per-sample list (ids, file names)
        if all(len(v) == len(first) for v in values):  # a model's several outputs
            items = [_merge([v[i] for v in values], weights, active, f"{name}[{i}]", None) for i in range(len(first))]
            return items if isinstance(first, list) else tuple(items)
    if _numeric_same_shape(values):
        if np.asarray(first).dtype.kind != "f":
            return _merge_integers(values, weights, active, name, per_replica)
        mean = _weighted_mean(values, weights)
        if per_replica is not None:
            per_replica[name] = dict(zip(active, values))
        bad = [rank for rank, value in zip(active, values) if not np.all(np.isfinite(np.asarray(value)))]
        if bad and len(bad) < len(active):
            logger.warning("fe_ray: %r is not finite on replica rank(s) %s (values %s); the merged value is the "
                           "weighted mean of the finite replicas.", name, bad,
                           {rank: value for rank, value in zip(active, values) if rank in bad})
        return mean
    if not _all_same(values):
        _warn_once(name, "fe_ray: output %r has no batch axis the replicas' values can be joined on (shapes %s for "
                   "slices of %s samples) and is not a number of one shape to average; rank %d's value stands "
                   "for the batch. Give it a leading batch axis, reduce it to a scalar in the op, or compute it "
                   "in a trace.", name, [np.shape(value) for value in values], weights, active[0])
    return first


def _merge_integers(values: list[Any], weights: list[int], active: list[int], name: str,
                    per_replica: dict[str, dict[int, Any]] | None) -> Any:
    """An integer / boolean output of one shape on every replica, in its own dtype (as in process, whatever the
    step): the value they agree on (a flag, an epoch), else their weighted mean rounded to the dtype (a boolean:
    the value of most samples), with a warning once per key."""
    if per_replica is not None:
        per_replica[name] = dict(zip(active, values))
    first = values[0]
    if _all_same(values):
        return first
    dtype = np.asarray(first).dtype
    _warn_once(name, "fe_ray: integer / boolean output %r differs between replicas (%s); the merged value is their "
               "mean weighted by slice size, rounded to %s (a whole-batch count would be their sum; each replica's "
               "value is in network.replica_outputs). Output a per-sample value, or a float whose batch mean is "
               "meant.", name, dict(zip(active, (np.asarray(value).tolist() for value in values))), dtype)
    mean = np.asarray(_weighted_mean(values, weights))
    merged = (mean >= 0.5 if dtype.kind == "b" else np.rint(mean)).astype(dtype)
    return merged if isinstance(first, np.ndarray) else merged[()]


#: Outputs already warned about by :func:`_merge` (once per key and process: the warning would repeat every step).
_UNMERGED: set[str] = set()


def _warn_once(name: str, message: str, *args: Any) -> None:
    if name not in _UNMERGED:
        _UNMERGED.add(name)
        logger.warning(message, *args)


def _all_same(values: list[Any]) -> bool:
    """Whether every value equals the first (numpy arrays by shape and content)."""
    first = values[0]
    try:
        return all(np.array_equal(np.asarray(value), np.asarray(first)) if isinstance(value, np.ndarray)
                   or isinstance(first, np.ndarray) else bool(value == first) for value in values[1:])
    except Exception:  # noqa: BLE001 - values that cannot be compared are taken to differ
        return False


def _same_trailing_shape(values: list[np.ndarray]) -> bool:
    return len({v.shape[1:] for v in values}) == 1


def _numeric_same_shape(values: list[Any]) -> bool:
    try:
        arrays = [np.asarray(v) for v in values if v is not None]
    except ValueError:  # ragged nested sequences
        return False
    return (len(arrays) == len(values) and all(a.dtype.kind in "fiub" for a in arrays)
            and len({a.shape for a in arrays}) == 1)


def _weighted_mean(values: list[Any], weights: list[int]) -> Any:
    """Element-wise mean weighted by ``weights`` over the finite values only (all non-finite: the plain mean)."""
    arrays = [np.asarray(v).astype(np.float64) for v in values]
    stacked = np.stack(arrays)
    weight = np.asarray(weights, dtype=np.float64).reshape((-1,) + (1,) * arrays[0].ndim)
    finite = np.isfinite(stacked)
    kept = (weight * finite).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        nan_aware = np.where(finite, stacked * weight, 0.0).sum(axis=0) / np.where(kept > 0, kept, 1.0)
        plain = (stacked * weight).sum(axis=0) / weight.sum()
    acc = np.where(kept > 0, nan_aware, plain)
    original = np.asarray(values[0])
    dtype = original.dtype if original.dtype.kind == "f" else np.float64
    out = np.asarray(acc).astype(dtype)
    return out if out.ndim else out[()] if not isinstance(values[0], np.ndarray) else out


__all__ = ["batch_size_of", "merge_outputs", "slice_nbytes", "split_for_replicas", "unchanged_since"]
