"""Calibrate: apply a calibration function (such as the one PBMCalibrator saves) to predictions."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp


class Calibrate(NumpyOp):
    """Replace predicted probabilities by ``calibration_fn(probabilities)``, usually as a Network pop after the
    model, with the function a :class:`~fe_ray.trace.adapt.pbm_calibrator.PBMCalibrator` saved.

    ``calibration_fn`` is a callable taking a batch of predictions (``(batch, num_classes)``) and returning the
    calibrated batch, or the path of a file holding one pickled. A path is read the first time the op runs (not
    during the Estimator's warmup), so the file need not exist when training starts: a PBMCalibrator of the same
    run may write it during evaluation before ``Estimator.test()`` uses it. In a Pipeline the op sees one sample,
    which it calibrates as a batch of one.

    Difference from FastEstimator: the file is read with the standard ``pickle`` module, which reads what fe_ray's
    PBMCalibrator writes; FastEstimator's files are written with ``dill`` and hold an ``uncertainty-calibration``
    object, so they load only where both packages are installed. With distributed pops, the path must be readable
    where the pops run.

    Args:
        inputs: Key(s) of the predictions to calibrate.
        outputs: Key(s) for the calibrated predictions (one per input).
        calibration_fn: A calibration function, or the path of a pickled one.
        mode: Mode(s) to run in ('test' and 'infer' by default; None for all, '!mode' excludes one).
        ds_id: Dataset id(s) to run for; None for all, '!id' excludes one.

    Raises:
        ValueError: If ``inputs`` and ``outputs`` name a different number of keys, or (when first run) the file does
            not hold a callable.
        TypeError: If ``calibration_fn`` is neither a path nor a callable.
        FileNotFoundError: When first run, if the file does not exist.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 calibration_fn: str | os.PathLike[str] | Callable[[np.ndarray], np.ndarray],
                 mode: None | str | Iterable[str] = ("test", "infer"),
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"Calibrate writes each input's calibrated values to the output at the same position, "
                             f"but got {len(self.inputs)} input(s) {self.inputs} and {len(self.outputs)} output(s) "
                             f"{self.outputs}; pass as many outputs as inputs.")
        if isinstance(calibration_fn, (str, os.PathLike)):
            calibration_fn = os.path.abspath(os.path.normpath(os.fspath(calibration_fn)))
        elif not callable(calibration_fn):
            raise TypeError(f"Calibrate calibration_fn must be a callable or the path of a pickled one, got "
                            f"{type(calibration_fn).__name__}.")
        self.in_list, self.out_list = True, True
        self.calibration_fn: str | Callable[[np.ndarray], np.ndarray] = calibration_fn

    def _function(self) -> Callable[[np.ndarray], np.ndarray]:
        """The calibration function, read from its file on first use."""
        if isinstance(self.calibration_fn, str):
            path = self.calibration_fn
            if not os.path.exists(path):
                raise FileNotFoundError(f"Calibrate found no calibration function at {path}; run the PBMCalibrator "
                                        "that saves it (save_path) before this op runs, or fix the path.")
            with open(path, "rb") as file:
                function = pickle.load(file)  # the user chose this file: unpickling it runs its code
            if not callable(function):
                raise ValueError(f"Calibrate expected a pickled calibration function in {path}, found a "
                                 f"{type(function).__name__}.")
            print(f"FastEstimator-Calibrate: calibration function loaded from {path}", flush=True)
            self.calibration_fn = function
        return self.calibration_fn

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[np.ndarray]:
        batch = self.forward_batch([np.expand_dims(np.asarray(item), axis=0) for item in data], state)
        return [np.squeeze(np.asarray(item), axis=0) for item in batch]

    def forward_batch(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        if isinstance(self.calibration_fn, str) and state.get("warmup", False):
            return list(data)  # the file may not exist yet (a PBMCalibrator of this run writes it later)
        function = self._function()
        return [function(np.asarray(item)) for item in data]
