"""Line plots of a one-parameter search: each result (or group of results) against the searched parameter.

Differences from FastEstimator 1.7, which draws with plotly: the figure is a static matplotlib figure (see
:mod:`fe_ray.search.visualize.visualize`); each line joins its points in order of the parameter (plotly joins them
in evaluation order, which zig-zags for a GoldenSection search); unused grid cells are removed rather than left
blank.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.search.visualize.vis_util import (
    SearchData,
    check_title,
    grid_shape,
    humansorted,
    new_figure,
    resolve_search,
    show_figure,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_PANEL_WIDTH, _PANEL_HEIGHT = 5.0, 3.2  # inches per subplot


def _cartesian_supports_data(data: SearchData, throw_on_invalid: bool = True) -> bool:
    """Whether ``data`` suits line plots: exactly one varying parameter, some results, and only numbers.

    Raises:
        ValueError: If it does not and ``throw_on_invalid`` is set.
    """
    problem = None
    if len(data.params) != 1:
        problem = (f"Cartesian plots need exactly 1 varying parameter, but the search has {len(data.params)}: "
                   f"{data.params}; use plot_heatmap (2) or plot_parallel_coordinates, or ignore_keys.")
    elif not data.results:
        problem = "Cartesian plots need at least 1 result, but none are left."
    elif data.categorical_maps:
        problem = (f"Cartesian plots need numeric values, but {sorted(data.categorical_maps)} hold categories; use "
                   "plot_parallel_coordinates or ignore those keys.")
    if problem is not None and throw_on_invalid:
        raise ValueError(problem)
    return problem is None


def _check_groups(groups: Any, results: list[str]) -> list[list[str]]:
    """The result groups to plot: the given ones (a group may be one name), then every result not in any."""
    if groups is None:
        return [[key] for key in results]
    if isinstance(groups, str) or not isinstance(groups, (list, tuple)):
        raise TypeError(f"groups must be a list of lists of result keys, e.g. [['acc', 'f1'], ['loss']], got "
                        f"{groups!r}.")
    checked: list[list[str]] = []
    for group in groups:
        group = [group] if isinstance(group, str) else group
        if not isinstance(group, (list, tuple)) or not group or not all(isinstance(key, str) for key in group):
            raise TypeError(f"Each entry of groups must be a non-empty list of result keys, got {group!r}.")
        for key in group:
            if key not in results:
                raise ValueError(f"groups names {key!r}, which is not a plotted result of the search; the results "
                                 f"are {results}.")
        checked.append(list(group))
    grouped = {key for group in checked for key in group}
    return checked + [[key] for key in humansorted(set(results) - grouped)]


def plot_cartesian(search: Any,
                   title: str | None = None,
                   ignore_keys: None | str | Sequence[str] = None,
                   groups: list[list[str]] | None = None) -> Figure:
    """Draw line plots of a search's results against its single varying parameter.

    One subplot per group of results, in a near-square grid sharing the x axis; all the results of a group share
    its y axis. When ignored parameters varied, several evaluations may share a parameter value, so only the
    points are drawn.

    Args:
        search: A search (e.g. a fitted GridSearch or GoldenSection) or the path of its saved JSON file.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out.
        groups: Result keys to draw on the same axes, e.g. ``[['acc', 'f1']]``; results not named get a subplot
            each.

    Returns:
        The matplotlib figure (one axes per group).

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If the search does not have exactly one varying numeric parameter (see :func:`visualize_search`
            to choose the plot automatically) or ``groups`` names an unknown result.
    """
    search = resolve_search(search)
    title = check_title(title, search)
    data = SearchData(search, ignore_keys=ignore_keys)
    _cartesian_supports_data(data)
    groups = _check_groups(groups, data.results)
    param = data.params[0]
    n_rows, n_cols = grid_shape(len(groups), rows_first=True)

    fig = new_figure(_PANEL_WIDTH * n_cols + 1.5, _PANEL_HEIGHT * n_rows + 0.6, "plot_cartesian")
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharex=True).ravel()
    for ax in axes[len(groups):]:
        fig.delaxes(ax)

    import matplotlib

    palette = matplotlib.colormaps["tab10"].colors
    colors = {key: palette[index % len(palette)] for index, key in enumerate(data.results)}
    x = np.asarray(data.data[param], dtype=float)
    order = np.argsort(x, kind="stable")
    linestyle = "none" if data.ignored_params else "-"
    handles: dict[str, Any] = {}
    for ax, group in zip(axes, groups):
        for key in group:
            y = np.asarray(data.data[key], dtype=float)
            (line,) = ax.plot(x[order], y[order], linestyle=linestyle, marker="o", markersize=4, color=colors[key],
                              label=key)
            handles.setdefault(key, line)
        ax.set_xlabel(param)
        ax.set_ylabel(", ".join(group))
        ax.xaxis.set_tick_params(labelbottom=True)  # every subplot keeps its x tick labels, as FastEstimator's
        ax.grid(True, color="#E4E7EB", linewidth=0.6)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if title:
        fig.suptitle(title)
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=9, frameon=False)
    return fig


def visualize_cartesian(search: Any,
                        title: str | None = None,
                        ignore_keys: None | str | Sequence[str] = None,
                        groups: list[list[str]] | None = None,
                        save_path: str | os.PathLike[str] | None = None,
                        verbose: bool = True) -> str | None:
    """Save (or show) line plots of a one-parameter search (see :func:`plot_cartesian`).

    Args:
        search: A search or the path of its saved JSON file.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out.
        groups: Result keys to draw on the same axes.
        save_path: Where to write the image: a file (no extension: '.png') or a folder (gets 'figure.png'). None
            shows it inline in a notebook, else writes a temporary PNG and prints its path.
        verbose: Whether to print where the figure was written.

    Returns:
        The path of the file written, or None when shown inline in a notebook.
    """
    search = resolve_search(search)  # loaded once for the figure and its name
    fig = plot_cartesian(search=search, title=title, ignore_keys=ignore_keys, groups=groups)
    return show_figure(fig, save_path, verbose, check_title(title, search))
