"""Heatmaps of a two-parameter search: one per result, the parameters' values as the rows and columns.

Differences from FastEstimator 1.7, which draws with plotly: the figure is a static matplotlib figure (see
:mod:`fe_ray.search.visualize.visualize`); as there is no hover text, each cell is labelled with its value (up to
400 cells per heatmap); numeric parameter values are ordered by value (FastEstimator orders their text naturally,
which puts '1e-05' after '0.1'); unused grid cells are removed rather than left blank.
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
    grid_shape,
    human_key,
    new_figure,
    resolve_search,
    show_figure,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_MAX_ANNOTATED_CELLS = 400


def _heatmap_supports_data(data: SearchData, throw_on_invalid: bool = True) -> bool:
    """Whether ``data`` suits heatmaps: exactly two varying parameters, numeric results, and no ignored parameter
    that varied (two evaluations would then claim one cell).

    Raises:
        ValueError: If it does not and ``throw_on_invalid`` is set.
    """
    problem = None
    if len(data.params) != 2:
        problem = (f"Heatmaps need exactly 2 varying parameters, but the search has {len(data.params)}: "
                   f"{data.params}; use plot_cartesian (1) or plot_parallel_coordinates, or ignore_keys.")
    elif not data.results:
        problem = "Heatmaps need at least 1 result, but none are left."
    elif any(key in data.categorical_maps for key in data.results):
        problem = (f"Heatmaps need numeric results, but {[k for k in data.results if k in data.categorical_maps]} "
                   "hold categories; ignore them or use plot_parallel_coordinates.")
    elif data.ignored_params:
        problem = ("Heatmaps cannot ignore a parameter that took more than one value (several evaluations would share "
                   "a cell); use plot_parallel_coordinates or keep the parameter.")
    if problem is not None and throw_on_invalid:
        raise ValueError(problem)
    return problem is None


def _axis_labels(data: SearchData, key: str) -> tuple[list[str], list[str]]:
    """The name of each evaluation's value of ``key``, and the distinct names in display order."""
    values = data.data[key]
    names = [str(data.to_category(key, value)) for value in values]
    if key in data.categorical_maps:
        order = sorted(set(names), key=human_key)
    else:
        first = {}  # one name per distinct number, in order of value
        for value, name in sorted(zip(values, names), key=lambda pair: pair[0]):
            first.setdefault(name, value)
        order = list(first)
    return names, order


def plot_heatmap(search: Any,
                 title: str | None = None,
                 ignore_keys: None | str | Sequence[str] = None) -> Figure:
    """Draw one heatmap per result of a two-parameter search.

    The first parameter (in natural order of the names) runs along x, the second along y; combinations never
    evaluated stay blank. The colour scale is viridis, reversed when the search's ``best_mode`` is 'min', so that
    the best results are always yellow.

    Args:
        search: A search (e.g. a fitted GridSearch) or the path of its saved JSON file.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out.

    Returns:
        The matplotlib figure: per result, a heatmap axes and its colour bar axes.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If the search does not have exactly two varying parameters and numeric results.
    """
    search = resolve_search(search)
    title = check_title(title, search)
    reverse = getattr(search, "best_mode", None) == "min"
    data = SearchData(search, ignore_keys=ignore_keys)
    _heatmap_supports_data(data)
    x_key, y_key = data.params
    x_names, x_order = _axis_labels(data, x_key)
    y_names, y_order = _axis_labels(data, y_key)
    columns = [x_order.index(name) for name in x_names]
    rows = [y_order.index(name) for name in y_names]

    n_rows, n_cols = grid_shape(len(data.results), rows_first=False)
    cell = 0.55 if max(len(x_order), len(y_order)) > 8 else 0.8  # inches per cell
    width = max(4.0, cell * len(x_order) + 2.0)
    height = max(3.2, cell * len(y_order) + 1.4)
    fig = new_figure(width * n_cols + 0.6, height * n_rows + 0.8, "plot_heatmap")
    axes = fig.subplots(n_rows, n_cols, squeeze=False).ravel()
    for ax in axes[len(data.results):]:
        fig.delaxes(ax)

    cmap = colormap(reverse)
    rotate = max(len(name) for name in x_order) * len(x_order) > 40
    for ax, result in zip(axes, data.results):
        grid = np.full((len(y_order), len(x_order)), np.nan)
        grid[rows, columns] = np.asarray(data.data[result], dtype=float)
        image = ax.imshow(grid, cmap=cmap, origin="lower", aspect="equal", interpolation="nearest")
        fig.colorbar(image, ax=ax, shrink=0.9)
        ax.set_title(result)
        ax.set_xticks(range(len(x_order)), x_order, rotation=45 if rotate else 0, ha="right" if rotate else "center")
        ax.set_yticks(range(len(y_order)), y_order)
        if grid.size <= _MAX_ANNOTATED_CELLS:
            _annotate(ax, grid, image)
    fig.supxlabel(x_key)
    fig.supylabel(y_key)
    if title:
        fig.suptitle(title)
    return fig


def _annotate(ax: Any, grid: np.ndarray, image: Any) -> None:
    """Write each cell's value on it, dark on light colours and light on dark ones."""
    for (row, col), value in np.ndenumerate(grid):
        if np.isnan(value):
            continue
        red, green, blue, _ = image.cmap(image.norm(value))
        light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
        ax.text(col, row, f"{value:.3g}", ha="center", va="center", fontsize=7, color="black" if light else "white")


def visualize_heatmap(search: Any,
                      title: str | None = None,
                      ignore_keys: None | str | Sequence[str] = None,
                      save_path: str | os.PathLike[str] | None = None,
                      verbose: bool = True) -> str | None:
    """Save (or show) the heatmaps of a two-parameter search (see :func:`plot_heatmap`).

    Args:
        search: A search or the path of its saved JSON file.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out.
        save_path: Where to write the image: a file (no extension: '.png') or a folder (gets 'figure.png'). None
            shows it inline in a notebook, else writes a temporary PNG and prints its path.
        verbose: Whether to print where the figure was written.

    Returns:
        The path of the file written, or None when shown inline in a notebook.
    """
    search = resolve_search(search)
    fig = plot_heatmap(search=search, title=title, ignore_keys=ignore_keys)
    return show_figure(fig, save_path, verbose, check_title(title, search))
