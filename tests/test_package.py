"""The top-level namespace: FastEstimator's subpackage paths (``fe.dataset.NumpyDataset``, ``fe.schedule.
cosine_decay``) work right after ``import fe_ray as fe``, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_subpackages_are_attributes_of_the_package() -> None:
    code = ("import fe_ray as fe\n"
            "print(fe.dataset.NumpyDataset.__name__, fe.schedule.cosine_decay.__name__, fe.pipeline.Pipeline.__name__,"
            " fe.slicer.ChunkSlicer.__name__, fe.op.numpyop.LambdaOp.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.split() == ["NumpyDataset", "cosine_decay", "Pipeline", "ChunkSlicer", "LambdaOp"]
