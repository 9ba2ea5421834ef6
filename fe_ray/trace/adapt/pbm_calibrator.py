"""PBMCalibrator: fit a Platt-binner marginal calibrator on an epoch's predictions, output the calibrated
predictions and save the calibration function for the Calibrate op."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.adapt.platt_binner import PlattBinnerMarginal
from fe_ray.trace.trace import Data, Trace

#: Equal-mass bins per class, as FastEstimator configures its calibrator.
NUM_BINS = 10


class PBMCalibrator(Trace):
    """Collect an epoch's labels and predicted class probabilities and fit a Platt-binner marginal calibrator on them.

    The calibrator (Kumar, Liang and Ma, "Verified Uncertainty Calibration", NeurIPS 2019, which bounds the
    calibration error of its outputs) maps each class's probability through a Platt scaling fitted for that class,
    then replaces it by the mean of its equal-mass bin (10 bins per class). At each epoch's end the trace fits it on
    that epoch's samples, writes the calibrated predictions of the whole epoch under ``output_name`` (unlogged, for
    later traces) and, with ``save_path``, pickles the calibration function there; give that path to
    :class:`~fe_ray.op.numpyop.univariate.calibrate.Calibrate` to calibrate test or inference predictions. The latest
    fitted calibrator is also available as :attr:`calibrator`.

    Predictions are ``(batch, num_classes)`` probabilities (apply a softmax to logits); labels are class indices
    (any shape holding one per sample) or one-hot rows. The epoch's samples so far are part of checkpoints, so a run
    resumed in the middle of an epoch fits the same calibrator.

    Differences from FastEstimator: the calibrator is fe_ray's numpy reimplementation of the
    ``uncertainty-calibration`` package's ``PlattBinnerMarginalCalibrator`` (the package is not needed), and the
    file holds a :class:`~fe_ray.trace.adapt.platt_binner.PlattBinnerMarginal` written with the standard ``pickle``
    module instead of the package's bound method written with ``dill`` (it loads with ``pickle.load`` wherever
    fe_ray is installed; FastEstimator's files need dill and the package). The file is replaced atomically and its
    folder created if missing. A class that is never (or always) the label in the epoch is calibrated to 0 (or 1),
    the limit of its Platt fit, where the package fails; one column or a flat vector of positive-class
    probabilities is accepted for a binary task; an epoch without samples fits and saves nothing. Invalid batches
    raise ValueError naming the key rather than an assertion.

    Args:
        true_key: Key of the ground-truth labels.
        pred_key: Key of the predicted probabilities.
        output_name: Key for the calibrated predictions; None uses ``'<pred_key>_calibrated'``.
        save_path: File to pickle the calibration function into at each epoch's end; None saves nothing.
        save_if_key: A key read at the epoch's end (e.g. BestModelSaver's ``'since_best_<metric>'``): the file is
            written only when its value is 0.
        mode: Mode(s) whose predictions are collected ('eval' by default; None for all, '!mode' excludes one).
        ds_id: Dataset id(s) to collect from; None for all, '!id' excludes one.

    Raises:
        ValueError: If ``save_if_key`` is given without ``save_path``; at a batch whose labels and predictions
            differ in number, whose probabilities are outside [0, 1] or whose labels are not classes of the
            predictions.
    """

    def __init__(self, true_key: str, pred_key: str, output_name: str | None = None, save_path: str | None = None,
                 save_if_key: str | None = None, mode: None | str | Iterable[str] = "eval",
                 ds_id: None | str | Iterable[str] = None) -> None:
        if save_if_key is not None and save_path is None:
            raise ValueError(f"PBMCalibrator save_if_key={save_if_key!r} decides when to write the calibrator, but "
                             "save_path is None; pass save_path='<file>' too, or drop save_if_key.")
        if output_name is None:
            output_name = f"{pred_key}_calibrated"
        inputs = [true_key, pred_key] + ([save_if_key] if save_if_key is not None else [])
        super().__init__(inputs=inputs, outputs=output_name, mode=mode, ds_id=ds_id)
        self.save_path = None if save_path is None else os.path.abspath(os.path.normpath(save_path))
        self.calibrator: PlattBinnerMarginal | None = None
        self._reset()

    @property
    def true_key(self) -> str:
        """Key of the ground truth."""
        return self.inputs[0]

    @property
    def pred_key(self) -> str:
        """Key of the predictions."""
        return self.inputs[1]

    @property
    def save_key(self) -> str | None:
        """The ``save_if_key``, or None."""
        return self.inputs[2] if len(self.inputs) == 3 else None

    def _reset(self) -> None:
        self.y_true: list[np.ndarray] = []
        self.y_pred: list[np.ndarray] = []

    def on_epoch_begin(self, data: Data) -> None:
        self._reset()

    def on_batch_end(self, data: Data) -> None:
        labels = np.asarray(to_number(data[self.true_key]))
        probs = np.asarray(to_number(data[self.pred_key]), dtype=np.float64)
        if labels.ndim > 1 and labels.shape[-1] > 1:
            labels = np.argmax(labels, axis=-1)
        labels = labels.reshape(-1)
        if probs.ndim not in (1, 2):
            raise ValueError(f"PBMCalibrator needs (batch, num_classes) probabilities under {self.pred_key!r}, got "
                             f"shape {list(probs.shape)}.")
        if probs.shape[0] != labels.size:
            raise ValueError(f"PBMCalibrator got {labels.size} labels ({self.true_key!r}) but {probs.shape[0]} "
                             f"predictions ({self.pred_key!r}); they must describe the same samples.")
        if not np.all((probs >= 0.0) & (probs <= 1.0)):  # also refuses NaN
            raise ValueError(f"PBMCalibrator needs probabilities in [0, 1] under {self.pred_key!r}, got values from "
                             f"{np.nanmin(probs):.6g} to {np.nanmax(probs):.6g} (or NaN); apply a softmax to logits.")
        classes = 2 if probs.ndim == 1 or probs.shape[1] == 1 else probs.shape[1]
        if labels.size and (not np.array_equal(labels, np.round(labels)) or labels.min() < 0
                            or labels.max() >= classes):
            raise ValueError(f"PBMCalibrator needs class indices in 0..{classes - 1} (or one-hot rows) under "
                             f"{self.true_key!r} for predictions with {classes} classes, got values such as "
                             f"{np.unique(labels)[:5].tolist()}.")
        if self.y_pred and self.y_pred[0].shape[1:] != probs.shape[1:]:
            raise ValueError(f"PBMCalibrator got predictions of shape {list(probs.shape[1:])} per sample under "
                             f"{self.pred_key!r} after {list(self.y_pred[0].shape[1:])} earlier in the epoch; every "
                             "batch must have the same classes.")
        self.y_true.append(labels.astype(np.int64))
        self.y_pred.append(probs)

    def on_epoch_end(self, data: Data) -> None:
        if not self.y_pred or not sum(part.shape[0] for part in self.y_pred):
            return  # nothing to fit on
        labels, probs = np.concatenate(self.y_true), np.concatenate(self.y_pred)
        self.calibrator = PlattBinnerMarginal.fit(probs, labels, num_bins=NUM_BINS)
        if self.save_path and (self.save_key is None or float(np.mean(to_number(data[self.save_key]))) == 0):
            self._save(self.calibrator)
        data.write_without_log(self.outputs[0], self.calibrator(probs))

    def _save(self, calibrator: PlattBinnerMarginal) -> None:
        assert self.save_path is not None
        os.makedirs(os.path.dirname(self.save_path), exist_ok=True)
        # Written beside the file and moved over it: a reader (or a killed run) never sees half a file.
        partial = f"{self.save_path}.partial"
        with open(partial, "wb") as file:
            pickle.dump(calibrator, file)
        os.replace(partial, self.save_path)
        print(f"FastEstimator-PBMCalibrator: Calibrator written to {self.save_path}", flush=True)

    def state_dict(self) -> dict[str, Any]:
        # Joined copies: a checkpoint must not share arrays with lists that later batches keep growing.
        return {"y_true": np.concatenate(self.y_true) if self.y_true else np.zeros(0, np.int64),
                "y_pred": np.concatenate(self.y_pred) if self.y_pred else None,
                "calibrator": None if self.calibrator is None else self.calibrator.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._reset()
        labels = np.array(state["y_true"], dtype=np.int64).reshape(-1)
        if state["y_pred"] is not None and labels.size:
            self.y_true = [labels]
            self.y_pred = [np.array(state["y_pred"], dtype=np.float64)]
        calibrator = state.get("calibrator")
        self.calibrator = None if calibrator is None else PlattBinnerMarginal.from_state(calibrator)
