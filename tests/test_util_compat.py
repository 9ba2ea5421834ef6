"""fe.util's FastEstimator helpers for user programs: traceable, warn, get_colors, is_valid_file."""

from __future__ import annotations

import gzip
import pickle
import zipfile
from pathlib import Path

import pytest

import fe_ray as fe
from fe_ray.op.numpyop import NumpyOp
from fe_ray.util import get_colors, is_valid_file, traceable, warn


@traceable(whitelist="count")
class Counter(NumpyOp):
    """A user op decorated as FastEstimator programs decorate them."""

    def __init__(self, inputs: str, outputs: str) -> None:
        super().__init__(inputs=inputs, outputs=outputs)
        self.count = 0

    def forward(self, data, state):  # noqa: ANN001, ANN201 - a user's op
        self.count += 1
        return data + 1


@traceable(blacklist=("cache",))
class Child(Counter):
    pass


def test_traceable_keeps_the_class_working_and_records_its_lists() -> None:
    op = Counter(inputs="x", outputs="y")
    assert op.forward(1, {}) == 2 and op.count == 1
    assert Counter._fe_state_whitelist == ("count",) and Counter._fe_state_blacklist == ()
    assert Child._fe_state_whitelist == ("count",) and Child._fe_state_blacklist == ("cache",)
    assert pickle.loads(pickle.dumps(op)).count == 1  # the class is not wrapped: instances pickle as before
    assert fe.util.traceable is traceable
    with pytest.raises(ValueError, match="not both"):
        traceable(whitelist="a", blacklist="b")
    with pytest.raises(TypeError, match="decorates classes"):
        traceable()(lambda: None)


def test_fastestimator_util_module_paths_import() -> None:
    """FastEstimator programs import these from their modules: fe_ray keeps the paths."""
    from fe_ray.util.cli_util import parse_string_to_python
    from fe_ray.util.traceability_util import traceable as traceable_from_path

    assert traceable_from_path is traceable
    assert parse_string_to_python("{'a': [1, 2.5]}") == {"a": [1, 2.5]}


def test_warn_prints_a_yellow_fastestimator_line(capsys: pytest.CaptureFixture[str]) -> None:
    warn("careful")
    assert capsys.readouterr().out == "\033[93mFastEstimator-Warn: careful\033[00m\n"


def test_get_colors_palette_and_wheel() -> None:
    assert get_colors(2) == ["rgba(1,115,178,1.0)", "rgba(222,143,5,1.0)"]
    assert get_colors(1, as_numbers=True, alpha=0.5) == [(1.0, 115.0, 178.0, 0.5)]
    wheel = get_colors(12)
    assert len(wheel) == 12 and len(set(wheel)) == 12
    with pytest.raises(ValueError, match="n_colors must be an int >= 0, got -1"):
        get_colors(-1)
    with pytest.raises(ValueError, match="alpha must be a number in \\[0, 1\\], got 2"):
        get_colors(3, alpha=2)


def test_is_valid_file_reads_archives_through(tmp_path: Path) -> None:
    good_zip, bad_zip = tmp_path / "a.zip", tmp_path / "b.zip"
    with zipfile.ZipFile(good_zip, "w") as archive:
        archive.writestr("x.txt", "hello")
    bad_zip.write_bytes(good_zip.read_bytes()[:20])
    good_gz, bad_gz = tmp_path / "c.gz", tmp_path / "d.gz"
    good_gz.write_bytes(gzip.compress(b"x" * 10000))
    bad_gz.write_bytes(good_gz.read_bytes()[:15])
    assert is_valid_file(str(good_zip)) and is_valid_file(str(good_gz))
    assert not is_valid_file(str(bad_zip)) and not is_valid_file(str(bad_gz))
    assert not is_valid_file(str(tmp_path / "missing.zip"))
    plain = tmp_path / "e.txt"
    plain.write_text("anything")
    assert is_valid_file(str(plain))


def test_fastestimator_one_module_per_op_paths_import_fe_rays_ops() -> None:
    """FastEstimator keeps each NumpyOp in its own module; fe_ray groups them, and serves the long paths."""
    import importlib

    from fe_ray.op.numpyop.univariate.calibate import Calibrate  # FastEstimator's spelling of the module
    from fe_ray.op.numpyop.univariate.expand_dims import ExpandDims

    from fe_ray.op.numpyop import multivariate, univariate
    from fe_ray.op.numpyop.univariate.color import Color
    from fe_ray.schedule.lr_schedule import ARC

    assert (ExpandDims, Calibrate, Color) == (univariate.ExpandDims, univariate.Calibrate, univariate.Color)
    assert importlib.import_module("fe_ray.op.numpyop.multivariate.horizontal_flip").HorizontalFlip is \
        multivariate.HorizontalFlip
    assert univariate.word_to_id.WordtoId is univariate.WordtoId and ARC is fe.schedule.ARC
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fe_ray.op.numpyop.univariate.expand_dimz")


def test_module_aliases_leave_existing_modules_and_attributes_alone() -> None:
    import sys
    import types

    from fe_ray.util.module_aliases import register_module_aliases

    package = types.ModuleType("fe_ray_alias_probe")
    package.Thing, package.taken = type("Thing", (), {}), "kept"
    sys.modules["fe_ray_alias_probe"] = package
    try:
        register_module_aliases("fe_ray_alias_probe", {"thing": "Thing", "taken": "Thing"})
        assert sys.modules["fe_ray_alias_probe.thing"].Thing is package.Thing and package.thing.Thing is package.Thing
        assert package.taken == "kept" and "fe_ray_alias_probe.taken" not in sys.modules
    finally:
        for name in ("fe_ray_alias_probe", "fe_ray_alias_probe.thing"):
            sys.modules.pop(name, None)
