"""The fast exit after the test summary keeps pytest's exit status: failures still fail the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fast_exit import ENV

REPO = Path(__file__).resolve().parents[1]
# Printed by an atexit handler of the sample tests: only the interpreter's teardown runs it.
TEARDOWN = "import atexit\natexit.register(print, 'interpreter teardown ran')\n"


def _pytest(tmp_path: Path, body: str, fast_exit: bool, temp_root: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Run pytest with only the plugin on ``body``; ``temp_root``: the system's temp folder it starts with."""
    (tmp_path / "test_sample.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "RAY_TMPDIR", "PYTEST_DEBUG_TEMPROOT")}
    if fast_exit:
        env[ENV] = "1"
    if temp_root is not None:
        env["TMPDIR"] = str(temp_root)
    env["PYTHONPATH"] = str(REPO)
    # -c /dev/null: not this repository's configuration; -p: only the plugin under test.
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(tmp_path), "-p", "tests.fast_exit", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.parametrize("fast_exit", [True, False])
def test_a_failing_test_still_fails_the_run(tmp_path: Path, fast_exit: bool) -> None:
    result = _pytest(tmp_path, TEARDOWN + "def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n", fast_exit)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    assert (f"{ENV}=1" in result.stdout) is fast_exit
    assert ("interpreter teardown ran" in result.stdout) is not fast_exit


def test_a_passing_run_exits_zero_after_printing_its_summary(tmp_path: Path) -> None:
    result = _pytest(tmp_path, TEARDOWN + "def test_ok():\n    pass\n", fast_exit=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert f"{ENV}=1" in result.stdout
    assert "interpreter teardown ran" not in result.stdout


def test_no_tests_collected_keeps_its_status(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "X = 1\n", fast_exit=True)
    assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout + result.stderr


def test_the_temporary_files_atexit_hooks_would_delete_are_deleted(tmp_path: Path) -> None:
    """Like TF's autograph modules: made with tempfile, deleted by an atexit hook, which the fast exit skips."""
    record = tmp_path / "paths.txt"
    body = ("import atexit, os, tempfile\n"
            "def test_makes_a_file(tmp_path):\n"
            "    handle, path = tempfile.mkstemp(suffix='.py')\n"
            "    os.close(handle)\n"
            "    atexit.register(os.remove, path)\n"
            f"    open({str(record)!r}, 'w').write(path + '\\n' + str(tmp_path))\n")
    sample = tmp_path / "sample"
    sample.mkdir()
    result = _pytest(sample, body, fast_exit=True)
    assert result.returncode == 0, result.stdout + result.stderr
    made, test_tmp_path = record.read_text().splitlines()
    assert not os.path.exists(made)
    assert os.path.isdir(test_tmp_path)  # pytest's tmp_path folders are kept, as without the fast exit


def test_the_temporary_files_of_processes_the_tests_start_are_deleted(tmp_path: Path) -> None:
    """Like a killed replica's autograph modules: a child process makes a temporary file and never deletes it. Ray's
    session folder (its sockets, whose paths are short) stays in the temp folder the run started with."""
    record = tmp_path / "paths.txt"
    child = "import os, tempfile; print(tempfile.mkstemp(suffix='.py')[1]); print(os.environ['RAY_TMPDIR'])"
    body = ("import subprocess, sys\n"
            "def test_starts_a_process():\n"
            f"    out = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True).stdout\n"
            f"    open({str(record)!r}, 'w').write(out)\n")
    sample = tmp_path / "sample"
    sample.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    result = _pytest(sample, body, fast_exit=True, temp_root=root)
    assert result.returncode == 0, result.stdout + result.stderr
    made, ray_temp = record.read_text().splitlines()
    assert Path(made).parent.parent == root  # in the run's own folder under the temp folder, not in it
    assert not os.path.exists(made)
    assert ray_temp == str(root)
