"""TestReport: run pass/fail test cases over ``Estimator.test()`` and write a JSON summary and a Markdown report."""

from __future__ import annotations

import inspect
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import numpy as np

from fe_ray.trace.trace import Data, Trace, to_loggable
from fe_ray.util import to_list


class TestCase:
    """One check for :class:`TestReport`.

    ``criteria``'s parameter names are the keys it reads: ``def criteria(accuracy): ...`` gets the value of
    ``"accuracy"``.

    * An aggregate case (``aggregate=True``) runs once at the end of the test epoch on that event's values (metrics
      written by other traces, averaged losses) and returns True when it passes.
    * A per-instance case runs after every test batch on the batch's values and returns a boolean numpy array with
      one entry per sample (True where the sample passes). It fails when more than ``fail_threshold`` samples fail
      over the whole test run.

    Args:
        description: What the case checks (shown in the report).
        criteria: The check (see above).
        aggregate: Whether the case is aggregate (True) or per-instance (False).
        fail_threshold: Per-instance cases only: how many failing samples are tolerated.

    Raises:
        ValueError: If ``fail_threshold`` is set for an aggregate case or is negative, or ``criteria`` takes
            ``*args`` / ``**kwargs`` (its parameter names must be keys).
        TypeError: If ``criteria`` is not callable.
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, description: str, criteria: Callable[..., bool | np.ndarray], aggregate: bool = True,
                 fail_threshold: int = 0) -> None:
        if not callable(criteria):
            raise TypeError(f"TestCase criteria must be a function whose parameters name the keys it reads, got "
                            f"{type(criteria).__name__} for test {description!r}.")
        parameters = inspect.signature(criteria).parameters.values()
        variadic = [p.name for p in parameters if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if variadic:
            raise ValueError(f"TestCase criteria of test {description!r} takes variadic parameters {variadic}; "
                             "name each key it reads as a parameter instead (e.g. def criteria(accuracy): ...).")
        if aggregate and fail_threshold:
            raise ValueError(f"TestCase fail_threshold applies to per-instance tests only, but test {description!r} "
                             f"is aggregate and got fail_threshold={fail_threshold!r}; pass aggregate=False or drop "
                             "fail_threshold.")
        if isinstance(fail_threshold, bool) or not isinstance(fail_threshold, (int, np.integer)) or fail_threshold < 0:
            raise ValueError(f"TestCase fail_threshold must be a non-negative int (the number of failing samples "
                             f"tolerated), got {fail_threshold!r} for test {description!r}.")
        self.description = description
        self.criteria = criteria
        self.criteria_inputs: list[str] = [p.name for p in parameters]
        self.aggregate = bool(aggregate)
        self.fail_threshold = int(fail_threshold)
        self.init_result()

    def init_result(self) -> None:
        """Forget the results of an earlier test run."""
        self.result: Any = None if self.aggregate else []
        self.input_val: dict[str, Any] | None = None
        self.fail_id: list[np.ndarray] = []

    def __repr__(self) -> str:
        kind = "aggregate" if self.aggregate else f"per-instance, fail_threshold={self.fail_threshold}"
        return f"TestCase({self.description!r}, inputs={self.criteria_inputs}, {kind})"


class TestReport(Trace):
    """Evaluate test cases during ``Estimator.test()`` and write the results.

    Files go into a folder named after ``save_path``'s last part without its extension (``'report'`` when empty),
    next to it: ``<folder>/resources/<name>.json`` with FastEstimator's JSON summary, and ``<folder>/<name>.md``
    with the report, where ``<name>`` is the experiment's name (the ``summary`` argument of ``test()``, else
    ``test_title``) lower-cased, with spaces as '_' and other punctuation dropped, plus ``'_TestReport'``.

    The JSON holds ``title``, ``timestamp``, ``execution_time(s)`` and ``tests``: per-instance cases first, each
    ``{"test_type": "per-instance", "description", "passed", "fail_threshold", "fail_number"}`` (plus ``"fail_id"``,
    the failing samples' ids, with ``data_id``), then aggregate cases, each ``{"test_type": "aggregate",
    "description", "passed", "inputs"}`` with the values the criteria got.

    Difference from FastEstimator: the report is Markdown (summary table, failed then passed tests) instead of a PDF
    typeset with pylatex and LaTeX, which fe_ray does not need; the folders are created when the files are written
    rather than when the trace is made; a missing name raises ValueError rather than RuntimeError. Values the JSON
    cannot hold (a tensor-valued input, say) are written as numbers or lists, else as text.

    Args:
        test_cases: The case(s) to evaluate.
        save_path: Where the report goes (see above).
        test_title: The report's title; None uses the experiment's name.
        data_id: Key of each sample's id; with it, per-instance results list the ids of failing samples.

    Raises:
        TypeError: If a test case is not a :class:`TestCase`; during the test, if a criteria returns something other
            than a bool (aggregate) or a boolean array (per-instance).
        ValueError: At the start of a test with neither an experiment name nor ``test_title``; at a batch whose
            per-instance result does not have one entry per id.
    """

    __test__ = False  # not a pytest test class, despite its name
    checkpointed = False  # its results belong to one test() run, which is not checkpointed

    def __init__(self, test_cases: TestCase | Iterable[TestCase], save_path: str, test_title: str | None = None,
                 data_id: str | None = None) -> None:
        cases = to_list(test_cases)
        wrong = [type(case).__name__ for case in cases if not isinstance(case, TestCase)]
        if wrong or not cases:
            raise TypeError(f"TestReport test_cases must be one or more TestCase objects, got {wrong or 'none'}.")
        self.instance_cases = [case for case in cases if not case.aggregate]
        self.aggregate_cases = [case for case in cases if case.aggregate]
        inputs = [data_id] if data_id is not None else []
        for case in cases:
            inputs += [key for key in case.criteria_inputs if key not in inputs]
        super().__init__(inputs=inputs, mode="test")
        self.test_title = test_title
        self.data_id = data_id
        path = os.path.abspath(os.path.normpath(save_path))
        folder = os.path.basename(path).split(".")[0] or "report"
        self.save_dir = os.path.join(os.path.dirname(path), folder)
        self.resource_dir = os.path.join(self.save_dir, "resources")
        self.report_name: str | None = None
        self.json_summary: dict[str, Any] = {}

    # Trace events.

    def on_begin(self, data: Data) -> None:
        name = self.system.summary.name or self.test_title
        if not name:
            raise ValueError("TestReport needs a name for its files: pass Estimator.test(summary='<experiment "
                             "name>') or TestReport(test_title='<title>').")
        self.report_name = report_name(name)
        self.title = self.test_title if self.test_title is not None else name
        self.json_summary = {"title": self.title, "timestamp": str(datetime.now()), "execution_time(s)": time.time(),
                             "tests": []}
        for case in self.instance_cases + self.aggregate_cases:
            case.init_result()

    def on_batch_end(self, data: Data) -> None:
        for case in self.instance_cases:
            result = to_loggable(case.criteria(*[data[key] for key in case.criteria_inputs]))
            if not isinstance(result, np.ndarray) or result.dtype != np.bool_:
                raise TypeError(f"TestReport per-instance test {case.description!r} must return a boolean numpy "
                                f"array (one entry per sample), got {_describe(result)}.")
            result = result.reshape(-1)
            case.result.append(result)
            if self.data_id is not None:
                ids = np.asarray(to_loggable(data[self.data_id])).reshape(-1)
                if ids.size != result.size:
                    raise ValueError(f"TestReport per-instance test {case.description!r} returned {result.size} "
                                     f"results for a batch of {ids.size} ids ({self.data_id!r}); return one entry "
                                     "per sample of the batch.")
                case.fail_id.append(ids[~result])

    def on_epoch_end(self, data: Data) -> None:
        for case in self.aggregate_cases:
            values = [data[key] for key in case.criteria_inputs]
            result = case.criteria(*values)
            if not isinstance(result, (bool, np.bool_)):
                raise TypeError(f"TestReport aggregate test {case.description!r} must return a bool, got "
                                f"{_describe(result)}.")
            case.result = bool(result)
            case.input_val = {key: to_serializable(value) for key, value in zip(case.criteria_inputs, values)}

    def on_end(self, data: Data) -> None:
        tests = self.json_summary["tests"]
        for case in self.instance_cases:
            results = np.concatenate(case.result) if case.result else np.zeros(0, dtype=bool)
            failures = int(np.sum(~results))
            entry: dict[str, Any] = {"test_type": "per-instance", "description": case.description,
                                     "passed": failures <= case.fail_threshold, "fail_threshold": case.fail_threshold,
                                     "fail_number": failures}
            if self.data_id is not None:
                entry["fail_id"] = to_serializable(np.concatenate(case.fail_id) if case.fail_id else np.zeros(0))
            tests.append(entry)
        for case in self.aggregate_cases:
            tests.append({"test_type": "aggregate", "description": case.description, "passed": case.result,
                          "inputs": case.input_val})
        self.json_summary["execution_time(s)"] = time.time() - self.json_summary["execution_time(s)"]
        os.makedirs(self.resource_dir, exist_ok=True)
        json_path = os.path.join(self.resource_dir, f"{self.report_name}.json")
        with open(json_path, "w", encoding="utf-8") as file:
            json.dump(self.json_summary, file, indent=4, default=str)
        report_path = os.path.join(self.save_dir, f"{self.report_name}.md")
        with open(report_path, "w", encoding="utf-8") as file:
            file.write(markdown_report(self.json_summary, with_id=self.data_id is not None))
        print(f"FastEstimator-TestReport: Report written to {report_path}", flush=True)


def report_name(name: str) -> str:
    """The file name for experiment ``name``: letters, digits and '_' kept, spaces as '_', other characters
    dropped, lower case, runs of '_' merged and trailing ones removed, then ``'_TestReport'``."""
    kept = "".join("_" if char == " " else char for char in name if char.isalnum() or char in " _")
    return re.sub("_{2,}", "_", kept.rstrip("_").lower()) + "_TestReport"


def to_serializable(value: Any) -> Any:
    """``value`` as JSON can hold it: tensors and arrays as (nested) lists, numpy scalars as Python numbers, bytes
    decoded; anything else as given."""
    value = to_loggable(value)
    if isinstance(value, np.ndarray):
        return [to_serializable(item) for item in value] if value.ndim else to_serializable(value[()])
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


def format_value(value: Any) -> str:
    """A number with 3 decimals (scientific notation outside [0.001, 1000)); other values as JSON text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.3f}" if 0.001 <= value < 1000 else f"{value:.3e}"
    return json.dumps(value, default=str)


def markdown_report(summary: dict[str, Any], with_id: bool) -> str:
    """The Markdown report of a JSON ``summary``: a summary table, then the failed and the passed tests (aggregate
    cases first in each), numbered in the order they appear."""
    import fe_ray

    tests = summary["tests"]
    passed = [test for test in tests if test["passed"]]
    failed = [test for test in tests if not test["passed"]]
    lines = [f"# {summary['title']}", "", f"fe_ray {fe_ray.__version__}, {summary['timestamp']}", "",
             "## Test Summary", "", f"Execution time: {summary['execution_time(s)']:.2f} seconds", "",
             "| Total Tests | Total Passed | Total Failed |", "|---|---|---|",
             f"| {len(tests)} | {len(passed)} | {len(failed)} |", ""]
    number = 1
    for title, group in (("Failed", failed), ("Passed", passed)):
        if not group:
            continue
        lines += [f"## {title} Tests", ""]
        aggregate = [test for test in group if test["test_type"] == "aggregate"]
        instance = [test for test in group if test["test_type"] == "per-instance"]
        if aggregate:
            lines += [f"### {title} Aggregate Tests", "", "| Test ID | Test Description | Input Value |",
                      "|---|---|---|"]
            for test in aggregate:
                inputs = ", ".join(f"{key}={format_value(value)}" for key, value in (test["inputs"] or {}).items())
                lines.append(f"| {number} | {_cell(test['description'])} | {_cell(inputs)} |")
                number += 1
            lines.append("")
        if instance:
            header = "| Test ID | Test Description | Pass Threshold | Failure Count |"
            lines += [f"### {title} Per-Instance Tests", "",
                      header + (" Failure Data Instance ID |" if with_id else ""),
                      "|---|---|---|---|" + ("---|" if with_id else "")]
            for test in instance:
                row = f"| {number} | {_cell(test['description'])} | <= {test['fail_threshold']} | " \
                      f"{test['fail_number']} |"
                if with_id:
                    row += f" {_cell(', '.join(str(item) for item in test.get('fail_id', [])))} |"
                lines.append(row)
                number += 1
            lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    """``text`` made safe for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype}"
    return f"{type(value).__name__} {value!r}"[:200]
