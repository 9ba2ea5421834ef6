"""Pipeline.benchmark: how many batches per second a Pipeline delivers, and which ops take the time.

Progress lines keep FastEstimator 1.7's wording (``FastEstimator-Benchmark (Train): Step: 100, Epoch: 1,
Steps/sec: 812.45``), as fe_ray's other console output keeps FastEstimator's prefixes for existing log parsers.
"""

from __future__ import annotations

import numbers
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp, forward_numpyop, wrapped_ops
from fe_ray.op.numpyop.randomness import RNG_KEY, op_generator, pass_entropy, sample_entropy
from fe_ray.pipeline.batching import batch_entropy
from fe_ray.pipeline.collation import owned_sample
from fe_ray.pipeline.framework_data import FrameworkLoader
from fe_ray.pipeline.loader import Loader
from fe_ray.util import check_epoch

if TYPE_CHECKING:
    from fe_ray.pipeline.pipeline import Pipeline

PREFIX = "FastEstimator-Benchmark"
BENCHMARK_MODES = ("train", "eval", "test")
COLLATE_ROW = "<Collating Batch>"


def benchmark(pipeline: Pipeline, mode: str = "train", epoch: int = 1, ds_id: str | None = None,
              num_steps: int = 1000, log_interval: int = 100, detailed: bool = True) -> None:
    """Time ``num_steps`` batches of ``mode`` at ``epoch`` and print the speed; see :meth:`Pipeline.benchmark`.

    Raises:
        ValueError: For an invalid mode, epoch, ds_id, num_steps or log_interval, or a mode without data.
        TypeError: If ``detailed`` is not a bool or ``ds_id`` is not a str.
    """
    _check_steps(num_steps, "num_steps")
    _check_steps(log_interval, "log_interval")
    if not isinstance(detailed, bool):
        raise TypeError(f"detailed must be True (also print each op's share of the time) or False, got {detailed!r}.")
    if mode not in BENCHMARK_MODES:
        raise ValueError(f"Pipeline.benchmark mode must be one of {list(BENCHMARK_MODES)}, got {mode!r}.")
    check_epoch(epoch)
    available = pipeline.get_ds_ids(epoch, mode)
    if not available:
        raise ValueError(f"Pipeline has no {mode} data at epoch {epoch}; modes with data there: "
                         f"{sorted(pipeline.get_modes(epoch))}.")
    if ds_id is not None and not isinstance(ds_id, str):
        raise TypeError(f"ds_id must be a str or None (benchmark every dataset of the mode), got {ds_id!r}.")
    if ds_id is not None and ds_id not in available:
        raise ValueError(f"Pipeline has no ds_id {ds_id!r} in mode {mode!r} at epoch {epoch}; available: "
                         f"{available}, or None for all of them.")
    for current in available if ds_id is None else [ds_id]:
        # track=False: the benchmark is a side look at the data, like get_results; it must not move the position a
        # checkpoint records, or a run resumed after benchmarking would skip batches.
        with pipeline(mode, epoch, current, steps_per_epoch=int(num_steps), track=False) as loader:
            _time_steps(loader, int(log_interval))
            # A DataLoader / tf.data.Dataset runs no Pipeline ops: there is no breakdown to print (as FastEstimator).
            if detailed and isinstance(loader, Loader):
                _print_breakdown(loader, min(int(log_interval), int(num_steps)))
        print("\n", flush=True)  # a blank gap between datasets, as FastEstimator prints


def _check_steps(value: Any, name: str) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"Pipeline.benchmark {name} must be an int >= 1, got {value!r}; e.g. num_steps=1000, "
                         "log_interval=100.")


def _time_steps(loader: Loader | FrameworkLoader, log_interval: int) -> None:
    mode, ds_id = loader.mode.capitalize(), loader.ds_id
    dataset_text = f"Dataset: {ds_id}, " if ds_id else ""
    start = time.perf_counter()
    for step, _ in enumerate(loader, start=1):
        if step % log_interval == 0:
            now = time.perf_counter()
            rate = log_interval / max(now - start, 1e-12)
            print(f"{PREFIX} ({mode}): {dataset_text}Step: {step}, Epoch: {loader.epoch}, Steps/sec: {rate:.2f}",
                  flush=True)
            start = now


def _print_breakdown(loader: Loader, num_batches: int) -> None:
    """Run the loader's first ``num_batches`` batches again, op by op, and print each op's share of the time.

    The batches are rebuilt the way the Loader builds them (same samples, same per-sample random generators), but
    each op is timed on its own; the samples are not handed out, so nothing is tracked. Rows: the per-sample ops,
    the collation, then the ops after a Batch op (timed on whole batches), as FastEstimator orders them.
    """
    ops, after = loader.all_ops, loader.all_batch_ops
    row_of = {id(op): row for row, op in enumerate(ops)}
    row_of.update({id(op): len(ops) + 1 + row for row, op in enumerate(after)})
    visits = np.zeros(len(ops) + 1 + len(after), dtype=np.int64)  # row len(ops) is the collation
    seconds = np.zeros(len(ops) + 1 + len(after))
    for index in range(min(num_batches, loader.num_batches)):
        with loader.globals_of(index):  # user code draws as in training and leaves the caller's generators
            _time_batch(loader, index, row_of, visits, seconds)
    mode, ds_id = loader.mode.capitalize(), loader.ds_id
    dataset_text = f", Dataset: {ds_id}" if ds_id else ""
    print(f"\nBreakdown of time taken by Pipeline Operations (Mode: {mode}, Epoch: {loader.epoch}{dataset_text})\n",
          flush=True)
    print(format_breakdown(ops, visits, seconds, after), flush=True)


def _time_batch(loader: Loader, index: int, row_of: dict[int, int], visits: np.ndarray, seconds: np.ndarray) -> None:
    """Rebuild batch ``index`` op by op, adding each op's (and the collation's) time and visits to its row."""
    sample_ops, ds_id, entries = loader.sample_plan(index)
    stage = loader.stage(index)
    random = any(op.is_random for op in sample_ops)
    state = {"mode": loader.mode, "epoch": loader.epoch, "ds_id": ds_id}
    samples = []
    for data_pass, sample_index, item in entries:
        sample = owned_sample(item, f"Dataset item {sample_index}")
        entropy = sample_entropy(pass_entropy(loader.seed, loader.mode, loader.ds_id, loader.epoch, data_pass),
                                 sample_index) if random else None
        for position, op in enumerate(sample_ops):
            # The generator the Loader gives this op at this position, so random ops draw as they do in training.
            op_state = {**state, RNG_KEY: op_generator(entropy, position)} \
                if entropy is not None and op.is_random else state
            begin = time.perf_counter()
            forward_numpyop([op], sample, op_state)
            seconds[row_of[id(op)]] += time.perf_counter() - begin
            visits[row_of[id(op)]] += 1
        samples.append(sample)
    collation = len(loader.all_ops)  # the collation's row comes after the per-sample ops'
    begin = time.perf_counter()
    batch = loader.collate_samples(samples, stage)
    seconds[collation] += time.perf_counter() - begin
    visits[collation] += 1
    entropy = batch_entropy(loader.seed, loader.mode, loader.ds_id, loader.epoch, index)
    for position, op in enumerate(stage.batch_ops):
        op_state = {**state, RNG_KEY: op_generator(entropy, position)} if op.is_random else state
        begin = time.perf_counter()
        forward_numpyop([op], batch, op_state, batched=True)
        seconds[row_of[id(op)]] += time.perf_counter() - begin
        visits[row_of[id(op)]] += 1


def op_name(op: Any) -> str:
    """An op's class name, with the op(s) a meta op (Sometimes, OneOf) wraps in parentheses."""
    name = type(op).__name__
    inner = wrapped_ops(op)
    if inner:
        name += " (" + ", ".join(type(sub).__name__ for sub in inner) + ")"
    return name


def format_breakdown(ops: list[NumpyOp], visits: np.ndarray, seconds: np.ndarray,
                     batch_ops: list[NumpyOp] | None = None) -> str:
    """The breakdown table: per op (and the collation) its keys, ms per visit, visits and share of the time.

    Args:
        ops: The timed per-sample ops, in order.
        visits: Per op, then for the collation, then per batched op, how often it ran.
        seconds: Per op, then for the collation, then per batched op, the total time it took.
        batch_ops: The timed ops after a Batch op, in order.
    """
    rows = [[op_name(op), ", ".join(op.inputs), ", ".join(op.outputs)] for op in ops]
    rows.append([COLLATE_ROW, "", ""])
    rows += [[op_name(op), ", ".join(op.inputs), ", ".join(op.outputs)] for op in batch_ops or []]
    total = float(np.sum(seconds)) or 1.0
    per_visit = 1000 * seconds / np.maximum(visits, 1)
    for row, count, ms, share in zip(rows, visits, per_visit, seconds / total):
        row += [f"{ms:.3f}", str(int(count)), f"{100 * share:.2f}%"]
    header = ["Op", "Inputs", "Outputs", "ms / Visit", "Visits", "Time (Total)"]
    widths = [max(len(row[col]) for row in [header, *rows]) for col in range(len(header))]

    def line(cells: list[str]) -> str:
        return " : ".join([*(cell.ljust(width) for cell, width in zip(cells[:-1], widths)),
                           cells[-1].rjust(widths[-1])])

    return "\n".join([line(header), "-" * len(line(header)), *(line(row) for row in rows)])
