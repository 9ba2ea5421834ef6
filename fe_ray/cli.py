"""The ``fe-ray`` command: train or test the Estimator a script's ``get_estimator(...)`` returns.

FastEstimator's ``fastestimator train`` / ``fastestimator test`` convention, for fe_ray programs::

    fe-ray train examples/mnist_torch.py --epochs 2 --replicas 2
    fe-ray test my_script.py --hyperparameters hp.json --batch-size 64
    fe-ray run my_script.py --warmup False   # fastestimator_run(...), else fit (train data) and test (test data)

``fe-ray logs LOG_DIR`` plots the metrics of the log files in a folder (or of one log file), as ``fastestimator
logs`` does (see :func:`fe_ray.summary.logs.parse_log_dir`): ``--extension``, ``--recursive``, ``--ignore`` /
``--include``,
``--smooth``, ``--pretty_names``, ``--group_by REGEX`` (``_n`` groups ``<name>_<number><extension>`` files) and
``--save [DIR]`` (else the figure is shown: a temporary PNG outside notebooks). ``fe-ray plot SEARCH.json`` draws a
saved search, as ``fastestimator plot`` does (see :mod:`fe_ray.search.visualize`): ``--draw cartesian|heatmap|
parallel``, ``--title``, ``--ignore``, ``--color_by``, ``-G/--group``, ``--save [DIR]``.

The script is imported (its ``if __name__ == "__main__":`` block does not run) and its ``get_estimator`` is called
with the hyperparameters: those of ``--hyperparameters FILE`` (a JSON object), overridden by every further
``--name value`` pair (``--batch-size`` and ``--batch_size`` both name ``batch_size``; values are read as
FastEstimator reads them: Python literals, ``2``, ``1e-3``, ``None``, ``True``, ``[1, 2]``, else JSON, ``false``,
``{"a": null}``, else strings; the words up to the next flag are joined, so an unquoted ``[64, 128]`` is a list).
Then ``fit`` or ``test`` runs (``run``: ``fastestimator_run(**hyperparameters)`` if the script defines it, else
``fit`` where the Pipeline has train data and ``test`` where it has test data), and the exit status is 0.
``--warmup True|False`` and ``--eager True|False`` are FastEstimator's options (a bare ``--eager`` is True,
``--no-warmup`` is ``--warmup False``). Bad input (no such script, no ``get_estimator``, a hyperparameter it does
not take) ends with a message naming it and exit status 2 (:class:`UsageError`); errors of the script's own code
(importing it, ``get_estimator``) and of training propagate with their type and traceback.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any


class UsageError(ValueError):
    """Bad input to the command (a script that is no entry point, an unknown hyperparameter): reported as a usage
    error, exit status 2, where an error of the script's own code keeps its type and traceback."""


def parse_hyperparameters(items: Sequence[str]) -> dict[str, Any]:
    """``["--epochs", "2", "--name=x", "--sizes", "[64,", "128]", "--flag"]`` -> ``{"epochs": 2, "name": "x",
    "sizes": [64, 128], "flag": ""}``, by FastEstimator's rules: the words after a flag, up to the next flag, are
    joined without spaces (so an unquoted list arrives whole) and read by :func:`parse_value`; a flag without
    words is ``""``.

    Raises:
        UsageError: A value comes before any flag, or a flag is no name, naming it.
    """
    out: dict[str, Any] = {}
    name: str | None = None
    words: list[str] = []
    for item in items:
        if item.startswith("--"):
            if name is not None:
                out[name] = parse_value("".join(words))
            flag, _, value = item.partition("=")  # --name=value is --name value
            name, words = flag[2:].replace("-", "_"), [value] if value else []
            if not name.isidentifier():
                raise UsageError(f"{flag!r} names no hyperparameter; hyperparameters come as '--name value' (names "
                                 "made of letters, digits and underscores).")
        elif name is None:
            raise UsageError(f"expected a hyperparameter flag such as '--epochs', got {item!r}; hyperparameters come "
                             "as '--name value'.")
        else:
            words.append(item)
    if name is not None:
        out[name] = parse_value("".join(words))
    return out


def parse_value(text: str) -> Any:
    """A hyperparameter's value, as FastEstimator reads it: a Python literal (``2``, ``1e-3``, ``None``,
    ``[1, 2]``), else JSON (``false``, ``{"a": null}``), else the string itself ("" for no value)."""
    if not text:
        return ""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(text)
    except ValueError:
        return text  # a plain string such as a path or a name


def _bool_literal(text: str) -> bool:
    """``True`` / ``False`` for the --warmup / --eager options, as FastEstimator's command takes them."""
    if text not in ("True", "False"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from True, False)")
    return text == "True"


def load_entry_point(path: str) -> ModuleType:
    """Import the script at ``path`` as a module named after its file (its folder first on ``sys.path``, so that
    its sibling imports work and Ray replicas can import its functions by that name).

    Raises:
        UsageError: ``path`` is not a Python file, or its name is taken by a module already imported.
    """
    file = Path(path).resolve()
    if not file.exists():
        raise UsageError(f"no such script {path!r} (looked for {str(file)!r}); pass the path of a script defining "
                         "get_estimator(), e.g. examples/mnist_torch.py.")
    if not file.is_file() or file.suffix != ".py":
        raise UsageError(f"entry point {path!r} is not a Python file; pass the path of a script defining "
                         "get_estimator(), e.g. examples/mnist_torch.py.")
    loaded = sys.modules.get(file.stem)
    if loaded is not None and Path(getattr(loaded, "__file__", None) or "").resolve() != file:
        raise UsageError(f"entry point {path!r} would be imported as {file.stem!r}, the name of the already imported "
                         f"module {loaded.__name__!r} ({getattr(loaded, '__file__', 'built in')}); rename the script.")
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None, "a .py file always has a source loader"
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module  # cloudpickle sends the script's functions by reference to this name
    spec.loader.exec_module(module)
    return module


def build_estimator(module: ModuleType, hyperparameters: dict[str, Any]) -> Any:
    """``module.get_estimator(**hyperparameters)``, with the user errors named.

    Raises:
        UsageError: The module has no callable ``get_estimator``, it does not take one of the hyperparameters
            (the message lists those it takes), or it returns no Estimator.
    """
    get_estimator = getattr(module, "get_estimator", None)
    if not callable(get_estimator):
        raise UsageError(f"{module.__file__} defines no get_estimator(); the fe-ray command calls it to build the "
                         "Estimator to run. Define get_estimator(**hyperparameters) returning an fe_ray Estimator.")
    _check_arguments(get_estimator, hyperparameters, module)
    estimator = get_estimator(**hyperparameters)
    if not (callable(getattr(estimator, "fit", None)) and callable(getattr(estimator, "test", None))):
        raise UsageError(f"get_estimator() in {module.__file__} returned {type(estimator).__name__}, not an "
                         "Estimator; end it with `return fe.Estimator(pipeline=..., network=..., epochs=...)`.")
    return estimator


def _check_arguments(fn: Any, hyperparameters: dict[str, Any], module: ModuleType) -> None:
    """Raise UsageError unless ``fn`` (the script's entry point) takes ``hyperparameters``, listing what it takes."""
    signature = inspect.signature(fn)
    try:
        signature.bind(**hyperparameters)
    except TypeError as err:
        accepted = ", ".join(signature.parameters)
        raise UsageError(f"{fn.__name__}() in {module.__file__} does not take these hyperparameters ({err}); it "
                         f"takes: {accepted}.") from None


def _parser() -> argparse.ArgumentParser:
    # No abbreviations: a hyperparameter such as --sum must not be taken for --summary.
    parser = argparse.ArgumentParser(prog="fe-ray", description=__doc__.splitlines()[0], allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)
    helps = {"train": ("call get_estimator(...) of a script and run Estimator.fit()",
                       "Call get_estimator(**hyperparameters) of ENTRY_POINT and run Estimator.fit()."),
             "test": ("call get_estimator(...) of a script and run Estimator.test()",
                      "Call get_estimator(**hyperparameters) of ENTRY_POINT and run Estimator.test()."),
             "run": ("call fastestimator_run(...) of a script, else fit and test its get_estimator(...)",
                     "Call fastestimator_run(**hyperparameters) of ENTRY_POINT if it defines one; otherwise call "
                     "get_estimator(**hyperparameters) and run Estimator.fit() if the Pipeline has train data, then "
                     "Estimator.test() if it has test data.")}
    for name, (short, long) in helps.items():
        sub = commands.add_parser(name, help=short, allow_abbrev=False,
                                  description=f"{long} Further --name value pairs are hyperparameters.")
        sub.add_argument("entry_point", help="the Python script defining get_estimator()")
        sub.add_argument("--hyperparameters", "-hp", metavar="FILE", help="JSON object of hyperparameters")
        sub.add_argument("--summary", default=None, help="experiment name of the returned Summary")
        # FastEstimator's `--eager True|False`; a bare --eager means True.
        sub.add_argument("--eager", type=_bool_literal, nargs="?", const=True, default=False, metavar="{True,False}",
                         help="run the steps eagerly (TF: no tf.function); default False")
        if name != "test":
            sub.add_argument("--warmup", type=_bool_literal, default=True, metavar="{True,False}",
                             help="run the warm-up pass over every mode before training; default True")
            sub.add_argument("--no-warmup", dest="warmup", action="store_false", help="the same as --warmup False")
    _add_logs_parser(commands)
    _add_plot_parser(commands)
    return parser


def _add_logs_parser(commands: Any) -> None:
    """``fe-ray logs``: FastEstimator's ``logs`` command and arguments."""
    logs = commands.add_parser("logs", help="plot the metrics of the log files in a folder", allow_abbrev=False,
                               description="Plot the metrics of one or more log files (the lines fe_ray's Logger "
                                           "prints) side by side, one panel per metric.")
    logs.add_argument("log_dir", help="the folder holding the log files, or one log file")
    logs.add_argument("--extension", default=".txt", help="the log files' extension (default: .txt)")
    logs.add_argument("--recursive", action="store_true", help="also read the log files of subfolders")
    which = logs.add_mutually_exclusive_group()
    which.add_argument("--ignore", nargs="+", metavar="METRIC", help="metrics not to plot")
    which.add_argument("--include", nargs="+", metavar="METRIC", help="the only metrics to plot")
    logs.add_argument("--smooth", type=float, default=0.0, help="gaussian smoothing of the curves (0: none)")
    logs.add_argument("--pretty_names", action="store_true", help="turn metric names into titles")
    logs.add_argument("--group_by", metavar="REGEX",
                      help=r"group files into one mean +- std curve by this regex, e.g. '(.*)_[\d]+\.txt'; '_n' "
                           "groups <name>_<number><extension> files")
    output = logs.add_mutually_exclusive_group()
    output.add_argument("--save", nargs="?", const="", default=None, metavar="DIR",
                        help="save the figure (into DIR, default the log folder) instead of showing it")
    output.add_argument("--display", action="store_true", help="show the figure (the default)")


def _add_plot_parser(commands: Any) -> None:
    """``fe-ray plot``: FastEstimator's ``plot`` command (a saved search's results) and arguments."""
    plot = commands.add_parser("plot", help="plot the results of a saved search (its JSON file)", allow_abbrev=False,
                               description="Plot a saved search's results: line plots, heatmaps or parallel "
                                           "coordinates, chosen from the number of parameters unless --draw says.")
    plot.add_argument("search_path", help="the JSON file a search saved")
    plot.add_argument("--ignore", nargs="+", metavar="KEY", help="parameters or results to leave out")
    plot.add_argument("--title", default=None, help="the figure's title (default: the search's name)")
    plot.add_argument("--draw", choices=("cartesian", "heatmap", "parallel"), default=None,
                      help="the kind of plot (default: chosen from the number of parameters)")
    plot.add_argument("--color_by", default=None, help="the key colouring a parallel-coordinates plot")
    plot.add_argument("-G", "--group", action="append", nargs="+", metavar="RESULT",
                      help="results to draw on one line plot (repeat for several groups)")
    output = plot.add_mutually_exclusive_group()
    output.add_argument("--save", nargs="?", const="", default=None, metavar="DIR",
                        help="save the figure (into DIR, default the search file's folder) instead of showing it")
    output.add_argument("--display", action="store_true", help="show the figure (the default)")


def _run_plot(args: argparse.Namespace) -> None:
    from fe_ray.search import visualize

    if not os.path.isfile(args.search_path):
        raise UsageError(f"no saved search file at {args.search_path!r}; pass the <name>.json that Search.save (or "
                         "fit(save_dir)) wrote.")
    functions = {"cartesian": visualize.visualize_cartesian, "heatmap": visualize.visualize_heatmap,
                 "parallel": visualize.visualize_parallel_coordinates, None: visualize.visualize_search}
    kwargs: dict[str, Any] = {"search": args.search_path, "title": args.title, "ignore_keys": args.ignore}
    if args.save is not None:  # a folder, as in FastEstimator (the separator keeps a new one from naming a file)
        kwargs["save_path"] = os.path.join(args.save or os.path.dirname(os.path.abspath(args.search_path)), "")
    if args.color_by:
        kwargs["color_by"] = args.color_by
    if args.group:
        kwargs["groups"] = args.group
    functions[args.draw](**kwargs)


def _run_logs(args: argparse.Namespace) -> None:
    from fe_ray.summary.logs import parse_log_dir

    if not os.path.exists(args.log_dir):
        raise UsageError(f"log folder or file {args.log_dir!r} does not exist; pass the folder holding the "
                         f"{args.extension} log files, or one log file.")
    if os.path.isdir(args.log_dir) and not _has_files(args.log_dir, args.extension, args.recursive):
        where = "in it or its subfolders" if args.recursive else "in it (--recursive also searches its subfolders)"
        raise UsageError(f"log folder {args.log_dir!r} holds no files ending with {args.extension!r} {where}; pass "
                         "the ending of your log files with --extension (e.g. --extension .log).")

    group_by = args.group_by
    if group_by == "_n":
        group_by = r"(.*)_[\d]+" + re.escape(args.extension)
    save = args.save is not None
    save_dir = os.path.join(args.save, "") if args.save else None  # a folder, even one that does not exist yet
    parse_log_dir(args.log_dir, args.extension, args.recursive, args.smooth, save, save_dir, args.ignore,
                  args.include, args.pretty_names, group_by)


def _has_files(folder: str, extension: str, recursive: bool) -> bool:
    """Whether ``folder`` (with ``recursive``, or one of its subfolders) holds a file whose name ends with
    ``extension``."""
    for _root, _dirs, files in os.walk(folder):
        if any(name.endswith(extension) for name in files):
            return True
        if not recursive:
            return False
    return False


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The subcommand's own parser, whose errors print that command's usage line."""
    for action in parser._actions:  # argparse keeps its subparsers there and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run the command (:func:`run`) and return exit status 0."""
    run(argv)
    return 0


def run(argv: Sequence[str] | None = None) -> Any:
    """Run the command given by ``argv`` (default ``sys.argv[1:]``) and return the Estimator's Summary (None for
    ``logs`` and ``plot``).

    Raises:
        SystemExit: Status 2 with a message naming the bad input (as argparse does for its own errors).
    """
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    command = _command_parser(parser, args.command)
    if args.command in ("logs", "plot"):
        if rest:
            command.error(f"unrecognized arguments: {' '.join(rest)}")
        try:
            (_run_logs if args.command == "logs" else _run_plot)(args)
        except (ValueError, TypeError, FileNotFoundError) as err:
            # The plotting functions name their Python arguments; say which options of the command set them.
            hint = (" (fe-ray plot: pick the plot with --draw cartesian|heatmap|parallel, leave keys out with "
                    "--ignore)" if args.command == "plot" and not isinstance(err, UsageError) else "")
            command.error(f"{err}{hint}")
        return None
    try:
        if args.command == "test" and ("--no-warmup" in rest or any(item.startswith("--warmup") for item in rest)):
            raise UsageError("--warmup / --no-warmup are options of fe-ray train and run (the warm-up runs before "
                             "training); fe-ray test runs none: leave it out.")
        hyperparameters: dict[str, Any] = {}
        if args.hyperparameters:
            hyperparameters = _read_json(args.hyperparameters)
        hyperparameters.update(parse_hyperparameters(rest))
        module = load_entry_point(args.entry_point)
        if args.command == "run" and callable(getattr(module, "fastestimator_run", None)):
            _check_arguments(module.fastestimator_run, hyperparameters, module)
            return module.fastestimator_run(**hyperparameters)
        estimator = build_estimator(module, hyperparameters)
    except UsageError as err:  # not a ValueError of the script's own code (get_estimator's), which keeps its traceback
        command.error(str(err))
    if args.command == "train":
        return estimator.fit(summary=args.summary, warmup=args.warmup, eager=args.eager)
    if args.command == "test":
        return estimator.test(summary=args.summary, eager=args.eager)
    modes = estimator.pipeline.get_modes()
    summary = None
    if "train" in modes:
        summary = estimator.fit(summary=args.summary, warmup=args.warmup, eager=args.eager)
    if "test" in modes:
        summary = estimator.test(summary=args.summary, eager=args.eager)
    return summary


def _read_json(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"cannot read hyperparameters from {path!r}: {err}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path!r} must hold a JSON object of hyperparameters, got {type(data).__name__}.")
    return data


if __name__ == "__main__":
    sys.exit(main())
