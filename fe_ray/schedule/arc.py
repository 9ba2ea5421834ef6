"""ARC: FastEstimator's learned learning-rate controller, behind ``LRScheduler(model, lr_fn="arc")``.

Every ``frequency`` epochs the controller looks at the last three cycles of training losses, evaluation losses and
learning rates, feeds them (each stretched to 100 points per cycle and standardised) to a small pretrained Keras
network, and multiplies the learning rate by 1.618, 1.0 or 0.618 according to the network's choice.

The network's weights are FastEstimator's published ``arc.h5``. fe_ray does not ship them: they are read from
``weights_path``, else from FastEstimator's cache (``~/fastestimator_data/arc_model/arc.h5``, where FastEstimator
itself keeps them, so a machine that ran FastEstimator's ARC already has them), else downloaded there from
FastEstimator's URL as FastEstimator does. A machine without internet access needs the file copied there first.

The history the controller has gathered is checkpointed (:meth:`ARC.state_dict`), so a resumed run makes the choices
the uninterrupted run would have made. The Keras network always runs on the CPU of the driver, whatever framework
the trained model uses: TensorFlow must be installed (``pip install tensorflow-cpu``).
"""

from __future__ import annotations

import importlib.util
import numbers
import os
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

ARC_URL = "https://github.com/fastestimator-util/fastestimator-misc/raw/master/resource/arc.h5"
"""Where FastEstimator publishes the controller's weights."""

MULTIPLIERS = (1.618, 1.0, 0.618)
"""The learning-rate factor for each of the network's three classes."""

_CYCLES = 3  # the controller sees the last three cycles ...
_POINTS = 100  # ... each stretched to this many points
_WINDOW = _CYCLES * _POINTS


def default_weights_path() -> str:
    """FastEstimator's cache location of the controller's weights (``~/fastestimator_data/arc_model/arc.h5``)."""
    return os.path.join(str(Path.home()), "fastestimator_data", "arc_model", "arc.h5")


def stretch(values: Iterable[float], size: int, nearest: bool = False) -> np.ndarray:
    """Resample a 1-D series to ``size`` points as a ``(size, 1)`` float32 column.

    This is the resampling FastEstimator's ARC gets from OpenCV's ``resize`` of an ``(n, 1)`` column: linear
    interpolation between sample centres (a destination point ``i`` reads the source at ``(i + 0.5) * n / size - 0.5``,
    clamped to the ends), or, with ``nearest``, the source point ``floor(i * n / size)``.
    """
    series = np.asarray(list(values), dtype=np.float32).reshape(-1)
    if series.size == 0:
        raise ValueError("ARC cannot resample an empty series; at least one value per cycle is needed.")
    scale = series.size / size
    if nearest:
        index = np.minimum(np.floor(np.arange(size) * scale).astype(np.int64), series.size - 1)
        return series[index].reshape(size, 1)
    position = (np.arange(size, dtype=np.float64) + 0.5) * scale - 0.5
    return np.interp(position, np.arange(series.size), series).astype(np.float32).reshape(size, 1)


def standardise(column: np.ndarray) -> np.ndarray:
    """``(x - mean) / max(std, 1e-7)`` over the whole column, in float32."""
    column = column.astype(np.float32)
    return ((column - column.mean()) / max(float(column.std()), 1e-7)).astype(np.float32)


def _left_pad(column: np.ndarray, value: float) -> np.ndarray:
    """Pad a column at its start to the controller's window (cycles not seen yet count as ``value``)."""
    missing = _WINDOW - column.shape[0]
    return np.pad(column, ((missing, 0), (0, 0)), constant_values=value) if missing > 0 else column


def _merge(cycles: Iterable[Any]) -> tuple[list[float], int]:
    """Join the cycles' values into one list; also count the cycles with nothing recorded yet (``None``)."""
    merged: list[float] = []
    missing = 0
    for cycle in cycles:
        if isinstance(cycle, list):
            merged.extend(cycle)
        elif cycle:
            merged.append(cycle)
        else:
            missing += 1
    return merged, missing


def build_controller() -> Any:
    """The controller's Keras network (input: 300 time points of train loss, eval loss and learning rate)."""
    import keras

    return keras.Sequential([
        keras.Input(shape=(_WINDOW, 3)),
        keras.layers.Conv1D(filters=32, kernel_size=5, activation="relu"),
        keras.layers.MaxPooling1D(pool_size=2),
        keras.layers.Conv1D(filters=64, kernel_size=5, activation="relu"),
        keras.layers.MaxPooling1D(pool_size=2),
        keras.layers.LSTM(64, return_sequences=True),
        keras.layers.LSTM(64),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(3, activation="softmax"),
    ])


def fetch_weights(path: str, url: str = ARC_URL) -> None:
    """Download the weights to ``path`` (written to a temporary file first, so a failed download leaves nothing).

    Raises:
        FileNotFoundError: If the download fails; the message says where to put the file by hand.
    """
    # Imported here: urllib.request alone adds ~20 ms to importing fe_ray, for a download almost no run makes.
    import shutil
    import tempfile
    import urllib.request

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    print(f"FastEstimator-ARC: downloading the controller's weights to {path}")
    handle, partial = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out)
        os.replace(partial, path)
    except OSError as error:
        raise FileNotFoundError(
            f"ARC needs FastEstimator's controller weights, and downloading them from {url} failed ({error}). "
            f"Copy arc.h5 from a machine with internet access to {path}, or pass its location as "
            f"ARC(weights_path=...).") from error
    finally:
        if os.path.exists(partial):
            os.remove(partial)


class ARC:
    """FastEstimator's adaptive learning-rate controller; use it as ``LRScheduler(model, lr_fn="arc")`` or
    ``LRScheduler(model, lr_fn=ARC(frequency=...))``.

    Args:
        frequency: Decide every this many epochs.
        weights_path: The controller's weights (FastEstimator's ``arc.h5``); None looks in FastEstimator's cache
            (:func:`default_weights_path`) and downloads them there when missing.
        download: Whether a missing file in the cache may be downloaded.

    Raises:
        ValueError: If ``frequency`` is not a positive int.
        FileNotFoundError: If ``weights_path`` does not exist, or the cached file is missing and cannot be
            downloaded.
        ImportError: If TensorFlow (which runs the controller) is not installed.
    """

    def __init__(self, frequency: int = 3, weights_path: str | None = None, download: bool = True) -> None:
        if not isinstance(frequency, numbers.Integral) or isinstance(frequency, bool) or frequency < 1:
            raise ValueError(f"ARC frequency must be a positive int (decide every N epochs), got {frequency!r}.")
        if importlib.util.find_spec("tensorflow") is None:
            raise ImportError("ARC runs a small Keras network on the CPU, so it needs TensorFlow: "
                              "pip install tensorflow-cpu.")
        self.frequency = int(frequency)
        if weights_path is not None:
            if not os.path.isfile(weights_path):
                raise FileNotFoundError(f"ARC weights_path {weights_path!r} is not a file; pass FastEstimator's "
                                        f"arc.h5, or None to use (and fill) {default_weights_path()}.")
        else:
            weights_path = default_weights_path()
            if not os.path.isfile(weights_path):
                if not download:
                    raise FileNotFoundError(f"ARC weights not found at {weights_path}; copy FastEstimator's arc.h5 "
                                            f"there (from {ARC_URL}) or pass download=True.")
                fetch_weights(weights_path)
        self.weights_path = weights_path
        self.train_loss_one_cycle: list[float] = []
        self.eval_loss_one_cycle: list[float] = []
        self.all_train_loss: deque[Any] = deque([None] * _CYCLES, maxlen=_CYCLES)
        self.all_eval_loss: deque[Any] = deque([None] * _CYCLES, maxlen=_CYCLES)
        self.all_train_lr: deque[Any] = deque([None] * _CYCLES, maxlen=_CYCLES)
        self._model: Any = None  # built on the first decision: only the driver ever runs it

    # --- the history (FastEstimator's method names, so code written against its ARC keeps working) ---

    def accumulate_single_train_loss(self, train_loss: float) -> None:
        """Record one training step's loss."""
        self.train_loss_one_cycle.append(float(train_loss))

    def accumulate_single_eval_loss(self, eval_loss: float) -> None:
        """Record one evaluation epoch's loss."""
        self.eval_loss_one_cycle.append(float(eval_loss))

    def accumulate_all_lrs(self, lr: float) -> None:
        """Record the learning rate at the end of a cycle."""
        self.all_train_lr.append(float(lr))

    def gather_multiple_eval_losses(self) -> None:
        """Close the current cycle's evaluation losses."""
        self.all_eval_loss.append(self.eval_loss_one_cycle)
        self.eval_loss_one_cycle = []

    def gather_multiple_train_losses(self) -> None:
        """Close the current cycle's training losses."""
        self.all_train_loss.append(self.train_loss_one_cycle)
        self.train_loss_one_cycle = []

    # --- the decision ---

    def controller_inputs(self) -> np.ndarray:
        """The ``(1, 300, 3)`` input the controller decides on: train loss, eval loss, learning rate.

        Raises:
            ValueError: If no cycle has been gathered yet.
        """
        train_loss, missing = _merge(self.all_train_loss)
        if not train_loss:
            raise ValueError("ARC has no complete training cycle to decide on yet.")
        size = (_CYCLES - missing) * _POINTS
        train = _left_pad(standardise(stretch(train_loss, size)), 0.0)
        eval_loss, eval_missing = _merge(self.all_eval_loss)
        if eval_loss:  # standardised before the stretch, unlike the training loss (FastEstimator's order)
            evals = _left_pad(stretch(standardise(np.asarray(eval_loss)), (_CYCLES - eval_missing) * _POINTS,
                                      nearest=True), 0.0)
        else:
            evals = np.zeros((_WINDOW, 1), dtype=np.float32)
        lrs, lr_missing = _merge(self.all_train_lr)
        rates = np.asarray(lrs, dtype=np.float64) / lrs[0]
        rates = _left_pad(stretch(rates, (_CYCLES - lr_missing) * _POINTS, nearest=True), 1.0)
        return np.concatenate((train, evals, rates), axis=1)[None].astype(np.float32)

    def model(self) -> Any:
        """The controller network with the weights loaded (built on first use)."""
        if self._model is None:
            import tensorflow as tf

            with tf.device("cpu:0"):  # a few KB of weights: never worth a GPU's memory
                model = build_controller()
                model.load_weights(self.weights_path)
            self._model = model
        return self._model

    def predict_next_multiplier(self) -> float:
        """The factor (1.618, 1.0 or 0.618) to multiply the learning rate by now."""
        import tensorflow as tf

        inputs = self.controller_inputs()
        with tf.device("cpu:0"):
            probabilities = np.asarray(self.model()(inputs, training=False))
        return MULTIPLIERS[int(np.argmax(probabilities))]

    # --- checkpoints and pickling ---

    def state_dict(self) -> dict[str, Any]:
        """The gathered history (lists of floats), enough to resume with the same decisions."""
        return {"train_loss_one_cycle": list(self.train_loss_one_cycle),
                "eval_loss_one_cycle": list(self.eval_loss_one_cycle),
                "all_train_loss": list(self.all_train_loss), "all_eval_loss": list(self.all_eval_loss),
                "all_train_lr": list(self.all_train_lr)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.train_loss_one_cycle = list(state["train_loss_one_cycle"])
        self.eval_loss_one_cycle = list(state["eval_loss_one_cycle"])
        for key in ("all_train_loss", "all_eval_loss", "all_train_lr"):
            setattr(self, key, deque(state[key], maxlen=_CYCLES))

    def __getstate__(self) -> dict[str, Any]:
        # The Keras network is rebuilt from the weights file on first use; it is not picklable across processes.
        state = dict(self.__dict__)
        state["_model"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


__all__ = ["ARC", "ARC_URL", "MULTIPLIERS", "build_controller", "default_weights_path", "stretch"]
