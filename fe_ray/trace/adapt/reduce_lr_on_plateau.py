"""ReduceLROnPlateau: cut a model's learning rate when an evaluation value stops improving."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_lr, set_lr
from fe_ray.trace.best_value import check_best_mode, epoch_value, improves, loss_metric, worst_value
from fe_ray.trace.trace import Data, Trace


class ReduceLROnPlateau(Trace):
    """Multiply the learning rate of ``model`` by ``factor`` once ``metric`` has not improved for ``patience``
    evaluation epochs in a row, never going below ``min_lr``.

    After each evaluation epoch the metric is compared with the best value so far (strictly smaller with
    ``best_mode="min"``, strictly larger with "max"). An improvement resets the count of epochs without one; when the
    count reaches ``patience`` the rate is reduced, the new rate is logged as ``<model_name>_lr``, and counting
    starts over. The new rate is rounded to float32, as FastEstimator does.

    With a network on replicas the new rate is sent to them at once (with the driver's model state), so it is the
    one they train with from the next step, and the one a checkpoint written in the same event holds.

    Args:
        model: A model built with :func:`fe_ray.build` (with an optimizer).
        metric: The evaluation key to watch; None uses the model's loss (the ``loss_name`` of its UpdateOp). A key
            that no trace writes (a network output that is not a loss) is averaged over each evaluation epoch, as
            losses are.
        patience: How many evaluation epochs without improvement trigger a reduction (0 and 1 both reduce after
            every epoch without one).
        factor: What the rate is multiplied by, in (0, 1).
        best_mode: 'min' or 'max': whether smaller or larger values of ``metric`` are better.
        min_lr: The rate is never reduced below this (a reduction from below it sets it to ``min_lr``).

    Raises:
        ValueError: If ``best_mode`` is not 'min' or 'max', ``factor`` is not in (0, 1), ``patience`` is not a
            non-negative int, ``min_lr`` is negative, or ``metric`` is None and the model has no unique loss.
    """

    def __init__(self, model: Any, metric: str | None = None, patience: int = 10, factor: float = 0.1,
                 best_mode: str = "min", min_lr: float = 1e-6) -> None:
        check_best_mode("ReduceLROnPlateau", "best_mode", best_mode)
        if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or not 0.0 < factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau factor must be a number strictly between 0 and 1 (the new rate is "
                             f"factor * the old one), got {factor!r}; e.g. factor=0.1.")
        if isinstance(patience, bool) or not isinstance(patience, numbers.Integral) or patience < 0:
            raise ValueError(f"ReduceLROnPlateau patience must be a non-negative int (evaluation epochs), got "
                             f"{patience!r}.")
        if isinstance(min_lr, bool) or not isinstance(min_lr, numbers.Real) or not min_lr >= 0:
            raise ValueError(f"ReduceLROnPlateau min_lr must be a non-negative number, got {min_lr!r}.")
        if metric is None:
            metric = loss_metric(model, "ReduceLROnPlateau")
        super().__init__(inputs=metric, outputs=f"{model.model_name}_lr", mode="eval")
        self.fe_monitor_names.add(metric)  # a network output that is not a loss gets averaged over evaluation
        self.model = model
        self.metric = metric
        self.patience = int(patience)
        self.factor = float(factor)
        self.best_mode = best_mode
        self.min_lr = float(min_lr)
        self.wait = 0
        self.best = worst_value(best_mode)

    def on_epoch_end(self, data: Data) -> None:
        value = epoch_value(data, self.metric)
        if improves(value, self.best, self.best_mode):
            self.best = value
            self.wait = 0
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        # The cut rate in float32, as FastEstimator: what a Keras optimizer's variable holds, so torch and TF train
        # with one rate; the floor min_lr exactly as given, as there.
        new_lr = max(self.min_lr, float(np.float32(self.factor * get_lr(self.model))))
        set_lr(self.model, new_lr)
        # A distributed network normally forwards a rate set on the driver with its next step. Here a trace later
        # in this same event (a RestoreWizard checkpoint, a BestModelSaver) may first copy the replicas' state,
        # old rate included, back over the driver's; pushing now makes the replicas hold the new rate before that.
        # The driver's weights are current at an evaluation epoch's end (copied back when training left its
        # context), so the push changes nothing else. In process this does nothing.
        self.system.push_models()
        self.wait = 0
        data.write_with_log(self.outputs[0], np.float32(new_lr))  # FastEstimator logs the float32
        print(f"FastEstimator-ReduceLROnPlateau: learning rate reduced to {new_lr}", flush=True)

    def state_dict(self) -> dict[str, Any]:
        return {"wait": self.wait, "best": self.best}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.wait = int(state["wait"])
        self.best = float(state["best"])
