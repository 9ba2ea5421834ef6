"""The README's examples: both reach >= 0.95 eval accuracy, and the same accuracy on 2 Ray replicas."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, *args: str) -> float:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "RAY_DEDUP_LOGS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    match = re.search(r"final eval accuracy: ([0-9.]+)", proc.stdout)
    assert match, proc.stdout[-2000:]
    return float(match.group(1))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("example", ["mnist_torch.py", "mnist_tf.py"])
def test_example_accuracy_in_process_and_on_two_replicas(example: str) -> None:
    in_process = run_example(example)
    assert in_process >= 0.95
    distributed = run_example(example, "--replicas", "2")
    # Exact gradient all-reduce: two replicas train the same model up to float summation order.
    assert distributed == pytest.approx(in_process, abs=0.01)
