"""Pytest plugin: with ``FE_RAY_TEST_FAST_EXIT=1`` the test process ends right after pytest's last hook.

`scripts/dev test` (and so CI) sets the variable. One CI run printed "2642 passed, 7 skipped" and then died with
SIGSEGV (exit 139) during the interpreter's teardown, with TensorFlow, PyTorch and Ray all loaded in this one process;
neither 29 runs of a small script that loads and uses the three nor full local runs reproduced it. The results are
final once pytest has printed its summary, so the process then ends with the session's own exit status (after shutting
down any local Ray) and skips only that teardown. A crash during the tests still fails the run, and a failed test still
gives a failing status (``tests/test_fast_exit.py`` checks both). ``FE_RAY_TEST_FAST_EXIT=0 scripts/dev test``
(or pytest run without the variable) runs the full teardown; unset, `scripts/dev test` sets it to 1.
"""

from __future__ import annotations

import os
import sys

import pytest

ENV = "FE_RAY_TEST_FAST_EXIT"
_SESSION = pytest.StashKey[pytest.Session]()


def _enabled() -> bool:
    return os.environ.get(ENV) == "1"


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session


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
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(session.exitstatus))
