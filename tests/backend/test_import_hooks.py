"""when_imported runs callbacks right after a module's first import, without importing it itself."""

from __future__ import annotations

import importlib
import importlib.machinery
import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from fe_ray.backend import import_hooks
from fe_ray.backend.import_hooks import cancel, pending, when_imported


@pytest.fixture
def make_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Writes a fresh, uniquely named module into a folder on sys.path; returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def make(source: str = "VALUE = 1\n") -> str:
        name = f"fe_ray_hook_probe_{uuid.uuid4().hex}"
        (tmp_path / f"{name}.py").write_text(source)
        importlib.invalidate_caches()
        names.append(name)
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)
        for key in pending(name):
            cancel(name, key)


def test_callback_waits_for_the_import_and_runs_once(make_module) -> None:
    name = make_module()
    seen: list[ModuleType] = []
    assert when_imported(name, "probe", seen.append) is False
    assert name not in sys.modules and seen == []
    assert pending(name) == ["probe"]
    module = importlib.import_module(name)
    assert seen == [module]
    importlib.reload(module)
    assert seen == [module], "a callback runs on the first import only"
    assert pending(name) == []
    assert import_hooks._FINDER not in sys.meta_path, "the finder leaves sys.meta_path once nothing waits"


def test_the_module_keeps_its_real_loader(make_module) -> None:
    name = make_module()
    when_imported(name, "probe", lambda module: None)
    module = importlib.import_module(name)
    assert type(module.__loader__) is importlib.machinery.SourceFileLoader
    assert type(module.__spec__.loader) is importlib.machinery.SourceFileLoader


def test_an_imported_module_runs_the_callback_now(make_module) -> None:
    name = make_module()
    module = importlib.import_module(name)
    seen: list[ModuleType] = []
    assert when_imported(name, "probe", seen.append) is True
    assert seen == [module]
    assert pending(name) == []


def test_the_same_key_replaces_the_waiting_callback(make_module) -> None:
    name = make_module()
    seen: list[str] = []
    when_imported(name, "seed", lambda module: seen.append("first"))
    when_imported(name, "seed", lambda module: seen.append("second"))
    when_imported(name, "other", lambda module: seen.append("other"))
    importlib.import_module(name)
    assert sorted(seen) == ["other", "second"]


def test_a_failing_callback_warns_and_the_import_succeeds(make_module) -> None:
    name = make_module()

    def broken(module: ModuleType) -> None:
        raise RuntimeError("cannot seed")

    when_imported(name, "seed", broken)
    with pytest.warns(RuntimeWarning, match="'seed'.*cannot seed"):
        module = importlib.import_module(name)
    assert module.VALUE == 1


def test_a_failed_import_leaves_the_callback_waiting(make_module, tmp_path: Path) -> None:
    name = make_module("raise ImportError('not yet')\n")
    seen: list[ModuleType] = []
    when_imported(name, "probe", seen.append)
    with pytest.raises(ImportError, match="not yet"):
        importlib.import_module(name)
    assert seen == [] and pending(name) == ["probe"]
    (tmp_path / f"{name}.py").write_text("VALUE = 2\n")
    importlib.invalidate_caches()
    sys.modules.pop(name, None)
    assert importlib.import_module(name).VALUE == 2
    assert len(seen) == 1


@pytest.mark.parametrize("keep", [True, False])
def test_keep_global_random_hides_the_imports_draws(make_module, keep: bool) -> None:
    name = make_module("import random\nimport numpy as np\nDRAWN = (random.random(), np.random.rand())\n")
    when_imported(name, "probe", lambda module: None, keep_global_random=keep)
    random.seed(5)
    np.random.seed(5)
    importlib.import_module(name)
    after_import = (random.random(), float(np.random.rand()))
    random.seed(5)
    np.random.seed(5)
    untouched = (random.random(), float(np.random.rand()))
    assert (after_import == untouched) is keep


def test_cancel_drops_the_callback(make_module) -> None:
    name = make_module()
    seen: list[ModuleType] = []
    when_imported(name, "probe", seen.append)
    cancel(name, "probe")
    assert pending(name) == []
    importlib.import_module(name)
    assert seen == []


def test_only_top_level_modules() -> None:
    with pytest.raises(ValueError, match="top-level modules only.*'tensorflow'"):
        when_imported("tensorflow.keras", "probe", lambda module: None)
