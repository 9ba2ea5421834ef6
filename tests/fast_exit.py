"""Pytest plugin: with ``FE_RAY_TEST_FAST_EXIT=1`` the test process ends right after pytest's last hook.

`scripts/dev test` (and so CI) sets the variable. One CI run printed "2642 passed, 7 skipped" and then died with
SIGSEGV (exit 139) during the interpreter's teardown, with TensorFlow, PyTorch and Ray all loaded in this one process;
neither 29 runs of a small script that loads and uses the three nor full local runs reproduced it. The results are
final once pytest has printed its summary, so the process then ends with the session's own exit status (after shutting
down any local Ray) and skips only that teardown. A crash during the tests still fails the run, and a failed test still
gives a failing status (``tests/test_fast_exit.py`` checks both). ``FE_RAY_TEST_FAST_EXIT=0 scripts/dev test``
(or pytest run without the variable) runs the full teardown; unset, `scripts/dev test` sets it to 1.

The teardown also runs the process's ``atexit`` hooks, some of which delete temporary files (TF deletes each module
autograph generated). So that a fast exit leaves none behind, the process's own temporary files (Python's
``tempfile``) go to a folder of the run's own, removed before the exit. So do those of every process the tests start
(``TMPDIR``): the local Ray's workers, among them replicas that tests kill on purpose or that a module's
``ray.shutdown()`` kills, which never run their exit hooks either (one CI run left 4,262 autograph modules in
``/tmp``). Ray's own session folder stays where it was (``RAY_TMPDIR``): it holds the sockets, whose paths are
limited to 107 bytes, and the logs. pytest's ``tmp_path`` folders stay where they were too (``PYTEST_DEBUG_TEMPROOT``),
so the last runs' are kept for inspection as usual.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

ENV = "FE_RAY_TEST_FAST_EXIT"
_SESSION = pytest.StashKey[pytest.Session]()
_TEMP = pytest.StashKey[str]()
#: pytest's variable for the root of its ``tmp_path`` folders.
TEMPROOT_ENV = "PYTEST_DEBUG_TEMPROOT"
#: Ray's variable for the folder of its session folders (on Linux it otherwise follows ``TMPDIR``).
RAY_TEMP_ENV = "RAY_TMPDIR"


def _enabled() -> bool:
    return os.environ.get(ENV) == "1"


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session
    if _enabled():
        root = tempfile.gettempdir()
        os.environ.setdefault(TEMPROOT_ENV, root)
        os.environ.setdefault(RAY_TEMP_ENV, root)
        # A short name: a test may start a local Ray under a temporary folder, and a socket's path has <= 107 bytes.
        tempfile.tempdir = session.config.stash[_TEMP] = tempfile.mkdtemp(prefix="fe_ray_t")
        os.environ["TMPDIR"] = tempfile.tempdir  # inherited by the local Ray (so its workers) and subprocesses


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _enabled():
        terminalreporter.write_line(f"{ENV}=1: the process exits with the session's status after pytest's last hook, "
                                    "without the interpreter's teardown (tests/fast_exit.py).")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if not _enabled() or session is None:
        return
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():  # the local Ray's processes must not outlive the run
        ray.shutdown()
    shutil.rmtree(config.stash.get(_TEMP, ""), ignore_errors=True)  # what the skipped atexit hooks would delete
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(session.exitstatus))
