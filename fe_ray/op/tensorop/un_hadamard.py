"""UnHadamard: turn predicted Hadamard codes back into class probabilities."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import abs as tensor_abs
from fe_ray.backend import cast, expand_dims, get_framework, iwd, reduce_sum, to_tensor
from fe_ray.backend.hadamard_code import hadamard_code_length, hadamard_codes
from fe_ray.op.tensorop.tensorop import TensorOp, check_one_output_each

#: The probability a prediction lying exactly on a class's code gets (approximately: see UnHadamard).
MAX_PROB = 0.99999


class UnHadamard(TensorOp):
    """Write, for each input batch of predicted codes ``(N, code_length)``, class probabilities ``(N, n_classes)``.

    The counterpart of :class:`fe_ray.op.numpyop.univariate.hadamard.Hadamard`, which encodes integer labels as
    rows of a Hadamard codebook (error-correcting targets that make models harder to attack adversarially): the L1
    distance of a prediction to each class's code is turned into probabilities by inverse weighted distance
    (:func:`fe_ray.backend.iwd`, power 1), so the nearest code gets the most probability and an exact match about
    0.99999. 16-bit predictions (mixed precision) are scored in float32, as FastEstimator's float32 codebook
    promotes them, so the probabilities are float32.

    Args:
        inputs: Key(s) of the predicted codes (e.g. a model's tanh outputs).
        outputs: Key(s) of the class probabilities, one per input.
        n_classes: How many classes the codes stand for (at least 2).
        code_length: The code length the labels were encoded with: a power of 2 >= ``n_classes``; None for the
            smallest such power (the Hadamard op's default).
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the output and input key counts differ, ``n_classes`` < 2, or ``code_length`` is not a
            power of 2 >= ``n_classes``; when running, if an input's last axis is not ``code_length`` long.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], n_classes: int,
                 code_length: int | None = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_one_output_each(self, "UnHadamard")
        self.code_length = hadamard_code_length(n_classes, code_length, "UnHadamard")
        self.n_classes = int(n_classes)
        self.in_list, self.out_list = True, True
        # iwd's eps for MAX_PROB at distance 0 when every other class lies pairwise_distance away, with FastEstimator's
        # choice code_length + 1 for that distance (two codes lie about code_length apart in L1).
        self.eps = (self.code_length + 1) * (1.0 - MAX_PROB) / (MAX_PROB * (self.n_classes - 1))
        self.codes = hadamard_codes(self.n_classes, self.code_length)
        self._framework_codes: Any = None  # the codebook as a tensor of the Network's framework (and device)

    def build(self, framework: str, device: Any = None) -> None:
        if framework not in ("torch", "tf"):
            raise ValueError(f"UnHadamard runs in torch or TF Networks, got framework {framework!r}.")
        codes = to_tensor(self.codes, framework)
        if framework == "torch" and device is not None:
            codes = codes.to(device)
        self._framework_codes = codes

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [self._probabilities(key, tensor) for key, tensor in zip(self.inputs, data)]

    def _probabilities(self, key: str, tensor: Any) -> Any:
        shape = tuple(tensor.shape) if tensor.shape is not None else None
        if shape is not None and (not shape or shape[-1] not in (self.code_length, None)):
            raise ValueError(f"UnHadamard needs codes of length {self.code_length} along the last axis, but key "
                             f"{key!r} has shape {list(shape)}; check n_classes / code_length against the Hadamard op "
                             "that encoded the labels and the model's output size.")
        if "float16" in str(getattr(tensor, "dtype", "")):
            # float16 / bfloat16 (mixed precision): an exact match's inverse distance, ~(n - 1) / ((L + 1) * 1e-5),
            # overflows float16 for many class counts (23-32 classes, say) and its probability turns NaN.
            tensor = cast(tensor, "float32")
        codes = self._framework_codes
        if codes is None or get_framework(codes) != get_framework(tensor) or codes.dtype != tensor.dtype or (
                get_framework(tensor) == "torch" and codes.device != tensor.device):
            codes = cast(self.codes if codes is None else codes, tensor)  # the input's framework, dtype and device
        distances = reduce_sum(tensor_abs(expand_dims(tensor, axis=-2) - codes), axis=-1)  # L1, one per class
        return iwd(distances, power=1.0, eps=self.eps)

    def __getstate__(self) -> dict[str, Any]:
        # Framework tensors do not travel (to Ray replicas, in copies); build() re-creates them from the codebook.
        return {**self.__dict__, "_framework_codes": None}
