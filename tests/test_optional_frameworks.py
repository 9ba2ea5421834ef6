"""fe_ray works with only one of torch / TensorFlow installed.

Each case runs a fresh interpreter (``python -S``) whose only site-packages is a copy of this environment's made of
symbolic links to every installed distribution except the blocked framework's: to Python (and to libraries that
probe for torch / TensorFlow themselves) that framework is simply not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child interpreter: BLOCKED, MISSING (the absent backend) and MODEL_FN (builds a model of the present
# framework) are defined in front of it.
SCRIPT = """
import numpy as np
import fe_ray as fe
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp

model = fe.build(MODEL_FN, "sgd")
network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                      MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"), UpdateOp(model=model, loss_name="mse")])
with network(mode="train", epoch=1):
    out = network.run_step({"x": np.ones((4, 3), np.float32), "y": np.zeros((4, 1), np.float32)})
assert np.isfinite(float(out["mse"]))
assert not any(name.split(".")[0] in BLOCKED for name in sys.modules)
try:
    fe.backend.get_backend(MISSING)
except ImportError as err:
    assert f"pip install 'fe_ray[{MISSING}]'" in str(err), err
else:
    raise AssertionError(f"the {MISSING} backend loaded without its framework")
print("OK")
"""

TORCH_MODEL = "import torch\nMODEL_FN = lambda: torch.nn.Linear(3, 1)\n"
TF_MODEL = "import keras\nMODEL_FN = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])\n"


def site_without(blocked: tuple[str, ...], target: Path) -> Path:
    """A site-packages folder of links to this environment's, leaving out the top-level names in ``blocked`` and
    their distributions' metadata."""
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p, "numpy").exists())
    target.mkdir()
    for entry in site.iterdir():
        top = entry.name.split("-")[0].split(".")[0].lower()
        if top in blocked or top.startswith(tuple(f"{name}_" for name in blocked)):  # tensorflow_cpu-*.dist-info
            continue
        (target / entry.name).symlink_to(entry)
    return target


@pytest.mark.timeout(180)
@pytest.mark.parametrize("blocked, missing, model", [(("tensorflow", "keras", "tf_keras"), "tf", TORCH_MODEL),
                                                     (("torch", "torchgen", "functorch"), "torch", TF_MODEL)],
                         ids=["torch-only", "tf-only"])
def test_fe_ray_runs_with_one_framework_missing(tmp_path: Path, blocked: tuple[str, ...], missing: str,
                                                model: str) -> None:
    pytest.importorskip("tensorflow" if "torch" in blocked else "torch")
    site = site_without(blocked, tmp_path / "site-packages")
    code = f"import sys\nBLOCKED = {blocked!r}\nMISSING = {missing!r}\n" + model + textwrap.dedent(SCRIPT)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=170)
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stdout + result.stderr
