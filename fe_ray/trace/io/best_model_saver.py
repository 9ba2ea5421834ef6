"""BestModelSaver: keep the weights of the best epoch according to a metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fe_ray.backend import load_model, save_model
from fe_ray.trace.best_value import check_best_mode, epoch_value, improves, loss_metric, worst_value
from fe_ray.trace.io.model_saver import check_architecture_saving, check_weights_name
from fe_ray.trace.trace import Data, Trace


class BestModelSaver(Trace):
    """Save ``model`` as ``<save_dir>/<model_name>_best_<metric>`` (or ``<save_dir>/<weights_name>``) whenever an
    evaluation epoch improves ``metric``.

    Logs ``since_best_<metric>`` (epochs since the last improvement) and ``<save_best_mode>_<metric>`` (the best
    value so far) after every evaluation epoch. A ``metric`` that no trace writes (a network output that is not a
    loss, say) is averaged over each evaluation epoch by the Estimator's essential traces, as a loss is.

    Args:
        model: A model built with :func:`fe_ray.build`.
        save_dir: Folder for the weight file (created if missing); None tracks and logs the best value but saves
            nothing (and so has nothing to load with ``load_best_final``).
        metric: The evaluation key to watch; None uses the model's loss (the ``loss_name`` of its UpdateOp).
        save_best_mode: 'min' or 'max': whether smaller or larger values are better.
        weights_name: The whole file name (without the framework's extension) in place of
            ``<model_name>_best_<metric>``, e.g. ``"best"`` saves ``best.pt``; None keeps the default.
        load_best_final: Load the best weights back into the model when training ends.
        save_architecture: TF only: also save the whole model as ``<name>.keras`` for
            ``keras.models.load_model`` (a subclassed model Keras cannot describe as a config: as the inference
            SavedModel folder ``<name>``; see :func:`fe_ray.backend.save_model`).

    Raises:
        ValueError: If ``save_best_mode`` is invalid, ``metric`` is None and the model has no unique loss,
            ``weights_name`` is neither None nor a non-empty string, or ``save_architecture`` is set for a torch
            model.
    """

    def __init__(self, model: Any, save_dir: str | None, metric: str | None = None, save_best_mode: str = "min",
                 weights_name: str | None = None, load_best_final: bool = False,
                 save_architecture: bool = False) -> None:
        check_weights_name(weights_name, "BestModelSaver")
        check_architecture_saving(model, save_architecture, "BestModelSaver")
        check_best_mode("BestModelSaver", "save_best_mode", save_best_mode)
        if metric is None:
            metric = loss_metric(model, "BestModelSaver")
        super().__init__(inputs=metric, outputs=[f"since_best_{metric}", f"{save_best_mode}_{metric}"], mode="eval")
        self.fe_monitor_names.add(metric)
        self.model = model
        self.save_dir = save_dir
        self.metric = metric
        self.save_best_mode = save_best_mode
        self.weights_name = weights_name
        self.load_best_final = load_best_final
        self.save_architecture = save_architecture
        self.model_path: str | None = None
        self.since_best = 0
        self.best = worst_value(save_best_mode)

    def on_epoch_end(self, data: Data) -> None:
        value = epoch_value(data, self.metric)
        if improves(value, self.best, self.save_best_mode):
            self.best = value
            self.since_best = 0
            if self.save_dir:
                self.system.sync_models()
                name = self.weights_name or f"{self.model.model_name}_best_{self.metric}"
                self.model_path = save_model(self.model, self.save_dir, model_name=name,
                                             save_architecture=self.save_architecture)
                print(f"FastEstimator-BestModelSaver: Saved model to {self.model_path}", flush=True)
        else:
            self.since_best += 1
        data.write_with_log(self.outputs[0], self.since_best)
        data.write_with_log(self.outputs[1], _in_dtype_of(data.get(self.metric), self.best))

    def on_end(self, data: Data) -> None:
        if self.load_best_final and self.model_path:
            print(f"FastEstimator-BestModelSaver: Restoring model from {self.model_path}", flush=True)
            load_model(self.model, self.model_path)
            self.system.push_models()

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "since_best": self.since_best, "model_path": self.model_path}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = float(state["best"])
        self.since_best = int(state["since_best"])
        self.model_path = state.get("model_path")


def _in_dtype_of(raw: Any, best: float) -> Any:
    """``best`` in the float dtype of the metric's logged value (a float32 loss stays float32), as FastEstimator
    logs the metric's own value: a CSV or Summary then reads the same number for the metric and its best."""
    if isinstance(raw, (np.floating, np.ndarray)) and np.issubdtype(raw.dtype, np.floating) and raw.ndim == 0:
        return raw.dtype.type(best)
    return best
