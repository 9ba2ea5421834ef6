"""ModelSaver: save a model's weights every few training epochs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

from fe_ray.backend import get_framework, save_model
from fe_ray.trace.trace import Data, Trace

# The TF backend's file names (fe_ray.backend.tf_io, not imported here: it loads Keras).
_TF_WEIGHTS_SUFFIX = ".weights.h5"
_TF_ARCHITECTURE_SUFFIX = ".keras"


class ModelSaver(Trace):
    """Save ``model`` as ``<save_dir>/<weights_name>_epoch_<N>`` at the end of every ``frequency``-th training epoch
    (``weights_name`` defaults to the model's ``model_name``).

    The file format is the framework's (torch: ``.pt`` state dict; TensorFlow: Keras ``.weights.h5``) and loads
    with :func:`fe_ray.backend.load_model` or ``fe_ray.build(..., weights_path=...)``.

    Args:
        model: A model built with :func:`fe_ray.build`.
        save_dir: Folder for the weight files (created if missing); None saves nothing (handy for smoke tests that
            keep the trace list of the real run).
        frequency: Save every this many epochs.
        max_to_keep: Keep only the newest N files (older ones are deleted); None or 0 keeps all.
        weights_name: The file name prefix in place of the model's name, e.g. ``"classifier"`` saves
            ``classifier_epoch_3.pt``; None uses ``model.model_name``.
        save_architecture: TF only: also save the whole model as ``<name>.keras`` for
            ``keras.models.load_model`` (a subclassed model Keras cannot describe as a config: as the inference
            SavedModel folder ``<name>``; see :func:`fe_ray.backend.save_model`).

    Raises:
        ValueError: If ``frequency`` is not a positive int, ``max_to_keep`` is not None or a non-negative int,
            ``weights_name`` is neither None nor a non-empty string, or ``save_architecture`` is set for a torch
            model.
    """

    def __init__(self, model: Any, save_dir: str | None, frequency: int = 1, max_to_keep: int | None = None,
                 weights_name: str | None = None, save_architecture: bool = False) -> None:
        if not isinstance(frequency, int) or isinstance(frequency, bool) or frequency < 1:
            raise ValueError(f"ModelSaver frequency must be a positive int (epochs), got {frequency!r}.")
        if max_to_keep is not None and (not isinstance(max_to_keep, int) or isinstance(max_to_keep, bool)
                                        or max_to_keep < 0):
            raise ValueError(f"ModelSaver max_to_keep must be a non-negative int (0 or None: keep all files), got "
                             f"{max_to_keep!r}.")
        check_weights_name(weights_name, "ModelSaver")
        check_architecture_saving(model, save_architecture, "ModelSaver")
        super().__init__(mode="train")
        self.weights_name = weights_name
        self.model = model
        self.save_architecture = save_architecture
        self.save_dir = save_dir
        self.frequency = frequency
        self.max_to_keep = max_to_keep or None  # 0 keeps every file, as None does
        self.saved_paths: list[str] = []

    def on_epoch_end(self, data: Data) -> None:
        if not self.save_dir or self.system.epoch_idx % self.frequency != 0:
            return
        self.system.sync_models()
        prefix = self.model.model_name if self.weights_name is None else self.weights_name
        name = f"{prefix}_epoch_{self.system.epoch_idx}"
        path = save_model(self.model, self.save_dir, model_name=name, save_architecture=self.save_architecture)
        print(f"FastEstimator-ModelSaver: Saved model to {path}", flush=True)
        self.saved_paths.append(path)
        if self.max_to_keep is not None:
            while len(self.saved_paths) > self.max_to_keep:
                old = self.saved_paths.pop(0)
                if os.path.exists(old) and old != path:
                    for stale in (old, *self._architecture_files(old)):
                        if os.path.isfile(stale):
                            os.remove(stale)
                        elif os.path.isfile(os.path.join(stale, "saved_model.pb")):
                            shutil.rmtree(stale)  # the SavedModel an unserialisable model was exported as
                    # FastEstimator's wording, so that logs read (and are parsed) the same after switching.
                    print(f"FastEstimator-ModelSaver: Removed model {old} due to file number exceeding max_to_keep",
                          flush=True)

    def _architecture_files(self, weights_path: str) -> list[str]:
        """The whole model saved beside a TF weights file: ``<name>.keras`` beside ``<name>.weights.h5``, or the
        SavedModel folder ``<name>`` for a model Keras cannot save as a ``.keras`` archive."""
        if not self.save_architecture or not weights_path.endswith(_TF_WEIGHTS_SUFFIX):
            return []
        stem = weights_path[:-len(_TF_WEIGHTS_SUFFIX)]
        return [stem + _TF_ARCHITECTURE_SUFFIX, stem]

    def state_dict(self) -> dict[str, Any]:
        return {"saved_paths": list(self.saved_paths)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.saved_paths = list(state.get("saved_paths", []))


def check_architecture_saving(model: Any, save_architecture: bool, trace: str) -> None:
    """Refuse ``save_architecture`` for a torch model when the trace is made, not at its first save.

    Raises:
        ValueError: Naming the trace, the model and the fix.
    """
    if save_architecture and get_framework(model) == "torch":
        raise ValueError(f"{trace}(save_architecture=True) cannot save torch model "
                         f"{getattr(model, 'model_name', type(model).__name__)!r}: only TF models are saved with "
                         "their architecture. Pass save_architecture=False (the weights file is still written).")


def check_weights_name(weights_name: str | None, trace: str) -> None:
    """Refuse a ``weights_name`` that is neither None nor a non-empty string.

    Raises:
        ValueError: Naming the trace, the value and the fix.
    """
    if weights_name is not None and (not isinstance(weights_name, str) or not weights_name):
        raise ValueError(f"{trace} weights_name must be None (use the model's name) or a non-empty string, got "
                         f"{weights_name!r}.")
