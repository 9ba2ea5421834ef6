"""Shared pieces of the search plots: loading a saved search, tabulating its summary, and the matplotlib figure
plumbing (lazy import, layout, saving).

:class:`SearchData` turns a search summary (``[{"param": {...}, "result": {...}}]``) into one column per key, the way
FastEstimator 1.7 does: ``search_idx`` and the ``ignore_keys`` are dropped, parameters that never change are dropped
(nothing to plot against), one-element lists and arrays become their element, ``ValWithError`` becomes its ``y``,
and a column holding anything but numbers is *categorical*: its values become the integer codes of their names.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fe_ray.search.search import Search
from fe_ray.summary.summary import ValWithError
from fe_ray.util.environment import in_notebook
from fe_ray.util.figures import check_matplotlib, figure_path, present, write_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SAVE_DPI = 100  # figure sizes are given in inches; a saved PNG is inches * SAVE_DPI pixels
DEFAULT_FILE_NAME = "figure.png"  # FastEstimator's fallback name ('figure'), as a PNG


# ------------------------------------------------------------------------------------------------ natural sorting
def human_key(value: Any) -> tuple[tuple[int, int | float, str], ...]:
    """Sort key of a natural, case-insensitive order ('run2' < 'run10' < 'Run11'), as natsort's ``humansorted``."""
    chunks = re.split(r"(\d+)", str(value))
    return tuple((0, int(chunk), "") if chunk.isdigit() else (1, 0, chunk.lower()) for chunk in chunks if chunk)


def humansorted(values: Any, reverse: bool = False) -> list[Any]:
    """``values`` in natural, case-insensitive order (see :func:`human_key`)."""
    return sorted(values, key=human_key, reverse=reverse)


# ------------------------------------------------------------------------------------------------ search input
def _load_search_file(path: str | os.PathLike[str]) -> Search:
    """A Search holding the state saved at ``path`` (a ``<name>.json`` written by Search.save or FastEstimator).

    Raises:
        ValueError: If there is no file at ``path`` or it is not a saved search.
    """
    path = os.path.abspath(os.path.normpath(os.fspath(path)))
    if not os.path.isfile(path):
        raise ValueError(f"No saved search file at {path!r}; pass the path of the <name>.json that Search.save "
                         "(or fit(save_dir)) wrote (in Python, the search object itself works too).")
    with open(path) as file:
        try:
            state = json.load(file)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON ({err}); it was not written by Search.save.") from None
    # Built without __init__: there is no eval_fn to check, only results to show.
    search = Search.__new__(Search)
    search.eval_fn = None
    search.name = str(state.get("name", "Search")) if isinstance(state, dict) else "Search"
    search.best_mode = None
    search.optimize_field = None
    search.save_dir = None
    search._reset()
    search.load_state_dict(state)
    return search


def resolve_search(search: Any) -> Any:
    """``search`` itself if it is a search (anything with ``get_search_summary``), else the search saved at that
    path.

    Raises:
        TypeError: If ``search`` is neither a search nor a path.
        ValueError: If the path holds no saved search.
    """
    if isinstance(search, (str, os.PathLike)):
        return _load_search_file(search)
    if callable(getattr(search, "get_search_summary", None)):
        return search
    raise TypeError(f"search must be a Search (e.g. a fitted GridSearch) or the path of a saved search's JSON file, "
                    f"got {type(search).__name__} {search!r}.")


def check_title(title: Any, search: Any) -> str:
    """``title``, or the search's name when None."""
    if title is None:
        return str(getattr(search, "name", "") or "")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str or None (None uses the search's name), got {title!r}.")
    return title


# ------------------------------------------------------------------------------------------------ tabulation
class SearchData:
    """The summary of a search as plottable columns.

    Attributes:
        params: The varying parameter names, naturally sorted.
        results: The result names, naturally sorted.
        data: ``{key: list of values}``, one value per evaluation; categorical columns hold integer codes.
        categorical_maps: ``{key: {category name: code}}`` for the categorical columns.
        inverse_maps: ``{key: {code: category name}}``.
        ignored_params: Whether an ignored parameter (other than ``search_idx``) took more than one value, so that
            several evaluations may share the plotted parameters.

    Args:
        search: A search (anything with ``get_search_summary``).
        ignore_keys: Parameter or result names to leave out: None, one name or a list of names.

    Raises:
        TypeError: If ``ignore_keys`` is not None, a str or a list of str.
        ValueError: If the search has no results yet, an ignore key is in neither its parameters nor its results,
            everything is ignored, or the entries of the summary do not share their keys.
    """

    def __init__(self, search: Any, ignore_keys: None | str | Sequence[str] = None) -> None:
        self.params: list[str] = []
        self.results: list[str] = []
        self.data: dict[str, list[Any]] = {}
        self.categorical_maps: dict[str, dict[str, int]] = {}
        self.inverse_maps: dict[str, dict[int, str]] = {}
        self.ignored_params = False
        ignored = _check_ignore_keys(ignore_keys)
        summary = search.get_search_summary()
        if not summary:
            raise ValueError(f"Search {getattr(search, 'name', '')!r} has no results to plot; call fit() first (or "
                             "load a saved search).")
        first = summary[0]
        param_keys, result_keys = set(first["param"]) - {"search_idx"}, set(first["result"])
        unknown = sorted(ignored - param_keys - result_keys)
        if unknown:
            raise ValueError(f"ignore_keys {unknown} are neither parameters {sorted(param_keys)} nor results "
                             f"{sorted(result_keys)} of the search; remove them or fix their spelling.")
        results = result_keys - ignored
        if not results:
            raise ValueError(f"Ignoring {sorted(ignored)} leaves no result to plot (the results are "
                             f"{sorted(result_keys)}); keep at least one of them.")
        params = param_keys - ignored
        columns: dict[str, list[Any]] = {key: [] for key in sorted(params | results)}
        ignored_values: dict[str, Any] = {}
        for position, entry in enumerate(summary):
            param = {key: value for key, value in entry["param"].items() if key != "search_idx"}
            if set(param) != param_keys or set(entry["result"]) != result_keys:
                raise ValueError(f"Search summary entry {position} has parameters {sorted(param)} and results "
                                 f"{sorted(entry['result'])}, but entry 0 has {sorted(param_keys)} and "
                                 f"{sorted(result_keys)}; every evaluation must have the same keys to be plotted.")
            for key, value in {**param, **entry["result"]}.items():
                if key in ignored:
                    if key in param_keys and ignored_values.setdefault(key, value) != value:
                        self.ignored_params = True
                    continue
                columns[key].append(self._parse_value(value))
        # A parameter with a single value has nothing to show and would waste a plot dimension.
        params = {key for key in params if any(value != columns[key][0] for value in columns[key])}
        for key in param_keys - ignored - params:
            del columns[key]
        for key, values in columns.items():
            if all(isinstance(value, (int, float)) for value in values):
                continue
            names = [str(value) for value in values]
            # Reverse natural order, as FastEstimator: in a parallel coordinate plot the first name ends up on top.
            self.categorical_maps[key] = {name: code for code, name in enumerate(humansorted(set(names),
                                                                                              reverse=True))}
            columns[key] = [self.categorical_maps[key][name] for name in names]
        self.data = columns
        self.params = humansorted(params)
        self.results = humansorted(results)
        self.inverse_maps = {key: {code: name for name, code in mapping.items()}
                             for key, mapping in self.categorical_maps.items()}

    def to_category(self, key: str, val: Any) -> str | None:
        """The name of value ``val`` of column ``key``: its category for a categorical column, else ``str(val)``."""
        mapping = self.inverse_maps.get(key)
        if not mapping:
            return None if val is None else str(val)
        return mapping[val]

    @staticmethod
    def _parse_value(value: Any) -> int | float | str | None:
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        if hasattr(value, "item") and getattr(value, "size", None) == 1:
            value = value.item()
        if isinstance(value, ValWithError):
            value = value.y
        if not isinstance(value, (int, float, str, type(None))):
            value = str(value)
        return value


def _check_ignore_keys(ignore_keys: Any) -> set[str]:
    if ignore_keys is None:
        return set()
    keys = [ignore_keys] if isinstance(ignore_keys, str) else ignore_keys
    if not isinstance(keys, (list, tuple, set, frozenset)) or not all(isinstance(key, str) for key in keys):
        raise TypeError(f"ignore_keys must be None, a key name or a list of key names, got {ignore_keys!r}.")
    return set(keys) - {"search_idx"}


# ------------------------------------------------------------------------------------------------ figures
def new_figure(width: float, height: float, what: str) -> Figure:
    """A blank ``width`` x ``height`` inch figure on matplotlib's Agg canvas (pyplot and its global backend are
    never touched), laid out by matplotlib's constrained layout."""
    check_matplotlib(what)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=SAVE_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def colormap(reverse: bool) -> Any:
    """Viridis (FastEstimator's colour scale), reversed when smaller results are better."""
    import matplotlib

    return matplotlib.colormaps["viridis_r" if reverse else "viridis"]


def grid_shape(n_plots: int, rows_first: bool) -> tuple[int, int]:
    """(rows, cols) of a near-square grid for ``n_plots`` panels: ``ceil(sqrt(n))`` rows (``rows_first``) or
    columns, and as few of the other as fit."""
    side = 1
    while side * side < n_plots:
        side += 1
    other = -(-n_plots // side)
    return (side, other) if rows_first else (other, side)


def save_figure(fig: Figure, save_path: str | os.PathLike[str], verbose: bool = True) -> str:
    """Write ``fig`` for ``save_path`` and return the file's path: an existing folder, or a path ending in a
    separator, gets ``figure.png`` inside it; a path without an extension gets ``.png`` (folders are created).

    Raises:
        TypeError: If ``save_path`` is not a path.
        ValueError: If it is empty or the extension is not a format matplotlib writes.
    """
    path = figure_path(fig, save_path, DEFAULT_FILE_NAME)
    return write_figure(fig, path, SAVE_DPI, verbose)


def show_figure(fig: Figure, save_path: str | os.PathLike[str] | None, verbose: bool, title: str) -> str | None:
    """Save ``fig`` to ``save_path``; with None, show it inline in a notebook (returns None) or, since the Agg
    canvas has no window, write it to a temporary PNG and print (when ``verbose``) and return its path."""
    if save_path is not None:
        return save_figure(fig, save_path, verbose=verbose)
    return present(fig, in_notebook(), title or "search", "FastEstimator-Search: no window to show the figure in",
                   SAVE_DPI, verbose=verbose)
