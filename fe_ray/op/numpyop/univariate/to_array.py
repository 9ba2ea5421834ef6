"""ToArray: turn each input (a list, a number, a nested sequence) into a numpy array."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp


class ToArray(NumpyOp):
    """Convert each input to a numpy array (``np.array(value, dtype=dtype)``).

    Args:
        inputs: Key(s) of the data.
        outputs: Key(s) to write the arrays to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        dtype: The arrays' dtype (e.g. ``"float32"``); None infers it from the data.

    Raises:
        ValueError: If ``inputs`` and ``outputs`` differ in number; when running, if a value cannot become an
            array of ``dtype`` (the message names the key).
        TypeError: If ``dtype`` is not a numpy dtype.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 dtype: str | np.dtype[Any] | type | None = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"ToArray writes each input's array to the output at the same position, but got "
                             f"{len(self.inputs)} input(s) {self.inputs} and {len(self.outputs)} output(s) "
                             f"{self.outputs}.")
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[np.ndarray]:
        results = []
        for key, value in zip(self.inputs, data):
            try:
                results.append(np.array(value, dtype=self.dtype))
            except (ValueError, TypeError) as error:
                raise ValueError(f"ToArray cannot make {key!r} ({type(value).__name__}: {value!r:.100}) into an "
                                 f"array of dtype {self.dtype}: {error}") from None
        return results
