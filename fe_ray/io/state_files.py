"""The on-disk format of a System checkpoint (one directory on any fsspec filesystem).

::

    system.json             human-readable: format version, system counters, configuration fingerprint
    models/<name>.npz       every array of the model's state (weights + optimizer), loaded with allow_pickle=False
    models/<name>.json      the nested structure of that state (dicts, lists, tuples, scalars, strings) with
                            references to the arrays in the .npz
    objects.pkl             everything else (op / trace / pipeline states, summary, RNG states), pickled

Trust boundary: ``objects.pkl`` is a pickle, and unpickling runs code chosen by whoever wrote the file. Only load
checkpoints that you (or software you trust) wrote. The model files are plain arrays + JSON and never unpickle.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import struct
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from fe_ray.io.checkpoint import join, open_fs
from fe_ray.io.direct_write import open_sequential_writer
from fe_ray.io.npz_read import read_npz

SYSTEM_FILE = "system.json"
OBJECTS_FILE = "objects.pkl"
MODELS_DIR = "models"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, or of an unknown format (the message names the file)."""


# ---------------------------------------------------------------------- nested state <-> (json, arrays)
def flatten_state(state: Any, arrays: dict[str, np.ndarray], where: str = "state") -> Any:
    """Encode a nested state as JSON-able tagged nodes, moving every array (and numpy scalar) into ``arrays``.

    Containers are always tagged (``{"d": [[key, value], ...]}``, ``{"l": [...]}``, ``{"t": [...]}``) so that
    non-string dict keys (torch optimizer states use ints) and tuples survive the round trip exactly.

    Raises:
        TypeError: For values that are neither containers, numbers, strings, None nor numeric arrays, naming where.
    """
    if isinstance(state, np.ndarray) or isinstance(state, np.generic):
        array = np.asarray(state)
        if array.dtype.hasobject:
            raise TypeError(f"Cannot store object array at {where}; model states must hold numeric arrays.")
        ref = f"a{len(arrays)}"
        arrays[ref] = array
        node: dict[str, Any] = {"a": ref, "scalar": isinstance(state, np.generic)}
        if array.dtype.kind == "V" and array.dtype.names is None and array.dtype.type is not np.void:
            node["dtype"] = array.dtype.name  # an extension dtype (ml_dtypes' bfloat16): .npy keeps only its bytes
        return node
    if isinstance(state, Mapping):
        return {"d": [[flatten_state(k, arrays, f"{where} key"), flatten_state(v, arrays, f"{where}[{k!r}]")]
                      for k, v in state.items()]}
    if isinstance(state, (list, tuple)):
        items = [flatten_state(v, arrays, f"{where}[{i}]") for i, v in enumerate(state)]
        return {"t": items} if isinstance(state, tuple) else {"l": items}
    if isinstance(state, float) and not math.isfinite(state):
        return {"f": repr(state)}  # strict JSON has no inf/nan literals
    if state is None or isinstance(state, (bool, int, float, str)):
        return state
    raise TypeError(f"Cannot store {type(state).__name__} at {where} in a model checkpoint; model states may only "
                    "hold numpy arrays, numbers, strings, None, dicts, lists and tuples.")


def unflatten_state(node: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """Invert :func:`flatten_state`."""
    if isinstance(node, dict):
        if "a" in node:
            array = arrays[node["a"]]
            if "dtype" in node:
                array = array.view(_extension_dtype(node["dtype"]))
            return array[()] if node.get("scalar") else array
        if "d" in node:
            return {unflatten_state(k, arrays): unflatten_state(v, arrays) for k, v in node["d"]}
        if "l" in node:
            return [unflatten_state(v, arrays) for v in node["l"]]
        if "t" in node:
            return tuple(unflatten_state(v, arrays) for v in node["t"])
        if "f" in node:
            return float(node["f"])
        raise ValueError(f"Unknown state node with keys {sorted(node)}.")
    return node


def _extension_dtype(name: str) -> np.dtype:
    """The numpy dtype called ``name``, importing ml_dtypes (which registers bfloat16 & co.) if needed."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


# ---------------------------------------------------------------------- write / read
#: Arrays at least this large start at an aligned offset in files that ask for it (smaller ones: not worth the
#: padding, up to 4 KiB each).
ALIGNED_ARRAY_BYTES = 1 << 20


def _npy_header(array: np.ndarray, start: int | None, alignment: int) -> bytes:
    """The ``.npy`` (version 2.0) header of ``array``; with ``start`` (the header's file offset) padded so that the
    data after it begins at a multiple of ``alignment``."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_2_0(buffer, np.lib.format.header_data_from_array_1_0(array))
    header = buffer.getvalue()
    if start is None:
        return header
    padding = -(start + len(header)) % alignment
    if not padding:
        return header
    # Layout: magic (6) + version (2) + little-endian uint32 length (4) + the dict text ending in "\n".
    length = struct.unpack("<I", header[8:12])[0] + padding
    return header[:8] + struct.pack("<I", length) + header[12:-1] + b" " * padding + b"\n"


def save_npz(file: Any, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``file`` as an uncompressed ``.npz`` archive (what ``np.savez`` writes, same reader).

    ``np.savez`` copies every array into 16 MiB ``bytes`` chunks on its way into the zip member when the target is
    not a plain OS file (an fsspec file is not); here each array's memory goes to the member as it is, and the
    zip layer's CRC-32 is computed on it in place.

    A target with an ``alignment`` (a :class:`~fe_ray.io.direct_write.DirectFileWriter`) gets the data of every
    array of at least :data:`ALIGNED_ARRAY_BYTES` at a file offset that is a multiple of it (the ``.npy`` header
    is padded with spaces, which the format allows), so that an array in aligned memory is written without a copy.
    """
    alignment = getattr(file, "alignment", None)
    with zipfile.ZipFile(file, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in arrays.items():
            array = np.asanyarray(array)
            if array.dtype.hasobject:
                raise TypeError(f"Array {key!r} holds Python objects ({array.dtype}); checkpoints store plain arrays.")
            contiguous = array if array.flags.c_contiguous else array.copy(order="C")  # rare: a non-contiguous view
            with archive.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                aligned = alignment is not None and contiguous.nbytes >= ALIGNED_ARRAY_BYTES
                member.write(_npy_header(contiguous, file.tell() if aligned else None, alignment or 1))
                if contiguous.size:
                    # As bytes: a uint8 view exports a buffer for every dtype (bfloat16 and other extension dtypes
                    # have no buffer-protocol format of their own).
                    member.write(contiguous.reshape(-1).view(np.uint8).data)


def write_checkpoint(payload: Mapping[str, Any], directory: str) -> None:
    """Write a :meth:`System.capture_state` payload into ``directory`` (a path or fsspec URL).

    Args:
        payload: The captured state (see :mod:`fe_ray.summary.system` for its structure).
        directory: Target directory; created if missing. Existing files of the same names are overwritten.
    """
    fs, root = open_fs(directory)
    fs.makedirs(join(root, MODELS_DIR), exist_ok=True)
    header = {"format": FORMAT_VERSION, "system": payload["system"], "config": payload["config"],
              "models": sorted(payload["models"])}
    fs.pipe_file(join(root, SYSTEM_FILE), json.dumps(header, indent=2, sort_keys=True).encode())
    for name, state in payload["models"].items():
        arrays: dict[str, np.ndarray] = {}
        structure = flatten_state(state, arrays, where=f"model {name!r}")
        # Streamed straight into the file: building the archive in memory first doubled the peak memory and
        # added a full copy of the weights and optimizer state to every save. Local files bypass the page cache,
        # whose kernel CPU would otherwise be taken from training during a background save.
        with open_sequential_writer(fs, join(root, MODELS_DIR, f"{name}.npz")) as file:
            save_npz(file, arrays)
        fs.pipe_file(join(root, MODELS_DIR, f"{name}.json"), json.dumps(structure).encode())
    objects = {key: value for key, value in payload.items() if key not in ("system", "config", "models")}
    with fs.open(join(root, OBJECTS_FILE), "wb") as file:
        pickle.dump(objects, file, protocol=pickle.HIGHEST_PROTOCOL)


def read_checkpoint(directory: str) -> dict[str, Any]:
    """Read a checkpoint written by :func:`write_checkpoint` back into a payload.

    Only read checkpoints you wrote yourself: ``objects.pkl`` is unpickled.

    Raises:
        CheckpointError: If a file is missing, unreadable or of an unknown format; the message names the file.
    """
    fs, root = open_fs(directory)
    header = _read_json(fs, join(root, SYSTEM_FILE), directory)
    if header.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{join(directory, SYSTEM_FILE)} has format {header.get('format')!r}; this fe_ray "
                              f"reads format {FORMAT_VERSION}.")
    models = {}
    for name in header.get("models", []):
        npz_path = join(root, MODELS_DIR, f"{name}.npz")
        structure = _read_json(fs, join(root, MODELS_DIR, f"{name}.json"), directory)
        # Members are read straight into their arrays (read_npz). Opened outside the try: a missing file must be
        # reported as missing, not as corrupt.
        file = _open_for_read(fs, npz_path, directory)
        try:
            with file:
                arrays = read_npz(file)
            models[name] = unflatten_state(structure, arrays)
        except (ValueError, KeyError, OSError, zipfile.BadZipFile, EOFError) as err:
            raise CheckpointError(f"Checkpoint file {_display(directory, npz_path, root)} is corrupt: {err}") from err
    objects_path = join(root, OBJECTS_FILE)
    raw = _read_bytes(fs, objects_path, directory)
    try:
        objects = pickle.loads(raw)
    except Exception as err:  # unpickling a damaged file can raise nearly anything
        raise CheckpointError(f"Checkpoint file {_display(directory, objects_path, root)} is corrupt: "
                              f"{type(err).__name__}: {err}") from err
    return {"system": header["system"], "config": header["config"], "models": models, **objects}


def _display(directory: str, path: str, root: str) -> str:
    return join(directory, path[len(root.rstrip("/")) + 1:])


def _open_for_read(fs: Any, path: str, directory: str) -> Any:
    try:
        return fs.open(path, "rb")
    except FileNotFoundError as err:
        raise CheckpointError(f"Checkpoint file {_display(directory, path, open_fs(directory)[1])} is missing; the "
                              "checkpoint is incomplete or not an fe_ray checkpoint.") from err


def _read_bytes(fs: Any, path: str, directory: str) -> bytes:
    try:
        return fs.cat_file(path)
    except FileNotFoundError as err:
        raise CheckpointError(f"Checkpoint file {_display(directory, path, open_fs(directory)[1])} is missing; the "
                              "checkpoint is incomplete or not an fe_ray checkpoint.") from err


def _read_json(fs: Any, path: str, directory: str) -> Any:
    raw = _read_bytes(fs, path, directory)
    try:
        return json.loads(raw)
    except ValueError as err:
        raise CheckpointError(f"Checkpoint file {_display(directory, path, open_fs(directory)[1])} is corrupt: "
                              f"{err}") from err
