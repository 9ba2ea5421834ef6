"""The fe-ray command: hyperparameter parsing, loading a script's get_estimator, train and test runs, bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fe_ray import cli

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''
import numpy as np
import torch

import fe_ray as fe
from fe_ray.dataset import NumpyDataset
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.trace import Trace

SEEN = {}


class CountSamples(Trace):
    """Logs how many samples each epoch of each mode saw."""

    def __init__(self):
        super().__init__(inputs="y", outputs="samples")

    def on_epoch_begin(self, data):
        self.count = 0

    def on_batch_end(self, data):
        self.count += len(data["y"])

    def on_epoch_end(self, data):
        data.write_with_log("samples", self.count)


def get_estimator(epochs=1, batch_size=4, lr=0.1, name="run"):
    SEEN.update(epochs=epochs, batch_size=batch_size, lr=lr, name=name)
    torch.manual_seed(0)  # the same initial weights in every run
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    data = NumpyDataset({"x": x, "y": x @ np.array([[1.0], [2.0], [3.0]], dtype=np.float32)})
    pipeline = fe.Pipeline(train_data=data, test_data=data, batch_size=batch_size)
    model = fe.build(model_fn=lambda: torch.nn.Linear(3, 1), optimizer_fn=lambda p: torch.optim.SGD(p, lr=lr))
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                              MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                              UpdateOp(model=model, loss_name="mse")])
    return fe.Estimator(pipeline=pipeline, network=network, epochs=epochs, log_steps=1, traces=[CountSamples()])


if __name__ == "__main__":
    raise SystemExit("the fe-ray command must not run the script's main block")
'''


@pytest.fixture
def script(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "cli_entry_script.py"
    path.write_text(SCRIPT)
    yield path
    sys.modules.pop("cli_entry_script", None)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


def test_hyperparameters_parse_as_literals_or_strings() -> None:
    parsed = cli.parse_hyperparameters(["--epochs", "2", "--learning-rate=1e-3", "--name", "s3://bucket/run",
                                        "--flag", "True", "--sizes", "[1, 2]", "--seed", "None"])
    assert parsed == {"epochs": 2, "learning_rate": 1e-3, "name": "s3://bucket/run", "flag": True, "sizes": [1, 2],
                      "seed": None}


def test_hyperparameters_parse_as_fastestimator_reads_them() -> None:
    """JSON where a Python literal fails (a lower-case boolean must not become the truthy string 'false'), the
    words up to the next flag joined (an unquoted list), and a flag without a value is ''."""
    parsed = cli.parse_hyperparameters(["--use_flag", "false", "--cfg", '{"a": true, "b": null}', "--sizes", "[64,",
                                        "128]", "--empty", "--path=a/b.txt"])
    assert parsed == {"use_flag": False, "cfg": {"a": True, "b": None}, "sizes": [64, 128], "empty": "",
                      "path": "a/b.txt"}


@pytest.mark.parametrize("pairs, message", [(["epochs", "2"], "expected a hyperparameter flag .*got 'epochs'"),
                                            (["--2x", "1"], "'--2x' names no hyperparameter")])
def test_bad_hyperparameter_pairs_are_named(pairs: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cli.parse_hyperparameters(pairs)


def test_train_calls_get_estimator_with_file_and_cli_hyperparameters(script: Path, tmp_path: Path) -> None:
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"epochs": 2, "name": "from-file", "lr": 0.2}))
    summary = cli.run(["train", str(script), "-hp", str(hp), "--name", "from-cli", "--batch-size", "8",
                       "--summary", "exp", "--no-warmup"])
    seen = sys.modules["cli_entry_script"].SEEN
    assert seen == {"epochs": 2, "batch_size": 8, "lr": 0.2, "name": "from-cli"}  # the command line wins
    assert summary.name == "exp"
    losses = summary.history["train"]["mse"]
    assert sorted(losses) == [1, 2, 3, 4]  # 2 epochs of 16 samples in batches of 8
    assert losses[3] + losses[4] < losses[1] + losses[2]  # the second epoch's loss is lower: it trained


def test_test_runs_the_test_mode(script: Path) -> None:
    summary = cli.run(["test", str(script)])
    assert list(summary.history["test"]["samples"].values()) == [16]
    assert "train" not in summary.history


def test_fastestimator_warmup_and_eager_options_reach_fit_and_test(script: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """FastEstimator's `--warmup False --eager True` forms (and a bare --eager) reach Estimator.fit / test."""
    import fe_ray as fe

    calls: list[tuple[str, dict]] = []
    monkeypatch.setattr(fe.Estimator, "fit", lambda self, **kwargs: calls.append(("fit", kwargs)))
    monkeypatch.setattr(fe.Estimator, "test", lambda self, **kwargs: calls.append(("test", kwargs)))
    cli.run(["train", str(script), "--warmup", "False", "--eager", "True", "--epochs", "3"])
    assert sys.modules["cli_entry_script"].SEEN["epochs"] == 3  # hyperparameters after the options still count
    cli.run(["train", str(script), "--eager"])
    cli.run(["test", str(script), "--eager", "True"])
    assert calls == [("fit", {"summary": None, "warmup": False, "eager": True}),
                     ("fit", {"summary": None, "warmup": True, "eager": True}),
                     ("test", {"summary": None, "eager": True})]


def test_run_fits_and_tests_or_calls_fastestimator_run(script: Path) -> None:
    """`run`: get_estimator's fit (train data) then test (test data); a script's fastestimator_run instead, when it
    defines one, with the hyperparameters."""
    summary = cli.run(["run", str(script), "--warmup", "False", "--summary", "both"])
    assert summary.name == "both" and sorted(summary.history) == ["test", "train"]
    assert list(summary.history["test"]["samples"].values()) == [16]
    sys.modules.pop("cli_entry_script", None)
    script.write_text(SCRIPT + "\n\ndef fastestimator_run(epochs=1, tag=''):\n    SEEN['run'] = (epochs, tag)\n"
                      "    return 'ran'\n")
    assert cli.run(["run", str(script), "--epochs", "2", "--tag", "x"]) == "ran"
    assert sys.modules["cli_entry_script"].SEEN == {"run": (2, "x")}  # get_estimator was not called
    with pytest.raises(SystemExit) as exit_info:
        cli.run(["run", str(script), "--lr", "0.1"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("argv, message", [
    (["train", "no_such_script.py"], "no such script 'no_such_script.py'"),
    (["train", "{missing}"], "no such script"),
    (["train", "{script}", "--epoch", "2"], r"does not take these hyperparameters .*takes: epochs, batch_size, lr, "
                                            "name"),
    (["train", "{script}", "--eager", "true"], r"--eager: invalid choice: 'true' \(choose from True, False\)"),
    (["train", "{script}", "--warmup", "no"], r"--warmup: invalid choice: 'no'"),
    (["train", "{script}", "-hp", "{missing}"], "cannot read hyperparameters"),
])
def test_bad_input_exits_2_naming_it(script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     argv: list[str], message: str) -> None:
    argv = [item.format(script=script, missing=tmp_path / "missing.json") for item in argv]
    with pytest.raises(SystemExit) as exit_info:
        cli.run(argv)
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_script_without_get_estimator_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cli_no_entry.py"
    path.write_text("VALUE = 1\n")
    try:
        with pytest.raises(SystemExit):
            cli.run(["train", str(path)])
    finally:
        sys.modules.pop("cli_no_entry", None)
    assert "cli_no_entry.py defines no get_estimator()" in capsys.readouterr().err


def test_a_get_estimator_returning_no_estimator_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cli_no_return.py"
    path.write_text("def get_estimator(epochs=1):\n    estimator = None  # built, but not returned\n")
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli.run(["train", str(path)])
    finally:
        sys.modules.pop("cli_no_return", None)
    assert exit_info.value.code == 2
    assert "returned NoneType, not an Estimator; end it with `return fe.Estimator(" in capsys.readouterr().err


@pytest.mark.parametrize("body", ["import numpy\nnumpy.zeros(3).reshape(2, 2)\n",
                                  "def get_estimator(lr=0.1):\n    raise ValueError(f'bad lr {lr}')\n"])
def test_a_value_error_of_the_scripts_own_code_keeps_its_type_and_traceback(tmp_path: Path, body: str) -> None:
    """Only the command's bad input is a usage error (exit 2); a ValueError raised by the script itself, at import
    or in get_estimator, propagates as it is, as every other error of the run does."""
    path = tmp_path / "cli_own_error.py"
    path.write_text(body)
    try:
        with pytest.raises(ValueError, match="cannot reshape|bad lr 0.1") as info:
            cli.run(["train", str(path)])
    finally:
        sys.modules.pop("cli_own_error", None)
    assert not isinstance(info.value, cli.UsageError) and info.traceback[-1].path == path


def test_a_script_named_like_an_imported_module_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "json.py"
    path.write_text("def get_estimator():\n    return None\n")
    with pytest.raises(ValueError, match="would be imported as 'json', the name of the already imported module"):
        cli.load_entry_point(str(path))
    assert sys.modules["json"] is json


@pytest.mark.timeout(300)
def test_console_command_trains_and_exits_0(script: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "fe_ray.cli", "train", str(script), "--epochs", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "must not run" not in proc.stderr


def test_logs_command_plots_a_folder_of_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    for name, scale in (("run_1", 1.0), ("run_2", 2.0)):
        lines = [f"FastEstimator-Train: step: {step}; ce: {scale / step};" for step in range(1, 6)]
        lines.append(f"FastEstimator-Eval: step: 5; epoch: 1; ce: {scale / 4};")
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "plots"  # created by the command
    assert cli.run(["logs", str(tmp_path), "--group_by", "_n", "--smooth", "0.5", "--save", str(out)]) is None
    with Image.open(out / "parse_logs.png") as image:
        assert image.size[0] > 100
    assert "Saving to" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        cli.run(["logs", str(tmp_path), "--extension", ".log"])
    assert exit_info.value.code == 2
    assert "no files ending with '.log'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.run(["logs", str(tmp_path), "--unknown", "1"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.run(["logs", str(tmp_path / "missing")])
    assert exit_info.value.code == 2
    assert f"log folder or file {str(tmp_path / 'missing')!r} does not exist" in capsys.readouterr().err
    # One log file, as FastEstimator takes it: its own extension, the figure saved next to it by default.
    single = tmp_path / "single"
    single.mkdir()
    (single / "only.log").write_text((tmp_path / "run_1.txt").read_text())
    assert cli.run(["logs", str(single / "only.log"), "--save"]) is None
    assert (single / "parse_logs.png").exists()


def test_plot_command_draws_a_saved_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    from fe_ray.search import GridSearch

    search = GridSearch(lambda search_idx, a, b: {"prod": a * b, "sum": a + b}, params={"a": [1, 2], "b": [3, 4]},
                        name="grid")
    search.fit()
    search.save(str(tmp_path))
    path = str(tmp_path / "grid.json")
    assert cli.run(["plot", path, "--title", "two params", "--save"]) is None  # into the file's folder
    with Image.open(tmp_path / "figure.png") as image:
        assert image.size[0] > 100
    out = tmp_path / "out"
    cli.run(["plot", path, "--draw", "parallel", "--color_by", "sum", "--ignore", "prod", "--save", str(out)])
    assert (out / "figure.png").exists()
    with pytest.raises(SystemExit) as exit_info:
        cli.run(["plot", path, "--draw", "cartesian", "--save", str(out)])  # 2 parameters: not a line plot
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Cartesian plots need exactly 1 varying parameter" in err
    assert "pick the plot with --draw cartesian|heatmap|parallel, leave keys out with --ignore" in err


def test_command_errors_name_the_fix_with_the_commands_usage(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run_1.txt"
    log.write_text("FastEstimator-Train: step: 1; ce: 1.0;\n")
    (tmp_path / "empty").mkdir()
    cases = [
        (["logs", str(tmp_path / "empty")], r"holds no files ending with '\.txt' in it \(--recursive also searches "
                                            r"its subfolders\); pass the ending of your log files with --extension"),
        (["train", str(tmp_path / "nothere.py")], r"no such script .*nothere\.py"),
        (["train", str(log)], r"run_1\.txt' is not a Python file"),
        (["test", str(tmp_path / "nothere.py"), "--no-warmup"], r"--warmup / --no-warmup are options of fe-ray train"),
        (["test", str(tmp_path / "nothere.py"), "--warmup", "False"], r"--warmup / --no-warmup are options of fe-ray"),
        (["plot", str(tmp_path / "nothere.json")], r"no saved search file at .*nothere\.json'; pass the <name>\.json"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            cli.run(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and re.search(message, err), (argv, err)
        assert f"usage: fe-ray {argv[0]}" in err, err  # the command's own usage line
        assert "pick the plot with" not in err  # no hint about the plot's other options
