"""Saliency: a model's saliency masks (vanilla gradients, SmoothGrad, integrated gradients) on a fixed set of
samples, drawn at the end of each epoch so their change over training can be followed."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.backend import get_framework, to_number, to_tensor
from fe_ray.trace.trace import Data, Trace
from fe_ray.trace.xai._common import as_numpy, channel_last, invert_mapping, label_texts
from fe_ray.util import check_count, to_list
from fe_ray.util.img_data import BatchDisplay, GridDisplay
from fe_ray.xai.saliency import SaliencyNet


def _check_integrating(integrating: Any) -> int | tuple[int, int]:
    pair = isinstance(integrating, tuple)
    values = integrating if pair else (integrating,)
    if (pair and len(values) != 2) or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0
                                          for v in values):
        raise ValueError(f"Saliency integrating must be an int >= 0 or a tuple (n_integration, n_smoothing) of two "
                         f"ints >= 0, got {integrating!r}.")
    return (int(values[0]), int(values[1])) if pair else int(values[0])


class Saliency(Trace):
    """Draw a model's saliency masks on the same samples at the end of every epoch (see
    :class:`~fe_ray.xai.SaliencyNet` for the masks).

    The samples are fixed the first time the trace runs in a mode: the first batch of that epoch (``samples``
    None), the first ``samples`` samples of the epoch (an int), or the given ``{model_input_key: model_input}`` (a
    dict, used from the start; it may also hold ``class_key``). At each epoch's end the model's masks on them are
    drawn as a :class:`~fe_ray.util.img_data.GridDisplay` written (without logging) under ``outputs[0]``, for an
    ImageSaver or ImageViewer listing that key. Its columns: the true classes (``class_key``), the predicted class
    of each model output (argmax; both named through ``label_mapping``), per model input its images and the images
    with the most refined mask blended in (``0.3 * (mask * (x - min) + min) + 0.3 * x + 0.4 * mask * (max - min) +
    min``, min and max over the samples), then per output key its plain masks and, when enabled, the smoothed,
    integrated and smoothed-integrated ones ('inferno' colour map). The driver's model copy is brought up to date
    first (``system.sync_models()``), as with replicas it trains elsewhere.

    Differences from FastEstimator 1.7: with several model inputs, each is blended with its own mask (the i-th
    output key; FastEstimator blends every input with every mask); a mode without a batch writes nothing; labels
    given as one-hot rows show their argmax; a label missing from ``label_mapping`` is shown as its value; bad
    arguments raise ValueError. The collected samples are part of checkpoints (as numpy; they are turned back into
    the model's framework's tensors when used).

    Args:
        model: A model built with ``fe.build``.
        model_inputs: The key(s) of the model's inputs.
        model_outputs: The key(s) of the model's outputs (class scores).
        class_key: The key of the samples' true classes, or None.
        label_mapping: ``{class_string: model_output_value}`` naming the classes.
        outputs: The key(s) of the masks, one per model input; the display is written to the first.
        samples: None, how many samples to keep (an int >= 1), or the samples themselves (a dict).
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.
        smoothing: How many noisy copies SmoothGrad averages (0: no smoothed masks).
        integrating: How many points integrated gradients use (0: none), or ``(n_integration, n_smoothing)`` to
            smooth the integrated masks with another number of copies than ``smoothing``.

    Raises:
        ValueError: If ``samples``, ``smoothing`` or ``integrating`` is invalid, a samples dict lacks a model input,
            ``class_key`` is not a str, or ``label_mapping`` is not a dict of hashable values; or (from SaliencyNet)
            no model input or output key is given.
        TypeError: If ``model`` was not built with ``fe.build``.
    """

    def __init__(self, model: Any, model_inputs: str | Sequence[str], model_outputs: str | Sequence[str],
                 class_key: str | None = None, label_mapping: Mapping[str, Any] | None = None,
                 outputs: str | list[str] = "saliency", samples: None | int | Mapping[str, Any] = None,
                 mode: None | str | Iterable[str] = ("eval", "test"), ds_id: None | str | Iterable[str] = None,
                 smoothing: int = 25, integrating: int | tuple[int, int] = (100, 6)) -> None:
        if class_key is not None and (not isinstance(class_key, str) or not class_key):
            raise ValueError(f"Saliency class_key must be a key (str) or None, got {class_key!r}.")
        self.class_key = class_key
        self.model_inputs = [str(key) for key in to_list(model_inputs)]
        self.model_outputs = [str(key) for key in to_list(model_outputs)]
        super().__init__(inputs=to_list(class_key) + self.model_inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.smoothing = check_count(smoothing, "Saliency smoothing", minimum=0)
        self.integrating = _check_integrating(integrating)
        self.label_mapping = invert_mapping(label_mapping, "Saliency")
        self.n_required: int | None = None
        self.given_samples: dict[str, np.ndarray] | None = None
        if isinstance(samples, Mapping):
            missing = [key for key in self.inputs if key not in samples]
            if missing:
                raise ValueError(f"Saliency samples must hold the keys {self.inputs} (model inputs and class_key), "
                                 f"but lack {missing}.")
            self.given_samples = {key: as_numpy(samples[key]) for key in self.inputs}
        elif samples is not None:
            self.n_required = check_count(samples, "Saliency samples (a count, a dict of samples or None)", minimum=1)
        self.salnet = SaliencyNet(model=model, model_inputs=model_inputs, model_outputs=model_outputs, outputs=outputs)
        self.framework = get_framework(model)
        self.samples: dict[str, dict[str, np.ndarray]] = {}  # {mode: {key: fixed samples}}
        self.pending: dict[str, dict[str, list[np.ndarray]]] = {}  # {mode: {key: batches}} until fixed
        self.n_found: dict[str, int] = {}

    def _fixed(self, mode: str) -> dict[str, np.ndarray] | None:
        return self.given_samples if self.given_samples is not None else self.samples.get(mode)

    def on_batch_end(self, data: Data) -> None:
        mode = self.system.mode
        if self._fixed(mode) is not None:
            return
        found = self.n_found.get(mode, 0)
        if found >= (self.n_required or 1):
            return  # enough (samples=None keeps the first batch)
        pending = self.pending.setdefault(mode, {key: [] for key in self.inputs})
        for key in self.inputs:
            pending[key].append(as_numpy(data[key]))
        self.n_found[mode] = found + len(pending[self.inputs[0]][-1])

    def on_epoch_end(self, data: Data) -> None:
        mode = self.system.mode
        if self._fixed(mode) is None:
            if not self.n_found.get(mode):
                return  # no batch of this trace's modes / datasets ran yet
            # The epoch is over: the samples found so far are kept, even if fewer than asked for.
            pending = self.pending.pop(mode)
            self.n_found.pop(mode)
            self.samples[mode] = {key: np.concatenate(parts)[:self.n_required] if self.n_required else parts[0]
                                  for key, parts in pending.items()}
        self.system.sync_models()
        data.write_without_log(self.outputs[0], self._display(self._fixed(mode)))

    def _masks(self, batch: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        """SaliencyNet's (plain, smoothed, integrated, smoothed-integrated) masks as enabled (empty dicts if not)."""
        masks = self.salnet.get_masks(batch)
        smoothed: dict[str, Any] = {}
        integrated: dict[str, Any] = {}
        smint: dict[str, Any] = {}
        if self.smoothing:
            smoothed = self.salnet.get_smoothed_masks(batch, nsamples=self.smoothing)
        if self.integrating:
            if isinstance(self.integrating, tuple):
                n_integration, n_smoothing = self.integrating
            else:
                n_integration, n_smoothing = self.integrating, self.smoothing
            if n_integration:
                integrated = self.salnet.get_integrated_masks(batch, nsamples=n_integration)
                if n_smoothing:
                    smint = self.salnet.get_smoothed_masks(batch, nsamples=n_smoothing, nintegration=n_integration)
        return masks, smoothed, integrated, smint

    def _display(self, samples: dict[str, np.ndarray]) -> GridDisplay:
        batch = {key: to_tensor(samples[key], self.framework) for key in self.model_inputs}
        masks, smoothed, integrated, smint = self._masks(batch)
        channel_first = self.framework == "torch"

        def image(value: Any) -> np.ndarray:
            return channel_last(np.asarray(to_number(value)), channel_first)

        columns = []
        if self.class_key:
            columns.append(BatchDisplay(text=label_texts(samples[self.class_key], self.label_mapping),
                                        title=self.class_key))
        for key in self.model_outputs:
            columns.append(BatchDisplay(text=label_texts(masks[key], self.label_mapping), title=key))
        best = smint or integrated or smoothed or masks
        for key, out_key in zip(self.model_inputs, self.outputs):
            value = image(samples[key]).astype(np.float64)
            columns.append(BatchDisplay(image=value, title=key))
            low = value.min()
            spread = value.max() - low
            mask = image(best[out_key])
            # Brighten the important regions: the image scaled by the mask, the image, and the mask itself.
            blend = 0.3 * (mask * (value - low) + low) + 0.3 * value + 0.4 * mask * spread + low
            columns.append(BatchDisplay(image=blend, title=f"{key} {out_key}"))
        for key in self.outputs:
            for prefix, results in (("", masks), ("Smoothed ", smoothed), ("Integrated ", integrated),
                                    ("SmInt ", smint)):
                if results:
                    columns.append(BatchDisplay(image=image(results[key]), title=f"{prefix}{key}",
                                                color_map="inferno"))
        return GridDisplay(columns=columns)

    def state_dict(self) -> dict[str, Any]:
        return {"samples": {mode: dict(values) for mode, values in self.samples.items()},
                "pending": {mode: {key: np.concatenate(parts) for key, parts in values.items()}
                            for mode, values in self.pending.items()},
                "n_found": dict(self.n_found)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.samples = {str(mode): {str(key): np.array(value) for key, value in values.items()}
                        for mode, values in state.get("samples", {}).items()}
        self.pending = {str(mode): {str(key): [np.array(value)] for key, value in values.items()}
                        for mode, values in state.get("pending", {}).items()}
        self.n_found = {str(mode): int(count) for mode, count in state.get("n_found", {}).items()}
