"""Parallel coordinate plots of a search: one vertical axis per parameter and result, one line per evaluation.

Differences from FastEstimator 1.7, which draws with plotly: the figure is a static matplotlib figure (see
:mod:`fe_ray.search.visualize.visualize`), so the axes cannot be dragged or brushed; each vertical axis spans its
column's minimum to maximum (categories spread evenly, the first name on top, as FastEstimator) and is labelled at
five evenly spaced values; ``color_by`` may also name a parameter.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.search.visualize.vis_util import (
    SearchData,
    check_title,
    colormap,
    humansorted,
    new_figure,
    resolve_search,
    show_figure,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_N_TICKS = 5


def _color_key(data: SearchData, color_by: Any) -> str:
    """The column colouring the lines: ``color_by``, else the last numeric result (naturally sorted), else the last
    result."""
    keys = data.params + data.results
    if color_by is not None:
        if not isinstance(color_by, str):
            raise TypeError(f"color_by must be a result or parameter key (str) or None, got {color_by!r}.")
        if color_by not in keys:
            raise ValueError(f"color_by {color_by!r} is not a plotted key of the search; choose one of {keys}.")
        return color_by
    numeric = [key for key in data.results if key not in data.categorical_maps]
    return humansorted(numeric or data.results)[-1]


def _scaled(data: SearchData, key: str) -> tuple[np.ndarray, float, float]:
    """The column ``key`` mapped onto [0, 1] (a constant column sits at 0.5), and the values at 0 and 1."""
    values = np.asarray(data.data[key], dtype=float)
    if key in data.categorical_maps:
        low, high = 0.0, float(len(data.categorical_maps[key]) - 1)
    else:
        finite = values[np.isfinite(values)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if high == low:
        return np.full(values.shape, 0.5), low, high
    return (values - low) / (high - low), low, high


def _draw_axis(ax: Axes, position: int, data: SearchData, key: str, low: float, high: float) -> None:
    """The vertical axis of ``key`` at x = ``position``: its line, name and tick labels."""
    ax.plot([position, position], [0, 1], color="#444444", linewidth=1.0, zorder=3)
    ax.text(position, 1.05, key, ha="center", va="bottom", fontsize=10, fontweight="bold")
    if key in data.categorical_maps:
        ticks = [(code, name) for name, code in data.categorical_maps[key].items()]
    elif high == low:
        ticks = [(low, f"{low:.4g}")]
    else:
        ticks = [(value, f"{value:.4g}") for value in np.linspace(low, high, _N_TICKS)]
    for value, label in ticks:
        height = 0.5 if high == low else (value - low) / (high - low)
        ax.plot([position - 0.015, position], [height, height], color="#444444", linewidth=1.0, zorder=3)
        ax.text(position - 0.03, height, label, ha="right", va="center", fontsize=8, zorder=4,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 0.5})


def plot_parallel_coordinates(search: Any,
                              color_by: str | None = None,
                              title: str | None = None,
                              ignore_keys: None | str | Sequence[str] = None) -> Figure:
    """Draw a parallel coordinate plot of a search: the varying parameters, then the results, as vertical axes,
    and each evaluation as a line across them coloured by one key.

    Works for any number of parameters; string values (categories) are spread evenly along their axis. The colour
    scale is viridis, reversed when the search's ``best_mode`` is 'min', so that the best results are yellow.

    Args:
        search: A search (e.g. a fitted GridSearch) or the path of its saved JSON file.
        color_by: The key whose value colours the lines; None uses the search's ``optimize_field``, else the last
            numeric result.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out.

    Returns:
        The matplotlib figure: the plot's axes and its colour bar axes.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If ``color_by`` is not a plotted key or the search has no results.
    """
    search = resolve_search(search)
    title = check_title(title, search)
    reverse = getattr(search, "best_mode", None) == "min"
    data = SearchData(search, ignore_keys=ignore_keys)
    if color_by is None and getattr(search, "optimize_field", None) in data.data:
        color_by = search.optimize_field  # unless ignored: then the fallback below applies
    color_key = _color_key(data, color_by)
    keys = data.params + data.results

    fig = new_figure(max(7.0, 1.7 * len(keys) + 1.5), 5.0, "plot_parallel_coordinates")
    ax = fig.subplots()
    from matplotlib.collections import LineCollection
    from matplotlib.colors import Normalize

    scaled = []
    for position, key in enumerate(keys):
        column, low, high = _scaled(data, key)
        scaled.append(column)
        _draw_axis(ax, position, data, key, low, high)
    heights = np.stack(scaled, axis=1)  # (evaluations, keys)
    points = np.stack([np.broadcast_to(np.arange(len(keys), dtype=float), heights.shape), heights], axis=-1)
    color_values = np.asarray(data.data[color_key], dtype=float)
    finite = color_values[np.isfinite(color_values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if high == low:
        low, high = low - 0.5, high + 0.5
    norm = Normalize(vmin=low, vmax=high)
    cmap = colormap(reverse)
    lines = LineCollection(list(points), cmap=cmap, norm=norm, linewidths=1.5, alpha=0.85, zorder=2)
    lines.set_array(color_values)
    ax.add_collection(lines)
    ax.set_xlim(-0.5, len(keys) - 0.85)  # room for the tick labels left of each axis
    ax.set_ylim(-0.05, 1.12)
    ax.set_axis_off()
    bar = fig.colorbar(lines, ax=ax, shrink=0.9, label=color_key)
    if color_key in data.categorical_maps:
        codes = data.categorical_maps[color_key]
        bar.set_ticks(list(codes.values()), labels=list(codes))
    if title:
        fig.suptitle(title)
    return fig


def visualize_parallel_coordinates(search: Any,
                                   color_by: str | None = None,
                                   title: str | None = None,
                                   ignore_keys: None | str | Sequence[str] = None,
                                   save_path: str | os.PathLike[str] | None = None,
                                   verbose: bool = True) -> str | None:
    """Save (or show) a parallel coordinate plot of a search (see :func:`plot_parallel_coordinates`).

    Args:
        search: A search or the path of its saved JSON file.
        color_by: The key whose value colours the lines; None uses the search's ``optimize_field``, else the last
            numeric result.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out.
        save_path: Where to write the image: a file (no extension: '.png') or a folder (gets 'figure.png'). None
            shows it inline in a notebook, else writes a temporary PNG and prints its path.
        verbose: Whether to print where the figure was written.

    Returns:
        The path of the file written, or None when shown inline in a notebook.
    """
    search = resolve_search(search)
    fig = plot_parallel_coordinates(search=search, color_by=color_by, title=title, ignore_keys=ignore_keys)
    return show_figure(fig, save_path, verbose, check_title(title, search))
