"""CSVLogger: write the logged values of a run (and optionally per-sample values) to a CSV file."""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.summary.summary import ValWithError
from fe_ray.trace.trace import Data, Trace, to_loggable
from fe_ray.util import to_list

#: The columns every row starts with; runs with an ``instance_id_key`` put an "instance_id" column first.
BASE_COLUMNS = ("mode", "step", "epoch")


def csv_value(value: Any) -> str:
    """Render ``value`` for one CSV cell: strings as they are, tensors and arrays as numpy prints them (several
    elements separated by ';', on one line, so a cell never holds the file's ',' or a line break)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, ValWithError):  # "(y_min; y; y_max)", as FastEstimator writes it
        return str(value).replace(",", ";")
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        array = np.asarray(to_loggable(value))
    except Exception:  # noqa: BLE001 - an object numpy cannot hold is written as Python prints it
        return str(value)
    if array.size > 1:
        # Rows of a matrix would still go on lines of their own: joined, so one cell is one line of the file.
        return np.array2string(array, separator=";", max_line_width=sys.maxsize).replace("\n", "")
    if array.dtype.kind == "S" and array.size == 1:  # bytes held in a tensor: the text, not b'...'
        return array.reshape(-1)[0].decode("utf-8", errors="replace")
    return str(array)


class CSVLogger(Trace):
    """Record logged values in the CSV file ``filename``, rewritten after every epoch of every mode.

    Rows have columns ``mode, step, epoch`` followed by one column per recorded key:

    * one row per epoch end of each mode with the values logged in that event (metrics, averaged losses, ...);
    * in training, one row per logging step (every ``log_steps`` steps and step 1) with the values of that step;
    * with ``instance_id_key``, one row per sample and batch for each per-sample value (a value with one entry per
      sample: a per-instance log of a trace, or a batch key named in ``monitor_names``), identified by the sample's
      id in an extra first column "instance_id". These rows come before the aggregate rows in the file.

    ``Estimator.test()`` appends its rows to the file a ``fit()`` wrote (as FastEstimator does), so one file holds a
    whole experiment. A row is recorded only when it holds at least one value. Keys missing from a row are left
    empty. The rows so far are part of checkpoints, so a resumed run writes the same file as an uninterrupted one
    (with ``instance_id_key`` they grow with every sample seen, and checkpoints with them).

    Args:
        filename: The CSV file (its folder is created if missing); an existing file is replaced by ``fit()``.
        monitor_names: The keys to record; None records every logged value. Include ``"*"`` to record every logged
            value plus extra keys (e.g. ``["*", "y_pred"]``). Epoch rows hold logged values only; training log-step
            rows (without ``instance_id_key``) take a key that was not logged from the batch.
        instance_id_key: The batch key holding each sample's id; with it, per-sample rows are recorded too.
        mode: Mode(s) in which to record; None for all.
    """

    def __init__(self, filename: str, monitor_names: None | str | Iterable[str] = None,
                 instance_id_key: str | None = None, mode: None | str | Iterable[str] = None) -> None:
        names = [str(key) for key in to_list(monitor_names)]
        inputs = names or ["*"]
        if instance_id_key is not None:
            inputs = [*inputs, instance_id_key]
        super().__init__(inputs=inputs, mode=mode)
        self.filename = filename
        self.instance_id_key = instance_id_key
        self.base_columns = (("instance_id",) if instance_id_key is not None else ()) + BASE_COLUMNS
        self._reset()

    def _reset(self) -> None:
        self.agg_rows: list[dict[str, Any]] = []
        self.agg_columns: list[str] = list(self.base_columns)
        self.ins_rows: list[dict[str, Any]] = []
        self.ins_columns: list[str] = list(self.base_columns)

    def _keys(self, available: Iterable[str]) -> list[str]:
        """The keys of a row: the named ones in their order, then (with '*') the others available, in the order they
        were logged (sorted keys would scatter related columns; FastEstimator's order varies between runs)."""
        skip = {"*", self.instance_id_key}
        keys = [key for key in self.inputs if key not in skip]
        if "*" in self.inputs:
            keys += [key for key in available if key not in skip and key not in keys]
        return keys

    def _position(self) -> dict[str, Any]:
        step = self.system.global_step
        return {"mode": self.system.mode, "step": "" if step is None else step, "epoch": self.system.epoch_idx}

    def _add_row(self, values: Mapping[str, str]) -> None:
        for key in values:
            if key not in self.agg_columns:
                self.agg_columns.append(key)
        if any(values.values()):  # a row with no value at all says nothing
            self.agg_rows.append({**self._position(), **values})

    def on_begin(self, data: Data) -> None:
        # Every fit() / test() starts over; a RestoreWizard, which runs after this trace, then loads the rows of
        # the run it resumes.
        self._reset()

    def on_batch_end(self, data: Data) -> None:
        if self.instance_id_key is not None:
            self._record_instances(data)
        system = self.system
        step = system.global_step or 0
        if system.mode == "train" and system.log_steps and (step % system.log_steps == 0 or step == 1):
            logs = data.read_logs()
            # With per-sample rows, batch values stay out of the aggregate rows (they would repeat those rows).
            source: Mapping[str, Any] = logs if self.instance_id_key is not None else data
            self._add_row({key: csv_value(source.get(key, "")) for key in self._keys(logs)})

    def _record_instances(self, data: Data) -> None:
        per_instance = data.read_per_instance_logs()
        ids = np.asarray(to_loggable(data[self.instance_id_key])).reshape(-1)
        keys = self._keys(per_instance)
        columns: list[Sequence[Any] | None] = []
        for key in keys:
            value = per_instance.get(key, data.get(key))
            value = to_loggable(value) if value is not None else None
            # Only values with one entry per sample belong in per-sample rows (not a batch's mean loss).
            if isinstance(value, np.ndarray) and value.ndim > 0 and value.shape[0] == ids.size:
                columns.append(value)
            elif isinstance(value, (list, tuple)) and len(value) == ids.size:
                columns.append(value)
            else:
                columns.append(None)
        if all(column is None for column in columns):
            return
        for key in keys:
            if key not in self.ins_columns:
                self.ins_columns.append(key)
        position = self._position()
        for index, sample_id in enumerate(ids):
            row = {"instance_id": csv_value(sample_id), **position}
            row.update({key: "" if column is None else csv_value(column[index]) for key, column in zip(keys, columns)})
            self.ins_rows.append(row)

    def on_epoch_end(self, data: Data) -> None:
        logs = data.read_logs()
        self._add_row({key: csv_value(logs.get(key, "")) for key in self._keys(logs)})
        # Written at every epoch end rather than once at the end, so a long run can be followed (and a killed one
        # leaves its epochs so far).
        self._save()

    def _save(self) -> None:
        columns = list(self.ins_columns) + [key for key in self.agg_columns if key not in self.ins_columns]
        rows = [*self.ins_rows, *self.agg_rows]
        if self.system.mode == "test" and os.path.exists(self.filename):
            # test() appends to what fit() wrote: the earlier rows come first, read back as text.
            with open(self.filename, newline="", encoding="utf-8") as file:
                reader = csv.DictReader(file)
                earlier = list(reader)
                header = list(reader.fieldnames or [])
            columns = header + [key for key in columns if key not in header]
            rows = [*earlier, *rows]
        folder = os.path.dirname(os.path.abspath(self.filename))
        os.makedirs(folder, exist_ok=True)
        # Written beside the file and moved over it: a run killed while writing leaves the previous version whole.
        partial = f"{self.filename}.partial"
        with open(partial, "w", newline="", encoding="utf-8") as file:
            writer = csv.DictWriter(file, fieldnames=columns, restval="", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(partial, self.filename)

    def state_dict(self) -> dict[str, Any]:
        return {"agg_rows": [dict(row) for row in self.agg_rows], "agg_columns": list(self.agg_columns),
                "ins_rows": [dict(row) for row in self.ins_rows], "ins_columns": list(self.ins_columns)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.agg_rows = [dict(row) for row in state["agg_rows"]]
        self.agg_columns = list(state["agg_columns"])
        self.ins_rows = [dict(row) for row in state.get("ins_rows", [])]
        self.ins_columns = list(state.get("ins_columns", self.base_columns))
