"""ReadMat: load variables from MATLAB ``.mat`` files (one file per sample) with scipy."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from fe_ray.op.numpyop.file_paths import sample_file_path
from fe_ray.op.numpyop.numpyop import NumpyOp
from fe_ray.util import to_list


class ReadMat(NumpyOp):
    """Read the variables ``mat_keys`` of the ``.mat`` file whose path is in ``inputs``, into ``outputs``.

    Files are read with ``scipy.io.loadmat`` and its defaults, as FastEstimator does: every variable comes back as
    MATLAB stores it, at least 2-D (a scalar is a ``(1, 1)`` array). scipy is imported on first use (it comes with
    scikit-learn). The op always writes a list, one value per output, in the order of ``mat_keys``.

    Args:
        inputs: The key of the file path.
        outputs: The key(s) to write the variables to.
        mat_keys: The names of the variables in the file, one per output; None reads the variables named like the
            outputs (give the file's names here to store them under other keys).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        parent_path: A folder joined in front of every path (paths are then normalized).

    Raises:
        ValueError: If there is not exactly one input key, no output, or ``mat_keys`` and ``outputs`` differ in
            number or hold something other than strings.
        FileNotFoundError: When running, if a file does not exist.
        KeyError: When running, if a file lacks a variable (naming those it has).
    """

    def __init__(self, inputs: str, outputs: str | Iterable[str], mat_keys: None | str | Iterable[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 parent_path: str = "") -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != 1:
            raise ValueError(f"ReadMat reads one file per sample, so inputs must be one key (the path), got "
                             f"{inputs!r}.")
        if not self.outputs:
            raise ValueError(f"ReadMat needs at least one output key, got outputs={outputs!r}.")
        self.mat_keys = list(self.outputs) if mat_keys is None else to_list(mat_keys)
        if not all(isinstance(key, str) for key in self.mat_keys):
            raise ValueError(f"ReadMat mat_keys must be variable names (str), got {mat_keys!r}.")
        if len(self.mat_keys) != len(self.outputs):
            raise ValueError(f"ReadMat writes each of mat_keys to the output at the same position, but got "
                             f"{len(self.mat_keys)} mat_keys {self.mat_keys} and {len(self.outputs)} outputs "
                             f"{self.outputs}.")
        self.parent_path = parent_path
        self.out_list = True

    def _path(self, path: Any) -> str:
        return sample_file_path(path, self.parent_path, f"ReadMat {self.inputs}")

    def forward(self, data: Any, state: dict[str, Any]) -> list[Any]:
        from scipy.io import loadmat  # imported on first use, so the op can be built without scipy

        path = self._path(data[0] if self.in_list else data)
        if not os.path.exists(path):
            raise FileNotFoundError(f"ReadMat cannot find {path!r} (from {self.inputs[0]!r}, parent_path="
                                    f"{self.parent_path!r}).")
        contents = loadmat(path)
        missing = [key for key in self.mat_keys if key not in contents]
        if missing:
            names = sorted(key for key in contents if not key.startswith("__"))
            raise KeyError(f"ReadMat: {path!r} has no variable(s) {missing}; it holds {names}. Set mat_keys to the "
                           "file's names (and outputs to the keys to store them under).")
        return [contents[key] for key in self.mat_keys]
