"""SaliencyNet: which input pixels a model's decision is most sensitive to (vanilla gradients, SmoothGrad,
integrated gradients), computed with the same ops a user could put in a Network (Watch, ModelOp, Gather,
GradientOp)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fe_ray.backend import abs as tensor_abs
from fe_ray.backend import (
    argmax,
    clip_by_value,
    get_framework,
    percentile,
    random_normal_like,
    random_uniform_like,
    reduce_max,
    reduce_min,
    reduce_sum,
    to_number,
    zeros_like,
)
from fe_ray.network import Network
from fe_ray.op.tensorop.gather import Gather
from fe_ray.op.tensorop.gradient import GradientOp, Watch
from fe_ray.op.tensorop.model import ModelOp
from fe_ray.util import to_list

#: The network runs in this mode only, so its ops never mix with a user's training ops.
MODE = "test"


class SaliencyNet:
    """Saliency masks of a classifier built with ``fe.build``: the gradient of each sample's chosen class score with
    respect to the model's inputs, reduced over channels and scaled to [0, 1] for display.

    Each method takes a batch dict holding the model inputs (numpy arrays or framework tensors). The class scored
    is the one under ``SaliencyNet_Target_Index_<output key>`` when the batch has that key (one index per sample),
    else the model's most likely class. The model is not trained.

    Args:
        model: The model (from ``fe.build``) to inspect.
        model_inputs: The batch key(s) the model reads.
        model_outputs: The key(s) the model's output(s) are written to.
        outputs: The key(s) to write the saliency masks to (one per model input).

    Raises:
        ValueError: If no model input or output key is given.
    """

    def __init__(self, model: Any, model_inputs: str | Sequence[str], model_outputs: str | Sequence[str],
                 outputs: str | list[str] = "saliency") -> None:
        self.model_op = ModelOp(model=model, mode=MODE, inputs=model_inputs, outputs=model_outputs, trainable=False)
        if not self.model_op.inputs or not self.model_op.outputs:
            raise ValueError(f"SaliencyNet needs model input and output keys, got model_inputs={model_inputs!r} and "
                             f"model_outputs={model_outputs!r}.")
        self.outputs = to_list(outputs)
        self.mode = MODE
        self.gather_keys = [f"SaliencyNet_Target_Index_{key}" for key in self.model_outputs]
        scores = [f"SaliencyNet_Intermediate_{key}" for key in self.model_outputs]
        self.network = Network(ops=[
            Watch(inputs=self.model_inputs, mode=MODE),
            self.model_op,
            Gather(inputs=self.model_outputs, indices=self.gather_keys, outputs=scores, mode=MODE),
            GradientOp(inputs=self.model_inputs, finals=scores, outputs=list(self.outputs), mode=MODE),
        ])

    @property
    def model_inputs(self) -> list[str]:
        """The batch keys the model reads (a copy)."""
        return list(self.model_op.inputs)

    @property
    def model_outputs(self) -> list[str]:
        """The keys of the model's outputs (a copy)."""
        return list(self.model_op.outputs)

    @staticmethod
    def _convert_for_visualization(tensor: Any, tile: int = 99) -> Any:
        """Sum ``|tensor|`` over channels (axis 1 for torch, the last for TF/numpy) and scale each sample to [0, 1]
        between its minimum and its ``tile``-th percentile (values above it clip to 1)."""
        channel_axis = 1 if get_framework(tensor) == "torch" else -1
        flat = reduce_sum(tensor_abs(tensor), axis=channel_axis, keepdims=True)
        sample_axes = list(range(1, len(flat.shape)))
        vmax = percentile(flat, tile, axis=sample_axes, keepdims=True)
        vmin = reduce_min(flat, axis=sample_axes, keepdims=True)
        return clip_by_value((flat - vmin) / (vmax - vmin), 0, 1)

    def get_masks(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The batch overlaid with each model output's predicted class (argmax) and the saliency masks.

        Args:
            batch: A batch holding the model inputs (and optionally the target class indices).
        """
        response = self._get_mask(dict(batch))  # a copy: target keys are added to it
        for key in self.outputs:
            response[key] = self._convert_for_visualization(response[key])
        return response

    def _get_mask(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Raw gradients (not yet scaled) and argmax predictions for ``batch`` (which gets the target keys)."""
        for key in self.gather_keys:
            batch.setdefault(key, [])  # empty indices: Gather scores each sample's most likely class
        prediction = self.network.transform(data=batch, mode=self.mode)
        for key in self.model_outputs:
            prediction[key] = argmax(prediction[key], axis=1)
        return prediction

    def _target(self, batch: dict[str, Any]) -> dict[str, Any]:
        """``batch`` with the classes to score fixed to the clean input's decisions (noise or interpolation could
        change the most likely class, and every sample of a method must score the same one); also the clean
        response."""
        response = self._get_mask(batch)
        for gather_key, output_key in zip(self.gather_keys, self.model_outputs):
            batch[gather_key] = response[output_key]
        return response

    def _get_integrated_masks(self, batch: dict[str, Any], nsamples: int = 25) -> dict[str, Any]:
        """Raw integrated gradients: the gradients along the straight path from a random baseline (uniform noise
        over each input's value range, as FastEstimator draws it after https://distill.pub/2020/attribution-baselines/)
        to the input, summed over ``nsamples`` points and multiplied by (input - baseline)."""
        inputs = [batch[key] for key in self.model_inputs]
        baselines = [_uniform_baseline(x) for x in inputs]
        diffs = [x - base for x, base in zip(inputs, baselines)]
        response: dict[str, Any] = {}
        for alpha in np.linspace(0.0, 1.0, nsamples):
            step = {key: batch[key] for key in self.gather_keys}
            for key, base, diff in zip(self.model_inputs, baselines, diffs):
                step[key] = base + float(alpha) * diff
            grads = self._get_mask(step)
            for key in self.outputs:
                response[key] = grads[key] if key not in response else response[key] + grads[key]
        for key in self.outputs:
            for diff in diffs:
                response[key] = response[key] * diff
        return response

    def get_smoothed_masks(self, batch: dict[str, Any], stdev_spread: float = .15, nsamples: int = 25,
                           nintegration: int | None = None, magnitude: bool = True) -> dict[str, Any]:
        """SmoothGrad masks: gradients averaged over ``nsamples`` noisy copies of the input (the clean input is the
        first), as :meth:`get_masks` returns them.

        Args:
            batch: A batch holding the model inputs.
            stdev_spread: Noise standard deviation as a fraction of each input's value range (max - min).
            nsamples: How many gradients to average.
            nintegration: If set, each sample after the first is an integrated gradient of this many points of the
                clean input (its random baseline is the sample's noise), as in FastEstimator.
            magnitude: Average squared gradients instead of the gradients.

        Raises:
            ValueError: If ``nsamples`` < 1 or ``stdev_spread`` < 0.
        """
        if int(nsamples) < 1 or float(stdev_spread) < 0:
            raise ValueError(f"get_smoothed_masks needs nsamples >= 1 and stdev_spread >= 0, got nsamples={nsamples!r} "
                             f"and stdev_spread={stdev_spread!r}.")
        batch = dict(batch)
        inputs = [batch[key] for key in self.model_inputs]
        stdevs = [float(np.asarray(to_number(stdev_spread * (reduce_max(x) - reduce_min(x))))) for x in inputs]
        response = self._target(batch)
        if magnitude:
            for key in self.outputs:
                response[key] = response[key] * response[key]
        for _ in range(int(nsamples) - 1):
            noisy = {key: batch[key] for key in self.gather_keys}
            for key, x, std in zip(self.model_inputs, inputs, stdevs):
                noisy[key] = x + random_normal_like(x, std=std)
            if nintegration:
                # The clean input, as FastEstimator integrates it: the integration's random baselines are its noise
                # (the noisy copy above still draws, so a seed gives the same masks as there).
                clean = {**noisy, **{key: x for key, x in zip(self.model_inputs, inputs)}}
                grads = self._get_integrated_masks(clean, nintegration)
            else:
                grads = self._get_mask(noisy)
            for key in self.outputs:
                response[key] = response[key] + (grads[key] * grads[key] if magnitude else grads[key])
        for key in self.outputs:
            response[key] = self._convert_for_visualization(response[key] / int(nsamples))
        return response

    def get_integrated_masks(self, batch: dict[str, Any], nsamples: int = 25) -> dict[str, Any]:
        """Integrated-gradients masks (https://arxiv.org/abs/1703.01365), as :meth:`get_masks` returns them.

        Args:
            batch: A batch holding the model inputs.
            nsamples: Points on the path from the baseline to the input.

        Raises:
            ValueError: If ``nsamples`` < 1.
        """
        if int(nsamples) < 1:
            raise ValueError(f"get_integrated_masks needs nsamples >= 1, got {nsamples!r}.")
        batch = dict(batch)
        response = self._target(batch)
        response.update(self._get_integrated_masks(batch, nsamples=int(nsamples)))
        for key in self.outputs:
            response[key] = self._convert_for_visualization(response[key])
        return response


def _uniform_baseline(x: Any) -> Any:
    """Uniform noise shaped like ``x`` over ``x``'s value range (``x``'s constant value where it has no range)."""
    low, high = float(np.asarray(to_number(reduce_min(x)))), float(np.asarray(to_number(reduce_max(x))))
    if high <= low:
        return zeros_like(x) + low
    return random_uniform_like(x, minval=low, maxval=high)
