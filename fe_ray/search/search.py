"""The Search base class: runs ``eval_fn`` on parameter sets, caches and records results, saves and resumes as JSON.

A search evaluates ``eval_fn(search_idx=i, **params)`` for the parameter sets its subclass proposes (FastEstimator's
call convention: everything by keyword, ``search_idx`` counting evaluations from 1). Each distinct parameter set is
evaluated once: a repeat is answered from the cache. The record of a search, its *summary*, is a list of
``{"param": {**params, "search_idx": i}, "result": {...}}`` entries, one per evaluation, in order.

Saved searches are JSON files ``<save_dir>/<name>.json`` with FastEstimator's keys (``search_summary``, ``name``,
``best_mode``, ``optimize_field``), so a file written by either library resumes in the other.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# fe_ray's console lines keep FastEstimator's "FastEstimator-<Event>:" prefix (see fe_ray.trace.logger), so that
# existing log parsers keep working; spelled out here to keep this module free of framework imports.
LOG_PREFIX = "FastEstimator-Search:"
BEST_MODES = ("max", "min")

Result = dict[str, Any]
Summary = list[dict[str, dict[str, Any]]]


def check_best_mode(best_mode: str | None, allow_none: bool = True) -> str | None:
    """Return ``best_mode`` if valid, else raise ValueError naming the choices."""
    if best_mode is None and allow_none:
        return None
    if best_mode not in BEST_MODES:
        raise ValueError(f"best_mode must be 'max' or 'min' (whether a larger or a smaller result is better), got "
                         f"{best_mode!r}.")
    return best_mode


def eval_fn_arguments(eval_fn: Callable[..., Any]) -> tuple[set[str], set[str], bool]:
    """The keyword arguments ``eval_fn`` accepts: (all named ones, those without a default, takes ``**kwargs``).

    Raises:
        TypeError: If ``eval_fn`` is not callable, its signature cannot be read, or it cannot take ``search_idx``.
    """
    if not callable(eval_fn):
        raise TypeError(f"eval_fn must be a function taking search_idx and the searched parameters as keywords, got "
                        f"{type(eval_fn).__name__}.")
    try:
        parameters = inspect.signature(eval_fn).parameters.values()
    except (TypeError, ValueError):
        raise TypeError(f"Cannot read the signature of eval_fn {eval_fn!r}; wrap it in a def or lambda that names "
                        "its arguments, e.g. lambda search_idx, lr: ...") from None
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = {p.name for p in parameters if p.kind in keyword_kinds}
    required = {p.name for p in parameters if p.kind in keyword_kinds and p.default is inspect.Parameter.empty}
    var_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    if "search_idx" not in named and not var_keyword:
        raise TypeError(f"eval_fn must take a 'search_idx' argument (the search passes the evaluation's number, "
                        f"useful for naming output files), but its arguments are {sorted(named)}; add it, e.g. "
                        "def eval_fn(search_idx, lr): ...")
    return named, required, var_keyword


def _json_default(value: Any) -> Any:
    # numpy / torch scalars (eval_fn results are often np.float32 metrics) become plain Python numbers.
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    raise TypeError(f"{type(value).__name__} value {value!r} is not JSON serializable")


def cache_key(params: Mapping[str, Any]) -> str:
    """A key identifying a parameter set: canonical JSON, so tuples and lists (which JSON turns into lists) and
    numpy scalars match the plain values a loaded file holds, and unhashable values (lists) are usable."""

    def fallback(value: Any) -> Any:
        try:
            return _json_default(value)
        except TypeError:
            return repr(value)  # not saveable, but still a stable identity within this process

    return json.dumps(dict(params), sort_keys=True, default=fallback)



def _storable(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` with numpy arrays as (nested) lists and numpy scalars as Python numbers, in dicts nested
    anywhere, as FastEstimator stores results: the summary saves as JSON and a resumed search compares alike."""
    def plain(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, Mapping):
            return {key: plain(item) for key, item in value.items()}
        return value

    return {key: plain(value) for key, value in result.items()}

class Search:
    """Base class of searches: evaluation with caching, result summary, best-result lookup, save / load / resume.

    Subclasses implement :meth:`_fit`, calling :meth:`evaluate` for each parameter set to try.

    Args:
        eval_fn: Called as ``eval_fn(search_idx=i, **params)``; must accept ``search_idx``. It returns a dict of
            results (e.g. ``{"acc": 0.9, "loss": 0.3}``); any other value ``v`` is recorded as ``{"value": v}``.
        name: Name of the search; :meth:`save` writes ``<name>.json``.
        best_mode: 'max' or 'min': the default direction of :meth:`get_best_results`; None leaves it to be given
            there.
        optimize_field: The result key :meth:`get_best_results` compares by default; None uses the only key of
            single-key results.

    Raises:
        TypeError: If ``eval_fn`` is not a function taking ``search_idx`` or ``name`` is not a string.
        ValueError: If ``best_mode`` is not 'max', 'min' or None, or ``name`` is not usable as a file name.
    """

    def __init__(self, eval_fn: Callable[..., Any], name: str = "search", best_mode: str | None = None,
                 optimize_field: str | None = None) -> None:
        eval_fn_arguments(eval_fn)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str (the search's file is <name>.json), got {type(name).__name__}.")
        if not name or os.sep in name or (os.altsep and os.altsep in name) or name in (".", ".."):
            raise ValueError(f"name {name!r} is not usable as a file name (the search saves <name>.json); give a "
                             "non-empty name without path separators, e.g. 'lr_search'.")
        if optimize_field is not None and not isinstance(optimize_field, str):
            raise TypeError(f"optimize_field must be a result key (str) or None, got {optimize_field!r}.")
        self.eval_fn = eval_fn
        self.name = name
        self.best_mode = check_best_mode(best_mode)
        self.optimize_field = optimize_field
        self.save_dir: str | None = None
        self._reset()

    # ------------------------------------------------------------------ state
    def _reset(self) -> None:
        self.search_idx = 0
        self.search_summary: Summary = []
        self.evaluation_cache: dict[str, Result] = {}

    def state_dict(self) -> dict[str, Any]:
        """The search's state as saved to JSON: the summary and the configuration that interprets it."""
        state: dict[str, Any] = {"search_summary": copy.deepcopy(self.search_summary), "name": self.name}
        if self.best_mode is not None:
            state["best_mode"] = self.best_mode
        if self.optimize_field is not None:
            state["optimize_field"] = self.optimize_field
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the summary with ``state``'s and rebuild the cache and evaluation counter from it.

        ``best_mode`` and ``optimize_field`` of ``state`` are taken only where this search has none of its own: the
        arguments this search was built with describe what the caller wants now.

        Raises:
            ValueError: If ``state`` is not a saved search state.
        """
        summary = state.get("search_summary") if isinstance(state, Mapping) else None
        if not isinstance(summary, list):
            raise ValueError("A search state needs a 'search_summary' list (as Search.save writes); got "
                             f"{type(state).__name__} with keys {sorted(state) if isinstance(state, Mapping) else []}.")
        cache: dict[str, Result] = {}
        last_idx = 0
        for position, entry in enumerate(summary):
            param = entry.get("param") if isinstance(entry, Mapping) else None
            result = entry.get("result") if isinstance(entry, Mapping) else None
            if not isinstance(param, Mapping) or not isinstance(param.get("search_idx"), int) \
                    or not isinstance(result, Mapping):
                raise ValueError(f"search_summary entry {position} is {entry!r}; each entry must be {{'param': "
                                 "{..., 'search_idx': int}, 'result': {...}}.")
            params = {key: value for key, value in param.items() if key != "search_idx"}
            cache[cache_key(params)] = dict(result)
            last_idx = max(last_idx, param["search_idx"])
        self.search_summary = copy.deepcopy(summary)
        self.evaluation_cache = cache
        self.search_idx = last_idx
        if self.best_mode is None and state.get("best_mode") is not None:
            self.best_mode = check_best_mode(state["best_mode"])
        if self.optimize_field is None and state.get("optimize_field") is not None:
            self.optimize_field = str(state["optimize_field"])

    def save(self, save_dir: str) -> None:
        """Write the state to ``<save_dir>/<name>.json`` (created if needed).

        Raises:
            TypeError: If a parameter or result cannot be written as JSON.
        """
        os.makedirs(save_dir, exist_ok=True)
        path = os.path.join(save_dir, f"{self.name}.json")
        try:
            text = json.dumps(self.state_dict(), indent=4, default=_json_default)
        except (TypeError, ValueError) as err:
            raise TypeError(f"Cannot save search {self.name!r} as JSON: {err}. Use numbers, strings, lists or dicts "
                            "as parameters and results, or fit() without save_dir.") from None
        # Written to a temporary file and renamed: a search interrupted mid-write (the reason to save after every
        # evaluation) must still leave the previous, readable file to resume from.
        handle, temp_path = tempfile.mkstemp(prefix=f".{self.name}.", suffix=".json", dir=save_dir)
        try:
            with os.fdopen(handle, "w") as file:
                file.write(text)
            os.replace(temp_path, path)
        except BaseException:
            if os.path.exists(temp_path):
                os.remove(temp_path)
            raise
        print(f"{LOG_PREFIX} Saving the search summary to {path}", flush=True)

    def load(self, load_dir: str, not_exist_ok: bool = False) -> None:
        """Replace the state with ``<load_dir>/<name>.json``'s (see :meth:`load_state_dict`).

        Args:
            load_dir: The folder holding the file.
            not_exist_ok: If the file is missing, start from an empty state instead of raising.

        Raises:
            ValueError: If the file is missing (and ``not_exist_ok`` is False) or is not a saved search.
        """
        path = os.path.join(os.path.abspath(load_dir), f"{self.name}.json")
        if not os.path.exists(path):
            if not not_exist_ok:
                raise ValueError(f"No saved search {self.name!r} at {path}; check load_dir and the search's name, or "
                                 "pass not_exist_ok=True to start empty.")
            self._reset()
            return
        with open(path) as file:
            try:
                state = json.load(file)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} is not valid JSON ({err}); it was not written by Search.save.") from None
        self.load_state_dict(state)
        print(f"{LOG_PREFIX} Loading the search state from {path}", flush=True)

    # ------------------------------------------------------------------ running
    def evaluate(self, **params: Any) -> Result:
        """Return ``eval_fn``'s result for ``params``, from the cache if this parameter set was evaluated before.

        A new evaluation gets the next ``search_idx``, is appended to the summary and, during ``fit(save_dir)``,
        saved at once.
        """
        if "search_idx" in params:
            raise ValueError("evaluate() got a 'search_idx' parameter; the search assigns it, so leave it out.")
        key = cache_key(params)
        if key in self.evaluation_cache:
            return self.evaluation_cache[key]
        self.search_idx += 1
        _restart_model_names()
        result = self.process_results(self.eval_fn(search_idx=self.search_idx, **params))
        param = {**params, "search_idx": self.search_idx}
        self.search_summary.append({"param": param, "result": result})
        self.evaluation_cache[key] = result
        if self.save_dir is not None:
            self.save(self.save_dir)
        print(f"{LOG_PREFIX} Evaluated {param}, result: {result}", flush=True)
        return result

    def process_results(self, result: Any) -> Result:
        """Turn what ``eval_fn`` returned into the result dict that is recorded (FastEstimator's hook of that name).

        A dict is kept with numpy arrays as (nested) lists and numpy scalars as Python numbers, in dicts nested
        anywhere, so that the summary saves as JSON and a resumed search compares alike; any other value ``v``
        becomes ``{"value": v}`` (converted alike). A subclass may override it to record results differently.

        Args:
            result: The value ``eval_fn`` returned.

        Returns:
            A new dict (``result`` itself is left as it was).
        """
        return _storable(result if isinstance(result, Mapping) else {"value": result})

    def fit(self, save_dir: str | None = None) -> None:
        """Run the search.

        Args:
            save_dir: If given, the state is saved there after every evaluation, and a state saved there before is
                loaded first: evaluated parameter sets are not run again, so an interrupted search resumes by
                calling ``fit`` with the same ``save_dir``. None starts from an empty state.
        """
        self.save_dir = save_dir
        if save_dir is None:
            self._reset()
        else:
            os.makedirs(save_dir, exist_ok=True)
            self.load(save_dir, not_exist_ok=True)
        self._fit()

    def _fit(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _fit(), calling self.evaluate(**params) for "
                                  "each parameter set to try.")

    # ------------------------------------------------------------------ results
    def get_search_summary(self) -> Summary:
        """A copy of the summary: ``[{"param": {..., "search_idx": i}, "result": {...}}]`` in evaluation order."""
        return copy.deepcopy(self.search_summary)

    def get_best_results(self, best_mode: str | None = None, optimize_field: str | None = None) -> dict[str, Any]:
        """The summary entry with the best result.

        Args:
            best_mode: 'max' or 'min'; None uses the search's own.
            optimize_field: The result key to compare; None uses the search's own, else the only key of the results.

        Returns:
            A copy of the best entry, ``{"param": {..., "search_idx": i}, "result": {...}}`` (the first on ties).

        Raises:
            RuntimeError: If nothing has been evaluated yet.
            ValueError: If no valid best_mode is given or set, or the field to compare is ambiguous or missing.
        """
        mode = best_mode or self.best_mode
        if mode is None:
            raise ValueError("get_best_results needs best_mode='max' or 'min': this search was built without one.")
        check_best_mode(mode, allow_none=False)
        if not self.search_summary:
            raise RuntimeError(f"Search {self.name!r} has no results yet; call fit() (or load()) first.")
        field = optimize_field or self.optimize_field or self._infer_field()
        for entry in self.search_summary:
            if field not in entry["result"]:
                raise ValueError(f"optimize_field {field!r} is missing from the result of {entry['param']} (keys "
                                 f"{sorted(entry['result'])}); pass one of those keys.")
        pick = max if mode == "max" else min
        return copy.deepcopy(pick(self.search_summary, key=lambda entry: entry["result"][field]))

    def _infer_field(self) -> str:
        keys = list(self.search_summary[0]["result"])
        if len(keys) != 1:
            raise ValueError(f"The results have keys {keys}, so which one to optimize is ambiguous; pass "
                             "optimize_field=<one of them> (to the search or to get_best_results).")
        return keys[0]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, best_mode={self.best_mode!r}, "
                f"evaluations={len(self.search_summary)})")


def _restart_model_names() -> None:
    """Restart fe.build's automatic model names ("model", "model1", ...) for each evaluation.

    FastEstimator resets its build counter before every evaluation, so each trial that builds models names them
    "model", "model1", ... afresh (and ModelSaver files keep the same names across trials) rather than continuing
    the count across trials. Looked up in sys.modules so that a search with no models imports nothing.
    """
    build = sys.modules.get("fe_ray.build")
    if build is not None and hasattr(build, "_build_count"):
        with build._name_lock:
            build._build_count = 0
