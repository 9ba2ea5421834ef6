"""Hadamard: encode integer class labels as Hadamard codes (error-correcting targets)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.backend.hadamard_code import hadamard_code_length, hadamard_codes
from fe_ray.op.numpyop.numpyop import NumpyOp


class Hadamard(NumpyOp):
    """Replace each integer class label by its code: a float32 vector of +1 / -1 entries, one row of a Hadamard
    codebook (see :func:`fe_ray.backend.hadamard_code.hadamard_codes`).

    Codes of different classes differ in about half their entries, so a model trained to output them (e.g. with a
    tanh layer and a hinge loss) must be pushed far to confuse two classes: a defence against adversarial attacks.
    :class:`fe_ray.op.tensorop.UnHadamard` turns predicted codes back into class probabilities.

    A sample's label (an int, or an array holding one) becomes a vector of ``code_length``; an array of several
    labels becomes one code per label (shape ``labels.shape + (code_length,)``, after dropping axes of length 1, as
    FastEstimator's gather does). As a Network pop each sample of the batch is encoded that way.

    Differences from FastEstimator: labels that are not integers, or lie outside ``[0, n_classes)``, raise a
    ValueError (FastEstimator would index the codebook with them: a negative label silently takes a code from
    the end).

    Args:
        inputs: Key(s) of the integer labels.
        outputs: Key(s) of the codes, one per input.
        n_classes: How many classes there are (at least 2).
        code_length: The length of the codes: a power of 2 >= ``n_classes``; None for the smallest such power.
            Longer codes are more robust; UnHadamard must be given the same value.
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: If ``inputs`` and ``outputs`` differ in number, ``n_classes`` < 2, or ``code_length`` is not a
            power of 2 >= ``n_classes``; when running, if a label is not an integer in ``[0, n_classes)``.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], n_classes: int,
                 code_length: int | None = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"Hadamard writes each input's codes to the output at the same position, but got "
                             f"{len(self.inputs)} input(s) {self.inputs} and {len(self.outputs)} output(s) "
                             f"{self.outputs}.")
        self.code_length = hadamard_code_length(n_classes, code_length, "Hadamard")
        self.n_classes = int(n_classes)
        self.labels = hadamard_codes(self.n_classes, self.code_length)  # FastEstimator's attribute name
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[np.ndarray]:
        return [self.labels[np.squeeze(self._check(key, value))] for key, value in zip(self.inputs, data)]

    def forward_batch(self, data: list[Any], state: dict[str, Any]) -> list[np.ndarray]:
        results = []
        for key, value in zip(self.inputs, data):
            labels = self._check(key, value)
            # One sample's encoding each, as forward gives it: a lone label per sample becomes one code per sample.
            per_sample = labels.reshape(len(labels), -1)
            if per_sample.shape[1] == 1:
                results.append(self.labels[per_sample[:, 0]])
            else:
                results.append(np.stack([self.labels[np.squeeze(sample)] for sample in labels]))
        return results

    def _check(self, key: str, value: Any) -> np.ndarray:
        labels = np.asarray(value)
        if np.issubdtype(labels.dtype, np.floating) and np.all(np.isfinite(labels)) and \
                np.array_equal(labels, np.round(labels)):
            labels = labels.astype(np.int64)  # whole-number float labels, as FastEstimator's gather casts them
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"Hadamard {key!r} needs integer class labels, got dtype {labels.dtype} (e.g. "
                             f"{labels.reshape(-1)[:3].tolist()}); cast them to int first.")
        if labels.size and (labels.min() < 0 or labels.max() >= self.n_classes):
            bad = labels[(labels < 0) | (labels >= self.n_classes)].reshape(-1)[0]
            raise ValueError(f"Hadamard {key!r} got label {int(bad)}, outside [0, {self.n_classes}) for "
                             f"n_classes={self.n_classes}.")
        return labels
