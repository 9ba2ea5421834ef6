"""Checkpoint files are streamed to and from storage, and damage is reported precisely."""

import os
from pathlib import Path

import numpy as np
import pytest

from fe_ray.io.state_files import CheckpointError, read_checkpoint, write_checkpoint

PAYLOAD = {"system": {"global_step": 3}, "config": {},
           "models": {"m": {"model": {"w": np.arange(6.0).reshape(2, 3)}, "optimizer": {"lr": 0.1}}},
           "summary": {"name": None}}


@pytest.mark.parametrize("uri_prefix", ["", "memory://"])
def test_round_trip_local_and_fsspec(tmp_path: Path, uri_prefix: str) -> None:
    directory = f"memory://ckpt-{os.getpid()}" if uri_prefix else str(tmp_path)
    write_checkpoint(PAYLOAD, directory)
    restored = read_checkpoint(directory)
    np.testing.assert_array_equal(restored["models"]["m"]["model"]["w"], PAYLOAD["models"]["m"]["model"]["w"])
    assert restored["models"]["m"]["optimizer"] == {"lr": 0.1}
    assert restored["summary"] == {"name": None} and restored["system"]["global_step"] == 3


def test_missing_model_file_is_reported_as_missing(tmp_path: Path) -> None:
    write_checkpoint(PAYLOAD, str(tmp_path))
    (tmp_path / "models" / "m.npz").unlink()
    with pytest.raises(CheckpointError, match=r"m\.npz is missing"):
        read_checkpoint(str(tmp_path))


def test_damaged_model_file_is_reported_as_corrupt(tmp_path: Path) -> None:
    write_checkpoint(PAYLOAD, str(tmp_path))
    (tmp_path / "models" / "m.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CheckpointError, match=r"m\.npz is corrupt"):
        read_checkpoint(str(tmp_path))


def test_save_npz_round_trips_every_kind_of_array_through_np_load() -> None:
    import io

    from fe_ray.io.state_files import save_npz

    arrays = {"matrix": np.arange(12, dtype=np.float32).reshape(3, 4), "fortran": np.asfortranarray(np.ones((3, 2))),
              "scalar": np.array(5, dtype=np.int64), "empty": np.zeros((0, 3)), "mask": np.array([True, False]),
              "strided": np.arange(10)[::2], "half": np.ones(3, dtype=np.float16), "text": np.array(["ab", "c"])}

    buffer = io.BytesIO()
    save_npz(buffer, arrays)
    buffer.seek(0)
    loaded = np.load(buffer, allow_pickle=False)
    assert sorted(loaded.files) == sorted(arrays)
    for key, array in arrays.items():
        assert loaded[key].dtype == array.dtype and loaded[key].shape == array.shape, key
        np.testing.assert_array_equal(loaded[key], array)
    with pytest.raises(TypeError, match="'bad' holds Python objects"):
        save_npz(io.BytesIO(), {"bad": np.array([{"a": 1}], dtype=object)})


def test_bfloat16_state_round_trips_through_a_checkpoint(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")  # ships with TensorFlow; Keras bfloat16 models hold such weights
    weights = np.array([[1.5, -2.0], [0.25, 3.0]], dtype=ml_dtypes.bfloat16)
    payload = {**PAYLOAD, "models": {"m": {"model": {"w": weights, "step": ml_dtypes.bfloat16(7.0)}}}}
    write_checkpoint(payload, str(tmp_path))
    restored = read_checkpoint(str(tmp_path))["models"]["m"]["model"]
    assert restored["w"].dtype == weights.dtype
    np.testing.assert_array_equal(restored["w"].astype(np.float32), weights.astype(np.float32))
    assert restored["step"].dtype == weights.dtype and float(restored["step"]) == 7.0
