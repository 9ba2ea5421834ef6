"""TestReport and TestCase: aggregate and per-instance cases passing and failing in Estimator.test() runs (torch and
TF), the JSON summary against an independent count, the Markdown report, file names, and errors."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import to_number  # noqa: E402
from fe_ray.trace import Accuracy, Data, Trace  # noqa: E402
from fe_ray.trace.io import TestReport  # noqa: E402
from fe_ray.trace.io.test_report import TestCase, report_name  # noqa: E402
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, tf_mlp, torch_mlp  # noqa: E402


class Record(Trace):
    """Keeps the test batches' labels, predictions and ids, for an independent count of failures."""

    def __init__(self) -> None:
        super().__init__(inputs=["y", "y_pred", "id"], mode="test")
        self.y: list[np.ndarray] = []
        self.pred: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []

    def on_batch_end(self, data: Any) -> None:
        self.y.append(np.asarray(to_number(data["y"])))
        self.pred.append(np.asarray(to_number(data["y_pred"])))
        self.ids.append(np.asarray(to_number(data["id"])))


def _correct(y: Any, y_pred: Any) -> np.ndarray:
    return np.argmax(to_number(y_pred), axis=-1) == to_number(y).reshape(-1)


def _cases() -> list[TestCase]:
    return [TestCase("accuracy is positive", lambda accuracy: accuracy > 0.0),
            TestCase("accuracy is above 100%", lambda accuracy: accuracy > 1.0),
            TestCase("every sample is right", _correct, aggregate=False),
            TestCase("at most 40 samples are wrong", _correct, aggregate=False, fail_threshold=40)]


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_report_json_and_markdown(tmp_path: Any, framework: str, capsys: pytest.CaptureFixture) -> None:
    train, evaluation = digits_arrays(framework, n_train=64, n_eval=40)
    evaluation["id"] = np.arange(1000, 1040)
    model = torch_mlp(lr=0.05) if framework == "torch" else tf_mlp(lr=0.05)
    record = Record()
    report = TestReport(_cases(), save_path=str(tmp_path / "out" / "qa.pdf"), data_id="id")
    assert report.inputs == ["id", "accuracy", "y", "y_pred"] and report.mode == {"test"}
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=16, test=evaluation),
                             classifier_network(model), epochs=1, traces=[Accuracy("y", "y_pred"), record, report],
                             log_steps=None)
    estimator.fit()
    summary = estimator.test(summary="Digits QA: run #1")
    accuracy = summary.history["test"]["accuracy"]
    accuracy = float(next(iter(accuracy.values())))

    path = tmp_path / "out" / "qa" / "resources" / "digits_qa_run_1_TestReport.json"
    with open(path, encoding="utf-8") as file:
        result = json.load(file)
    assert list(result) == ["title", "timestamp", "execution_time(s)", "tests"]
    assert result["title"] == "Digits QA: run #1" and result["execution_time(s)"] >= 0.0
    wrong = ~(np.concatenate(record.pred).argmax(-1) == np.concatenate(record.y))
    wrong_ids = np.concatenate(record.ids)[wrong].tolist()
    assert 0 < len(wrong_ids) <= 40  # a briefly trained model: some samples wrong, the threshold not reached
    assert result["tests"] == [
        {"test_type": "per-instance", "description": "every sample is right", "passed": False, "fail_threshold": 0,
         "fail_number": len(wrong_ids), "fail_id": wrong_ids},
        {"test_type": "per-instance", "description": "at most 40 samples are wrong", "passed": True,
         "fail_threshold": 40, "fail_number": len(wrong_ids), "fail_id": wrong_ids},
        {"test_type": "aggregate", "description": "accuracy is positive", "passed": True,
         "inputs": {"accuracy": pytest.approx(accuracy)}},
        {"test_type": "aggregate", "description": "accuracy is above 100%", "passed": False,
         "inputs": {"accuracy": pytest.approx(accuracy)}},
    ]
    markdown = (tmp_path / "out" / "qa" / "digits_qa_run_1_TestReport.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Digits QA: run #1")
    assert "| 4 | 2 | 2 |" in markdown  # total, passed, failed
    failed, passed = markdown.split("## Passed Tests")
    assert "accuracy is above 100%" in failed and "every sample is right" in failed
    assert "accuracy is positive" in passed and "at most 40 samples are wrong" in passed
    assert f"| 1 | accuracy is above 100% | accuracy={accuracy:.3f} |" in failed
    assert f"| 2 | every sample is right | <= 0 | {len(wrong_ids)} | {', '.join(map(str, wrong_ids))} |" in failed
    assert "FastEstimator-TestReport: Report written to" in capsys.readouterr().out

    # a second test() starts over (the per-instance results do not pile up); the title comes from test_title
    report.test_title = "Second"
    estimator.test(summary="again")
    with open(tmp_path / "out" / "qa" / "resources" / "again_TestReport.json", encoding="utf-8") as file:
        again = json.load(file)
    assert again["title"] == "Second" and again["tests"][0]["fail_number"] == len(wrong_ids)


def _system(name: str | None) -> Any:
    return SimpleNamespace(summary=SimpleNamespace(name=name))


def _run(report: TestReport, batches: list[dict[str, Any]], logs: dict[str, Any], name: str | None = "run") -> None:
    report.system = _system(name)
    report.on_begin(Data())
    report.on_epoch_begin(Data())
    for batch in batches:
        report.on_batch_end(Data(batch))
    data = Data()
    for key, value in logs.items():
        data.write_with_log(key, value)
    report.on_epoch_end(data)
    report.on_end(Data())


def test_values_are_stored_as_json_can_hold_them(tmp_path: Any) -> None:
    torch = pytest.importorskip("torch")
    cases = [TestCase("matrix", lambda cm: bool(np.trace(to_number(cm)) > 0)),
             TestCase("names", lambda name, score: score < 0.5),
             TestCase("positive", lambda x: np.asarray(x) > 0, aggregate=False)]
    report = TestReport(cases, save_path=str(tmp_path), test_title="Values", data_id="key")
    batches = [{"x": np.array([1, -1]), "key": np.array([b"a", b"b"])},
               {"x": np.array([-2, 3, 4]), "key": np.array([b"c", b"d", b"e"])}]
    _run(report, batches, {"cm": torch.tensor([[2, 1], [0, 3]]), "name": b"model", "score": np.float32(0.25)})
    # a save_path naming a folder: the report folder takes its name
    with open(tmp_path.parent / tmp_path.name / "resources" / "run_TestReport.json", encoding="utf-8") as file:
        tests = json.load(file)["tests"]
    assert tests[0]["fail_id"] == ["b", "c"] and tests[0]["fail_number"] == 2 and tests[0]["passed"] is False
    assert tests[1]["inputs"] == {"cm": [[2, 1], [0, 3]]}
    assert tests[2]["inputs"] == {"name": "model", "score": 0.25} and tests[2]["passed"] is True


def test_report_name_and_folder(tmp_path: Any) -> None:
    assert report_name("My Exp: v2 (final)") == "my_exp_v2_final_TestReport"
    assert report_name("a  b__c_") == "a_b_c_TestReport"
    report = TestReport(TestCase("t", lambda x: True), save_path=str(tmp_path / "reports" / "exp.v1.pdf"))
    assert report.save_dir == str(tmp_path / "reports" / "exp")
    assert report.resource_dir == str(tmp_path / "reports" / "exp" / "resources")
    assert not os.path.exists(report.save_dir)  # created when the files are written


def test_errors() -> None:
    with pytest.raises(ValueError, match=r"fail_threshold applies to per-instance tests only.*aggregate=False"):
        TestCase("t", lambda accuracy: True, fail_threshold=2)
    with pytest.raises(ValueError, match=r"fail_threshold must be a non-negative int .* got -1"):
        TestCase("t", lambda x: x, aggregate=False, fail_threshold=-1)
    with pytest.raises(ValueError, match=r"variadic parameters \['args'\]"):
        TestCase("t", lambda *args: True)
    with pytest.raises(TypeError, match=r"criteria must be a function .* got str"):
        TestCase("t", "accuracy > 0.5")
    with pytest.raises(TypeError, match=r"one or more TestCase objects, got \['dict'\]"):
        TestReport([{"description": "t"}], save_path="r")
    case = TestCase("list", lambda x: [True] * len(x), aggregate=False)
    with pytest.raises(TypeError, match=r"per-instance test 'list' must return a boolean numpy array.*got list"):
        _run(TestReport(case, save_path="r"), [{"x": np.zeros(2)}], {})
    case = TestCase("numbers", lambda x: np.asarray(x), aggregate=False)
    with pytest.raises(TypeError, match=r"got an array of dtype float64"):
        _run(TestReport(case, save_path="r"), [{"x": np.zeros(2)}], {})
    case = TestCase("score", lambda score: score)
    with pytest.raises(TypeError, match=r"aggregate test 'score' must return a bool, got float 0.5"):
        _run(TestReport(case, save_path="r"), [], {"score": 0.5})
    case = TestCase("ids", lambda x: np.asarray(x) > 0, aggregate=False)
    with pytest.raises(ValueError, match=r"returned 2 results for a batch of 3 ids \('id'\)"):
        _run(TestReport(case, save_path="r", data_id="id"), [{"x": np.ones(2), "id": np.arange(3)}], {})
    with pytest.raises(ValueError, match=r"needs a name for its files: pass Estimator.test\(summary="):
        _run(TestReport(TestCase("t", lambda x: True), save_path="r"), [], {}, name=None)
