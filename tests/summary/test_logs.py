"""fe.summary.logs: parsing what fe_ray's Logger prints back into the Summary the run returned, FastEstimator's
log quirks (error bands, ``step: None``), averaging runs, grouping files, and the matplotlib plots."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.summary import Summary, ValWithError  # noqa: E402
from fe_ray.summary.logs import (  # noqa: E402
    log_parse,
    parse_log_dir,
    parse_log_file,
    parse_log_files,
    plot_logs,
    visualize_logs,
)
from fe_ray.summary.summary import average_summaries  # noqa: E402
from fe_ray.trace.logger import format_value  # noqa: E402

START_KEYS = {"num_device", "logging_interval"}  # printed on the Start line, which FastEstimator's parser skips


def _fit_and_test(capsys: pytest.CaptureFixture, epochs: int = 2) -> tuple[str, Summary, Summary]:
    """A real in-process run (tiny NumpyDataset, torch Linear model): its printed output, fit's and test's Summary."""
    import torch

    from fe_ray.dataset import NumpyDataset
    from fe_ray.op.tensorop.loss import MeanSquaredError
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp

    torch.manual_seed(0)
    x = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    data = NumpyDataset({"x": x, "y": x @ np.array([[1.0], [2.0], [3.0]], dtype=np.float32)})
    pipeline = fe.Pipeline(train_data=data, eval_data=data, test_data=data, batch_size=4)
    model = fe.build(model_fn=lambda: torch.nn.Linear(3, 1), optimizer_fn=lambda p: torch.optim.SGD(p, lr=0.05))
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                              MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                              UpdateOp(model=model, loss_name="mse")])
    estimator = fe.Estimator(pipeline=pipeline, network=network, epochs=epochs, log_steps=2)
    capsys.readouterr()
    fitted = estimator.fit("run")
    tested = estimator.test()
    return capsys.readouterr().out, fitted, tested


def _assert_same_history(parsed: dict[str, Any], expected: dict[str, Any]) -> None:
    assert set(parsed) == set(expected)
    for key, steps in expected.items():
        assert set(parsed[key]) == set(steps), key
        for step, value in steps.items():
            # The Logger prints 7 significant digits.
            assert parsed[key][step] == pytest.approx(float(value), rel=1e-6, abs=1e-12), (key, step)


def test_parse_log_file_round_trips_a_real_fit_and_test(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    output, fitted, tested = _fit_and_test(capsys)
    log = tmp_path / "linear_run.txt"
    log.write_text(output)
    parsed = parse_log_file(str(log), ".txt")
    assert parsed.name == "linear_run"
    assert set(parsed.history) == {"train", "eval", "test"}
    # train: every logged step (1, 2, 4, ...), the epoch ends and the Finish line's values
    expected_train = {key: steps for key, steps in fitted.history["train"].items() if key not in START_KEYS}
    # The learning rate's key follows the model's name, which depends on how many models earlier tests built.
    assert {"mse", "epoch", "steps/sec", "total_time(sec)"} <= set(expected_train)
    assert any(key.endswith("_lr") for key in expected_train)
    _assert_same_history(parsed.history["train"], expected_train)
    assert parsed.history["train"]["epoch"] == {4: 1.0, 8: 2.0}
    assert sorted(parsed.history["train"]["mse"]) == [1, 2, 4, 6, 8]
    # Evaluation's steps/sec is written on the "Eval Progress" lines, which the parser skips as FastEstimator's does.
    _assert_same_history(parsed.history["eval"],
                         {key: value for key, value in fitted.history["eval"].items() if key != "steps/sec"})
    assert parsed.history["eval"]["epoch"] == {4: 1.0, 8: 2.0}
    _assert_same_history(parsed.history["test"], tested.history["test"])
    assert parsed.history["test"]["epoch"] == {8: 2.0}
    # eval progress lines ("progress: 2/4") add no key
    assert "progress" not in parsed.history["eval"]


def test_error_bands_none_steps_and_fastestimator_quirks(tmp_path: Path) -> None:
    band = ValWithError(0.25, 0.5, 0.75)
    lines = [
        "FastEstimator-Start: step: 1; num_device: 0; logging_interval: 100;",
        "FastEstimator-Train: step: 1; ce: 2.302585; steps/sec: 1e+03;",
        "FastEstimator-Train: step: 100; ce: -1.5e-05; lr: .001; epoch: 1; note: hello; arr: [1., 2.];",
        f"FastEstimator-Eval: step: 100; epoch: 1; dice: {format_value(band)}; acc: None; ce: nan;",
        "2024-01-01 12:00:00 (pid=12) FastEstimator-Eval: step: 200; epoch: 2; dice: (0.1, 0.2, 0.3);",
        "FastEstimator-Eval: step: 200; progress: 2/4;",
        "Some other line: step: 7; ce: 1.0;",
        "FastEstimator-Finish: step: 200; total_time(sec): 12.5; model_lr: 0.001;",
        "FastEstimator-Test: step: None; epoch: 0; acc|ds1: 0.875; calibration_error: (0.01, 0.02, 0.03);",
    ]
    log = tmp_path / "quirks.log"
    log.write_text("\n".join(lines) + "\n")
    history = parse_log_file(str(log), ".log").history
    assert history["train"]["ce"] == {1: pytest.approx(2.302585), 100: pytest.approx(-1.5e-5)}
    assert history["train"]["steps/sec"] == {1: 1000.0} and history["train"]["lr"] == {100: 0.001}
    assert "note" not in history["train"] and "arr" not in history["train"]
    assert "num_device" not in history["train"]  # Start lines are skipped
    assert history["train"]["total_time(sec)"] == {200: 12.5} and history["train"]["model_lr"] == {200: 0.001}
    dice = history["eval"]["dice"]
    assert {step: value.as_tuple() for step, value in dice.items()} == {100: band.as_tuple(), 200: (0.1, 0.2, 0.3)}
    assert "acc" not in history["eval"] and math.isnan(history["eval"]["ce"][100])
    assert history["eval"]["epoch"] == {100: 1.0, 200: 2.0}
    # step None: the last logged step, and the test's guessed epoch (0) replaced by the last logged epoch
    assert history["test"]["acc|ds1"] == {200: 0.875} and history["test"]["epoch"] == {200: 2.0}
    assert {step: value.as_tuple() for step, value in history["test"]["calibration_error"].items()} == \
        {200: (0.01, 0.02, 0.03)}
    assert set(history) == {"train", "eval", "test"}


def test_parse_log_file_errors_name_the_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "bad.txt"
    log.write_text("FastEstimator-Train: step: 1; ce: 1.0;\nFastEstimator-Train: ce: 1.0; step: 2;\n")
    with pytest.raises(ValueError, match=r"Line 2 of log file .*bad\.txt.* does not start with its step"):
        parse_log_file(str(log), ".txt")
    log.write_text("FastEstimator-Eval: step: two; ce: 1.0;\n")
    with pytest.raises(ValueError, match=r"has the step 'two'"):
        parse_log_file(str(log), ".txt")
    with pytest.raises(ValueError, match=r"got the folder .*use parse_log_dir"):
        parse_log_file(str(tmp_path), ".txt")
    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        parse_log_file(str(tmp_path / "missing.txt"), ".txt")
    log.write_text("")
    empty = parse_log_file(str(log), None)
    assert empty.name == "bad.txt" and not empty.history


def test_parse_log_iter_adds_lines_to_the_given_summary() -> None:
    # FastEstimator's log_parse.parse_log_iter(source, sync): lines from anywhere, added into an existing Summary.
    lines = [
        "FastEstimator-Start: step: 1; logging_interval: 2; num_device: 0;",
        "FastEstimator-Warn: No ModelSaver Trace detected. Models will not be saved.",
        "FastEstimator-Train: step: 2; steps/sec: 161.24; ce: 0.5;",
        "FastEstimator-Train: step: 4; epoch: 1; epoch_time(sec): 0.57;",
        "FastEstimator-Eval: step: 4; epoch: 1; ce: 0.25; cal_ci: (0.1981, 0.2144, 0.2512);",
        "confusion_matrix:",
        "[[1,0],",
        " [0,1]];",
        "FastEstimator-Finish: step: 4; model_lr: 0.1; total_time(sec): 19.62;",
        "FastEstimator-Test: step: None; epoch: 0; ce: 0.125;",
    ]
    sync = Summary("run")
    sync.history["train"]["ce"][1] = 0.75
    assert log_parse.parse_log_iter(lines, sync) is sync
    assert sync.history["train"]["ce"] == {1: 0.75, 2: 0.5}  # added to what the Summary held
    assert sync.history["train"]["model_lr"] == {4: 0.1} and "num_device" not in sync.history["train"]
    assert sync.history["eval"]["cal_ci"][4].as_tuple() == (0.1981, 0.2144, 0.2512)
    assert "confusion_matrix" not in sync.history["eval"]
    assert sync.history["test"]["ce"] == {4: 0.125} and sync.history["test"]["epoch"] == {4: 1.0}
    with pytest.raises(ValueError, match=r"Line 1 of log 'run' does not start with its step"):
        log_parse.parse_log_iter(["FastEstimator-Train: ce: 1.0; step: 2;"], sync)
    with pytest.raises(TypeError, match=r"single string; pass text\.splitlines\(\)"):
        log_parse.parse_log_iter("\n".join(lines), sync)
    with pytest.raises(TypeError, match=r"sync must be the Summary"):
        log_parse.parse_log_iter(lines, {})


def _summary(name: str, history: dict[str, dict[str, dict[int, Any]]]) -> Summary:
    summary = Summary(name)
    summary.load_state_dict({"history": history})
    return summary


def test_average_summaries_of_two_runs() -> None:
    first = _summary("a_1", {"train": {"ce": {1: 1.0, 2: np.float32(0.5), 3: 0.4}, "epoch": {2: 1}, "note": {1: "x"}},
                             "eval": {"acc": {2: ValWithError(0.1, 0.6, 0.9), 4: "acc=0.7"}},
                             "test": {"acc": {2: 0.8}}})
    second = _summary("a_2", {"train": {"ce": {1: 3.0, 2: 0.5}, "epoch": {2: 1}},
                              "eval": {"acc": {2: 0.8, 4: np.array([0.9])}},
                              "test": {"acc": {4: 0.6}}})
    combined = average_summaries("a", [first, second])
    assert combined.name == "a"
    ce = combined.history["train"]["ce"]
    assert ce[1].as_tuple() == pytest.approx((2 - math.sqrt(2), 2.0, 2 + math.sqrt(2)))
    assert isinstance(ce[1], ValWithError)
    assert ce[2] == 0.5 and not isinstance(ce[2], ValWithError)  # equal values stay a plain value
    assert ce[3] == pytest.approx(0.4)  # held by one run only
    assert "epoch" not in combined.history["train"] and "note" not in combined.history["train"]
    acc = combined.history["eval"]["acc"]
    assert acc[2].as_tuple() == pytest.approx((0.7 - math.sqrt(0.02), 0.7, 0.7 + math.sqrt(0.02)))
    assert acc[4].as_tuple() == pytest.approx((0.8 - math.sqrt(0.02), 0.8, 0.8 + math.sqrt(0.02)))
    # test values pooled at the last step any run tested at
    tested = combined.history["test"]["acc"]
    assert list(tested) == [4]
    assert tested[4].as_tuple() == pytest.approx((0.7 - math.sqrt(0.02), 0.7, 0.7 + math.sqrt(0.02)))
    assert first.history["train"]["ce"][1] == 1.0  # inputs untouched
    single = average_summaries("solo", [first])
    assert single is first and first.name == "solo"
    assert average_summaries("none", []).history == {}
    with pytest.raises(TypeError, match=r"Summary objects, got dict"):
        average_summaries("bad", [first, {"train": {}}])


def _write_run(path: Path, ce: list[float], eval_acc: float) -> None:
    lines = [f"FastEstimator-Train: step: {step}; ce: {value};" for step, value in enumerate(ce, start=1)]
    lines.append(f"FastEstimator-Eval: step: {len(ce)}; epoch: 1; acc: {eval_acc};")
    path.write_text("\n".join(lines) + "\n")


def test_parse_log_files_groups_runs_by_regex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_run(tmp_path / "a_1.txt", [1.0, 0.5, 0.25], 0.5)
    _write_run(tmp_path / "a_2.txt", [3.0, 0.5, 0.75], 0.7)
    _write_run(tmp_path / "b_1.txt", [2.0, 1.0, 0.5], 0.9)
    seen: dict[str, Any] = {}

    def record(experiments: list[Summary], **kwargs: Any) -> None:
        seen.update(experiments={exp.name: exp for exp in experiments}, **kwargs)

    monkeypatch.setattr(log_parse, "visualize_logs", record)
    paths = [str(tmp_path / name) for name in ("a_1.txt", "a_2.txt", "b_1.txt")]
    parse_log_files(paths, ".txt", smooth_factor=0.5, ignore_metrics={"acc"}, group_by=r"(.*)_[\d]+\.txt")
    assert set(seen["experiments"]) == {"a", "b"}
    a_ce = seen["experiments"]["a"].history["train"]["ce"]
    assert a_ce[1].as_tuple() == pytest.approx((2 - math.sqrt(2), 2.0, 2 + math.sqrt(2))) and a_ce[2] == 0.5
    assert seen["experiments"]["b"].history["train"]["ce"] == {1: 2.0, 2: 1.0, 3: 0.5}
    assert seen["smooth_factor"] == 0.5 and seen["ignore_metrics"] == {"acc"} and seen["save_path"] is None
    # without group_by, one experiment per file, named after it
    parse_log_files(paths, ".txt")
    assert set(seen["experiments"]) == {"a_1", "a_2", "b_1"}
    # a pattern without groups names the group by its whole match
    parse_log_files(paths, ".txt", group_by=r"^[ab]")
    assert set(seen["experiments"]) == {"a", "b"}
    # save without a path: next to the first log
    parse_log_files(paths, save=True)
    assert seen["save_path"] == str(tmp_path)

    with pytest.raises(ValueError, match=r"The log 'b_1\.txt' did not match the group_by regex '\(a\)_'"):
        parse_log_files(paths, group_by=r"(a)_")
    with pytest.raises(ValueError, match=r"group_by '\(\.\*' is not a valid regex"):
        parse_log_files(paths, group_by=r"(.*")
    with pytest.raises(ValueError, match=r"at least one log file, got file_paths=\[\]"):
        parse_log_files([])


def _titles(fig: Any) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def test_plot_logs_draws_one_panel_per_metric() -> None:
    first = _summary("run10", {"train": {"ce": {1: 1.0, 2: 0.5, 3: 0.25}, "epoch": {3: 1}, "lr": {3: 0.1}},
                               "eval": {"ce": {3: 0.6}, "dice": {3: ValWithError(0.2, 0.3, 0.4)},
                                        "acc|ds1": {3: 0.5, 6: 0.6}, "acc|ds2": {3: 0.4, 6: 0.7}}})
    second = _summary("run2", {"train": {"ce": {1: ValWithError(0.9, 1.0, 1.1), 2: 0.7, 3: 0.3}}})
    fig = plot_logs([first, second])
    # graphs sorted by name first, then the text-only metric (lr); epoch is never drawn
    assert _titles(fig) == ["acc", "ce", "dice", "lr"]
    panels = dict(zip(_titles(fig), fig.axes))
    assert len(panels["acc"].get_lines()) == 2  # acc|ds1 and acc|ds2 share the acc panel
    assert len(panels["ce"].collections) >= 1  # run2's error band
    assert [text.get_text() for text in panels["lr"].texts] == ["run10 (train): 0.10000"]
    assert [text.get_text() for text in fig.legends[0].get_texts()][:2] == ["run2 (train)", "run10 (ds1 eval)"]
    # a smoothed curve keeps its ends' steps but not its values
    smooth = plot_logs(first, smooth_factor=1, include_metrics={"ce"}, pretty_names=True, share_legend=False)
    assert _titles(smooth) == ["Ce"] and not smooth.legends
    train_line = smooth.axes[0].get_lines()[0]
    assert list(train_line.get_xdata()) == [1, 2, 3]
    assert not np.allclose(train_line.get_ydata(), [1.0, 0.5, 0.25])
    assert smooth.axes[0].get_legend() is not None
    assert _titles(plot_logs(first, ignore_metrics="acc")) == ["ce", "dice", "lr"]
    assert _titles(plot_logs([])) == [""]


def test_a_lone_interval_is_drawn_from_its_ends_even_when_its_middle_lies_outside() -> None:
    """CalibrationError(confidence_interval=...) logs its debiased estimate with an interval about the plain one, so
    the middle may lie outside (a real test value: (0.1683, 0.0654, 0.2166)); errorbar's offsets raised
    "'yerr' must not contain negative values" for it, so plotting such a log failed."""
    summary = _summary("run", {"train": {"ce": {1: 1.0, 2: 0.5}},
                               "test": {"calibration_error": {2: ValWithError(0.1683, 0.0654, 0.2166)}}})
    panel = dict(zip(_titles(fig := plot_logs(summary)), fig.axes))["calibration_error"]
    (interval,) = panel.get_lines()
    assert list(interval.get_xdata()) == [2, 2] and list(interval.get_ydata()) == [0.1683, 0.2166]
    np.testing.assert_allclose(panel.collections[0].get_offsets(), [[2, 0.0654]])  # the logged value's marker


def test_visualize_logs_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from PIL import Image

    first = _summary("a", {"train": {"ce": {1: 1.0, 2: 0.5, 3: 0.25}, "acc": {1: 0.1, 3: 0.9}},
                           "eval": {"ce": {3: ValWithError(0.4, 0.5, 0.6)}}})
    path = visualize_logs([first], save_path=str(tmp_path / "plots" / "curves.png"))
    assert path == str(tmp_path / "plots" / "curves.png")
    assert f"Saving to {path}" in capsys.readouterr().out
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 300 and image.height > 200
    # a folder gets parse_logs.png; a name without extension gets .png
    assert visualize_logs(first, save_path=str(tmp_path), verbose=False) == str(tmp_path / "parse_logs.png")
    assert visualize_logs(first, save_path=str(tmp_path / "noext"), verbose=False) == str(tmp_path / "noext.png")
    assert capsys.readouterr().out == ""
    # no save_path and no window (Agg): a temporary PNG, its path printed
    shown = visualize_logs(first)
    assert shown is not None and os.path.isfile(shown) and shown in capsys.readouterr().out
    os.remove(shown)


def test_parse_log_dir_reads_the_folder_and_saves_there(tmp_path: Path) -> None:
    _write_run(tmp_path / "a_1.txt", [1.0, 0.5, 0.25], 0.5)
    (tmp_path / "sub").mkdir()
    _write_run(tmp_path / "sub" / "a_2.txt", [3.0, 0.5, 0.75], 0.7)
    (tmp_path / "notes.md").write_text("FastEstimator-Train: step: 1; ce: 9.0;\n")
    parse_log_dir(str(tmp_path), recursive_search=True, save=True, group_by=r"(.*)_\d")
    assert (tmp_path / "parse_logs.png").is_file()
    with pytest.raises(ValueError, match=r"did not match the group_by regex"):
        parse_log_dir(str(tmp_path), log_extension=".md", save=True, group_by=r"(.*)_\d")


def test_bad_arguments_name_the_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _summary("a", {"train": {"ce": {1: 1.0, 2: 0.5}}})
    for bad in (-1, float("nan"), "1", True):
        with pytest.raises(ValueError, match=rf"smooth_factor must be a non-negative number.*got {bad!r}"):
            plot_logs(summary, smooth_factor=bad)
    with pytest.raises(TypeError, match=r"Summary objects .*got dict"):
        visualize_logs([{"train": {}}], save_path=str(tmp_path))
    with pytest.raises(ValueError, match=r"Cannot save the figure as .*curves\.txt.*png"):
        visualize_logs(summary, save_path=str(tmp_path / "curves.txt"))
    # FastEstimator's plotly format: a page around the static image.
    page = (tmp_path / "curves.html").read_text() if visualize_logs(summary, save_path=str(tmp_path / "curves.html"),
                                                                     verbose=False) else ""
    assert page.startswith("<!DOCTYPE html>") and 'src="data:image/png;base64,iVBOR' in page
    with pytest.raises(TypeError, match=r"save_path must be a file or folder path.*got 3"):
        visualize_logs(summary, save_path=3)
    with pytest.raises(ValueError, match=r"no files ending with '\.log'"):
        parse_log_dir(str(tmp_path), log_extension=".log")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "matplotlib" else real_find_spec(name, *args))
    with pytest.raises(ImportError, match=r"pip install matplotlib"):
        plot_logs(summary)


def test_logs_is_reachable_from_fe_without_loading_matplotlib() -> None:
    code = ("import sys, fe_ray as fe; import fe_ray.summary.logs; "
            "assert fe.summary.logs.visualize_logs is fe_ray.summary.logs.log_plot.visualize_logs; "
            "print('matplotlib' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
