"""Reading the console output of runs back into :class:`Summary` histories, as FastEstimator's
``fe.summary.logs.log_parse``: :func:`parse_log_iter` reads lines into a Summary, :func:`parse_log_file` one file,
:func:`parse_log_files` / :func:`parse_log_dir` several files, which they then plot.

The Logger prints one line per event, ``FastEstimator-<Event>: step: <global step>; <key>: <value>; ...``. Train
and Finish lines go to the ``train`` mode, Eval lines to ``eval`` and Test lines to ``test`` (Start lines, progress
counters such as ``progress: 2/4`` and other non-numeric values are skipped, as in FastEstimator). A value is kept
when it is a number (``0.25``, ``-3``, ``1e-05``, ``nan``, ``inf``; stored as float), or a ``(low, value, high)``
triple (stored as :class:`ValWithError`); ``None`` values are skipped. A line whose step is ``None`` (FastEstimator's
output when testing from its command line) takes the step of the line before it, and a Test line of that kind also
takes the epoch of the line before it.

Deliberate differences from FastEstimator 1.7:

* The ``FastEstimator-<Event>:`` marker may come after a prefix on the line (a timestamp, Ray's ``(pid=...)``),
  not only at its start; numbers may carry an exponent sign (``1e+10``) and may be ``nan`` / ``inf``.
* Bad arguments and lines without a leading step raise ValueError naming the value (FastEstimator asserts).
* ``parse_log_files(save=True)`` without a ``save_path`` writes ``parse_logs.png`` next to the first log file
  (FastEstimator: ``parse_logs.html`` there); ``parse_log_dir(save=True)`` writes it into ``dir_path``, as
  FastEstimator documents (FastEstimator 1.7 uses the first log file's folder, a subfolder when searching
  recursively).
* ``parse_log_dir`` lists files with :class:`fe_ray.dataset.DirDataset`, as FastEstimator does: hidden files are
  skipped, and a folder without a matching file raises ValueError.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from fe_ray.summary.logs.log_plot import visualize_logs
from fe_ray.summary.summary import Summary, ValWithError, average_summaries
from fe_ray.util.text import strip_suffix

_EVENT_MODES = {"Train": "train", "Finish": "train", "Eval": "eval", "Test": "test"}
_EVENT = re.compile(r"FastEstimator-(Train|Finish|Eval|Test):\s")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_SCALAR = re.compile(rf"(?:{_NUMBER})", re.IGNORECASE)
_TRIPLE = re.compile(rf"\(\s*({_NUMBER})\s*,\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\)", re.IGNORECASE)


def _parse_value(text: str) -> float | ValWithError | None:
    """The value a logged field holds, or None when it is not one the history keeps."""
    if _SCALAR.fullmatch(text):
        return float(text)
    triple = _TRIPLE.fullmatch(text)
    if triple:
        return ValWithError(*(float(part) for part in triple.groups()))
    return None


def _fields(body: str) -> list[tuple[str, str]]:
    """``key: value`` pairs of a line's body; the Logger ends every pair with ``;``."""
    pairs = []
    for field in body.split(";"):
        # The Logger writes "key: value"; splitting at ": " keeps colons inside keys, a bare ":" is the fallback.
        key, separator, value = field.partition(": ") if ": " in field else field.partition(":")
        if separator and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def parse_log_iter(source: Iterable[str], sync: Summary) -> Summary:
    """Read log lines into ``sync``'s history, as FastEstimator's ``log_parse.parse_log_iter``.

    The lines may come from anywhere (a file, a list, a captured output split into lines); a line that is not a
    Train / Finish / Eval / Test line is skipped. Values are stored in ``sync.history[mode][key][step]``, overwriting
    what it held at that step.

    Args:
        source: The lines to read (with or without their line ends).
        sync: The Summary to add the values to.

    Returns:
        ``sync``, holding the values read.

    Raises:
        TypeError: If ``sync`` is not a Summary, or ``source`` is a single string instead of lines.
        ValueError: If a ``FastEstimator-`` line does not start with its step.
    """
    if not isinstance(sync, Summary):
        raise TypeError(f"sync must be the Summary to add the values to (e.g. Summary('run')), got "
                        f"{type(sync).__name__} {sync!r}.")
    if isinstance(source, (str, bytes)):
        # Iterating a string yields characters, which would silently parse nothing.
        raise TypeError("parse_log_iter reads lines, but source is a single string; pass text.splitlines() (or an "
                        "open file) instead.")
    return _parse_lines(source, sync, f"log {sync.name!r}")


def _parse_lines(source: Iterable[str], sync: Summary, where: str) -> Summary:
    """Add the values of the log lines in ``source`` to ``sync``; ``where`` names the log in error messages."""
    last_step = 0
    last_epoch: float = 0
    for line_number, line in enumerate(source, start=1):
        event = _EVENT.search(line)
        if event is None:
            continue
        mode = _EVENT_MODES[event.group(1)]
        fields = _fields(line[event.end():])
        if not fields or fields[0][0] != "step":
            raise ValueError(f"Line {line_number} of {where} does not start with its step ('step: N;' right after "
                             f"the event): {line.strip()!r}.")
        step_text = fields[0][1]
        take_last_epoch = False
        if step_text == "None":
            # FastEstimator's command-line test prints no step; it belongs after the last logged one, and its epoch
            # is a guess, so the last logged epoch replaces it.
            step = last_step
            take_last_epoch = mode == "test"
        else:
            try:
                step = int(step_text)
            except ValueError:
                raise ValueError(f"Line {line_number} of {where} has the step {step_text!r}, which is neither an "
                                 f"integer nor None: {line.strip()!r}.") from None
            last_step = step
        for key, text in fields[1:]:
            value = _parse_value(text)
            if value is None:
                continue
            if key == "epoch":
                if take_last_epoch:
                    value = last_epoch
                else:
                    last_epoch = value
            sync.history[mode][key][step] = value
    return sync


def parse_log_file(file_path: str, file_extension: str) -> Summary:
    """Read one log file into a Summary named after the file (without ``file_extension``).

    Args:
        file_path: The log file: the captured console output of a run.
        file_extension: The extension to strip from the file name to get the experiment name (e.g. ``".txt"``);
            None or ``""`` keeps the whole name.

    Returns:
        The history the file records: ``summary.history[mode][key][step] = value``.

    Raises:
        FileNotFoundError: If ``file_path`` does not exist.
        ValueError: If ``file_path`` is a folder, or a ``FastEstimator-`` line does not start with its step.
    """
    path = os.fspath(file_path)
    if os.path.isdir(path):
        raise ValueError(f"parse_log_file needs a log file, got the folder {path!r}; use parse_log_dir for folders.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"Log file {path!r} does not exist (relative paths start at {os.getcwd()!r}).")
    experiment = Summary(strip_suffix(os.path.basename(path).strip(), file_extension))
    with open(path, encoding="utf-8", errors="replace") as file:
        return _parse_lines(file, experiment, f"log file {path!r}")


def _group_name(pattern: re.Pattern[str], file_name: str) -> str:
    """The group a log file belongs to: the regex's first match in the file name (its capture groups if any)."""
    match = pattern.search(file_name)
    if match is None:
        raise ValueError(f"The log {file_name!r} did not match the group_by regex {pattern.pattern!r}; give a "
                         r"pattern every file name matches, such as r'(.*)_[\d]+\.txt'.")
    if pattern.groups == 0:
        return match.group(0)
    return "_".join(part for part in match.groups() if part is not None)


def parse_log_files(file_paths: Iterable[str],
                    log_extension: str | None = ".txt",
                    smooth_factor: float = 0,
                    save: bool = False,
                    save_path: str | None = None,
                    ignore_metrics: Iterable[str] | None = None,
                    include_metrics: Iterable[str] | None = None,
                    pretty_names: bool = False,
                    group_by: str | None = None,
                    share_legend: bool = True) -> None:
    """Parse log files and plot their metrics side by side, one panel per metric (see :func:`visualize_logs`).

    Args:
        file_paths: The log files.
        log_extension: The extension stripped from file names to name the experiments.
        smooth_factor: The sigma of the gaussian smoothing of the curves (0: none).
        save: Whether to write the figure to a file (True) or show it (False).
        save_path: Where to write the figure (a file, or a folder to hold ``parse_logs.png``). With ``save`` and no
            ``save_path``, the folder of the first log file. A ``save_path`` is written even without ``save``.
        ignore_metrics: Keys not to plot.
        include_metrics: The only keys to plot (None: all).
        pretty_names: Turn keys into titles (``"model_lr"`` -> ``"Model Lr"``) for the panel titles.
        group_by: A regex grouping several files into one experiment plotted as its mean +- standard deviation
            (:func:`fe_ray.summary.summary.average_summaries`); the group is the pattern's capture group(s) in the
            file name (the whole match if it has none). For example ``r'(.*)_[\\d]+\\.txt'`` groups ``a_1.txt`` and
            ``a_2.txt`` as ``a``. None plots every file on its own.
        share_legend: One legend for the whole figure (True) or one per panel (False); fe_ray's addition, after
            FastEstimator 1.7's arguments.

    Raises:
        ValueError: If ``file_paths`` is empty, ``group_by`` is not a valid regex, or a file name does not match it.
    """
    if isinstance(file_paths, (str, os.PathLike)):
        file_paths = [file_paths]
    file_paths = list(file_paths) if file_paths is not None else []
    if not file_paths:
        raise ValueError(f"parse_log_files needs at least one log file, got file_paths={file_paths!r}.")
    pattern = None
    if group_by is not None:
        try:
            pattern = re.compile(group_by)
        except (re.error, TypeError) as error:
            raise ValueError(f"group_by {group_by!r} is not a valid regex ({error}); give one such as "
                             r"r'(.*)_[\d]+\.txt'.") from None
    if save and save_path is None:
        save_path = os.path.dirname(os.path.abspath(os.fspath(file_paths[0])))
    groups: dict[str, list[Summary]] = {}
    for path in file_paths:
        experiment = parse_log_file(path, log_extension)
        key = experiment.name if pattern is None else _group_name(pattern, os.path.basename(os.fspath(path)))
        groups.setdefault(key, []).append(experiment)
    experiments = [average_summaries(name, runs) for name, runs in groups.items()]
    visualize_logs(experiments, save_path=save_path, smooth_factor=smooth_factor, share_legend=share_legend,
                   pretty_names=pretty_names, ignore_metrics=ignore_metrics, include_metrics=include_metrics)


def parse_log_dir(dir_path: str,
                  log_extension: str = ".txt",
                  recursive_search: bool = False,
                  smooth_factor: float = 0,
                  save: bool = False,
                  save_path: str | None = None,
                  ignore_metrics: Iterable[str] | None = None,
                  include_metrics: Iterable[str] | None = None,
                  pretty_names: bool = False,
                  group_by: str | None = None,
                  share_legend: bool = True) -> None:
    """Parse every log file in a folder (or one log file) and plot their metrics side by side (see
    :func:`parse_log_files`).

    Args:
        dir_path: The folder holding the log files, or the path of one log file (whose own extension is then used).
        log_extension: Only files ending with it are read (None: all files); it is also stripped from the names.
        recursive_search: Also read the log files of subfolders.
        smooth_factor: The sigma of the gaussian smoothing of the curves (0: none).
        save: Whether to write the figure to a file (True) or show it (False).
        save_path: Where to write the figure (a file, or a folder to hold ``parse_logs.png``); with ``save`` and no
            ``save_path``, ``dir_path``.
        ignore_metrics: Keys not to plot.
        include_metrics: The only keys to plot (None: all).
        pretty_names: Turn keys into titles for the panel titles.
        group_by: A regex grouping files into experiments plotted as mean +- standard deviation (see
            :func:`parse_log_files`).
        share_legend: One legend for the whole figure (True) or one per panel (False); fe_ray's addition.

    Raises:
        FileNotFoundError: If ``dir_path`` does not exist.
        ValueError: If ``dir_path`` is a folder holding no matching file, or ``group_by`` is invalid or unmatched.
    """
    from fe_ray.dataset.dir_dataset import DirDataset

    if os.path.isfile(dir_path):  # one log file, as FastEstimator takes it
        file_paths = [os.fspath(dir_path)]
        log_extension = os.path.splitext(dir_path)[1]
        if save and save_path is None:
            save_path = os.path.join(os.path.dirname(os.path.abspath(dir_path)), "")
    else:
        loader = DirDataset(root_dir=dir_path, file_extension=log_extension, recursive_search=recursive_search)
        file_paths = [row["x"] for row in loader.data.values()]
    if save and save_path is None:
        save_path = os.fspath(dir_path)
    parse_log_files(file_paths, log_extension, smooth_factor, save, save_path, ignore_metrics, include_metrics,
                    pretty_names, group_by, share_legend)
