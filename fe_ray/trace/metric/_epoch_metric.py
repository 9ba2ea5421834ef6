"""Shared machinery of the metric traces that reduce each batch to sufficient statistics and compute their value
once per epoch (CalibrationError, MeanAveragePrecision, BleuScore).

A subclass says how to turn one batch into its contribution (:meth:`EpochMetric.reduce_batch`), how to add a
contribution to an epoch's totals (:meth:`EpochMetric.add`), how to compute the logged values from totals
(:meth:`EpochMetric.compute`) and how totals become checkpoint state and back (:meth:`EpochMetric.pack`,
:meth:`EpochMetric.unpack`). This base keeps one set of totals over all batches and, when a mode has several datasets,
one per dataset, so that ``<key>|<ds_id>`` values are logged next to the overall ones (FastEstimator's ``per_ds``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fe_ray.trace.trace import Data, Trace, per_ds_keys


class EpochMetric(Trace):
    """Base class: accumulate per-batch statistics over an epoch, overall and per dataset, and log values at its end.

    Args:
        true_key: Key of the ground truth.
        pred_key: Key of the predictions.
        outputs: Key(s) the trace logs at each epoch's end.
        mode: Mode(s) in which to compute it.
        ds_id: Dataset id(s) in which to compute it; None for all.
        per_ds: With several datasets in a mode, also log ``<key>|<ds_id>`` per dataset (never when an output name
            contains '|').

    Raises:
        ValueError: If an output name is empty or not a string.
    """

    def __init__(self, true_key: str, pred_key: str, outputs: str | Iterable[str], mode: None | str | Iterable[str],
                 ds_id: None | str | Iterable[str], per_ds: bool) -> None:
        names = [outputs] if isinstance(outputs, str) else list(outputs)
        bad = [name for name in names if not isinstance(name, str) or not name]
        if bad:
            raise ValueError(f"{type(self).__name__} output_name must hold non-empty strings, got {bad!r}.")
        super().__init__(inputs=[true_key, pred_key], outputs=names, mode=mode, ds_id=ds_id)
        # A '|' in a name already reads as '<key>|<ds_id>': a per-dataset key would be ambiguous.
        self.per_ds = bool(per_ds) and not any("|" in name for name in names)
        self._reset()

    @property
    def true_key(self) -> str:
        """Key of the ground truth."""
        return self.inputs[0]

    @property
    def pred_key(self) -> str:
        """Key of the predictions."""
        return self.inputs[1]

    # Hooks for subclasses.

    def empty(self) -> Any:
        """New, empty totals."""
        raise NotImplementedError

    def reduce_batch(self, y_true: Any, y_pred: Any) -> Any:
        """One batch's contribution to the totals (tensors of either framework or numpy arrays)."""
        raise NotImplementedError

    def add(self, totals: Any, part: Any) -> None:
        """Add a batch's contribution to ``totals`` in place."""
        raise NotImplementedError

    def compute(self, totals: Any) -> list[Any]:
        """The values to log (one per output key, in order) from an epoch's (or a dataset's) totals."""
        raise NotImplementedError

    def pack(self, totals: Any) -> dict[str, Any]:
        """``totals`` as checkpoint state: copies that later batches cannot change."""
        raise NotImplementedError

    def unpack(self, state: Mapping[str, Any]) -> Any:
        """Totals from :meth:`pack`'s state (copies, so the checkpoint stays untouched)."""
        raise NotImplementedError

    def has_data(self, totals: Any) -> bool:
        """Whether ``totals`` hold anything to compute a value from (an epoch without batches logs nothing)."""
        return True

    # Trace events.

    def _reset(self) -> None:
        self.totals: Any = self.empty()
        self.ds_totals: dict[str, Any] = {}

    def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
        outputs = super().get_outputs(ds_ids)
        if self.per_ds:
            outputs += per_ds_keys(self.outputs, ds_ids)
        return outputs

    def on_epoch_begin(self, data: Data) -> None:
        self._reset()

    def on_batch_end(self, data: Data) -> None:
        self.ingest(data)

    def ingest(self, data: Data) -> tuple[Any, str]:
        """Reduce the batch in ``data`` and add it to the totals (and to its dataset's).

        Returns:
            ``(part, suffix)``: the batch's contribution, and ``"|<ds_id>"`` when the batch is counted per dataset
            ('' otherwise), for a subclass writing per-instance values.
        """
        part = self.reduce_batch(data[self.true_key], data[self.pred_key])
        self.add(self.totals, part)
        # '' is the only dataset of a mode without a ds_id dict: the overall value says it all.
        ds_id = getattr(getattr(self, "system", None), "ds_id", "")
        if self.per_ds and ds_id:
            if ds_id not in self.ds_totals:
                self.ds_totals[ds_id] = self.empty()
            self.add(self.ds_totals[ds_id], part)
            return part, f"|{ds_id}"
        return part, ""

    def on_epoch_end(self, data: Data) -> None:
        for ds_id, totals in self.ds_totals.items():
            if self.has_data(totals):
                for key, value in zip(self.outputs, self.compute(totals)):
                    data.write_with_log(f"{key}|{ds_id}", value)
        if self.has_data(self.totals):
            for key, value in zip(self.outputs, self.compute(self.totals)):
                data.write_with_log(key, value)

    def state_dict(self) -> dict[str, Any]:
        return {"totals": self.pack(self.totals),
                "ds_totals": {ds_id: self.pack(totals) for ds_id, totals in self.ds_totals.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._reset()
        self.totals = self.unpack(state["totals"])
        self.ds_totals = {str(ds_id): self.unpack(totals) for ds_id, totals in state.get("ds_totals", {}).items()}
