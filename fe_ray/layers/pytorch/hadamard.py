"""HadamardCode: an error-correcting-code output layer turning features into class probabilities (PyTorch)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import torch
from torch import nn

from fe_ray.layers._hadamard import check_max_prob_power, distance_floor, head_sizes, layer_code_length, layer_codes


class HadamardCode(nn.Module):
    """Map features to class probabilities through an error-correcting output code, as FastEstimator's
    ``fe.layers.pytorch.HadamardCode`` (Verma & Swami, NeurIPS 2019: "Error Correcting Output Codes Improve
    Probability Estimation and Adversarial Robustness of Deep Neural Networks").

    A drop-in replacement for a final ``Linear`` + softmax. Each class owns one row of a Hadamard matrix (without
    its constant first column), ``code_length - 1`` entries of +1 / -1. The layer maps its input(s) linearly to
    ``code_length - 1`` values, squashes them with tanh, takes the L1 distance ``d_c`` to each class's code (at least
    a floor ``eps``) and returns the inverse-distance weights ``d_c ** -power``, normalised to sum to 1 per sample.
    ``eps`` is chosen so that a prediction exactly on a class's code gets probability ``max_prob``.

    Several inputs (a list of ``(batch, n_i)`` tensors, e.g. the outputs of independent sub-networks, which gives the
    most adversarial robustness) each get their own ``Linear`` head producing an equal share of the code, the first
    head also the remainder; a single ``(batch, n)`` tensor uses one head.

    The codebook, ``eps`` and ``power`` are frozen ``nn.Parameter`` s (``requires_grad=False``) named as in
    FastEstimator, so state dicts carry over; the heads are ``self.heads`` (an ``nn.ModuleList`` of ``nn.Linear``).

    Differences from FastEstimator: bad ``in_features`` and ``n_classes`` < 2 raise a ValueError (FastEstimator
    failed later or divided by zero), and calling with a number of tensors other than the number of heads raises a
    ValueError instead of silently using only the first heads.

    Args:
        in_features: The input's feature count for one ``(batch, n)`` input, or a list of counts, one per input head.
        n_classes: How many classes to output probabilities for (at least 2).
        code_length: The code length: a power of 2 >= ``n_classes``; None for the smallest such power, but at least
            16.
        max_prob: The probability of a class whose code the prediction matches exactly; in (0, 1). Values clearly
            below 1 (0.95, 0.8) help adversarial robustness.
        power: The inverse distance weighting power, > 0. 1 gives intuitive probabilities; small values such as 0.25
            help adversarial robustness, large ones (2, 3) converge a little faster.

    Raises:
        ValueError: If an argument is out of range (naming it), or there are more heads than ``code_length - 1``.
    """

    heads: nn.ModuleList

    def __init__(self, in_features: int | list[int], n_classes: int, code_length: int | None = None,
                 max_prob: float = 0.95, power: float = 1.0) -> None:
        super().__init__()
        self.code_length = layer_code_length(n_classes, code_length)
        self.n_classes = int(n_classes)
        max_prob, power = check_max_prob_power(max_prob, power)
        features = [in_features] if not isinstance(in_features, Sequence) or isinstance(in_features, str) else list(
            in_features)
        if not features or not all(isinstance(n, Integral) and not isinstance(n, bool) and n > 0 for n in features):
            raise ValueError(f"HadamardCode in_features must be a positive int or a list of them (one per input "
                             f"head), got {in_features!r}.")
        sizes = head_sizes(len(features), self.code_length)
        self.power = nn.Parameter(torch.tensor(power), requires_grad=False)
        self.eps = nn.Parameter(torch.tensor(distance_floor(self.n_classes, self.code_length, max_prob, power)),
                                requires_grad=False)
        self.labels = nn.Parameter(torch.from_numpy(layer_codes(self.n_classes, self.code_length)),
                                   requires_grad=False)
        self.heads = nn.ModuleList([nn.Linear(int(n_in), n_out) for n_in, n_out in zip(features, sizes)])

    def forward(self, x: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
        if isinstance(x, (list, tuple)):
            if len(x) != len(self.heads):
                raise ValueError(f"HadamardCode was built for {len(self.heads)} input head(s) but got {len(x)} "
                                 "tensors.")
            x = torch.cat([head(tensor) for head, tensor in zip(self.heads, x)], dim=-1)
        elif len(self.heads) == 1:
            x = self.heads[0](x)
        else:
            raise ValueError(f"HadamardCode was built for {len(self.heads)} input heads; pass a list of that many "
                             "tensors, not a single one.")
        x = torch.tanh(x)
        distances = torch.abs(x.unsqueeze(1) - self.labels.to(x.dtype)).sum(dim=-1)  # L1, (batch, n_classes)
        weights = 1.0 / torch.pow(torch.maximum(distances, self.eps.to(x.dtype)), self.power.to(x.dtype))
        return weights / weights.sum(dim=-1, keepdim=True)

    def extra_repr(self) -> str:
        return f"n_classes={self.n_classes}, code_length={self.code_length}"
