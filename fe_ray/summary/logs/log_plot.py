"""Plotting experiment histories side by side, as FastEstimator's ``fe.summary.logs.log_plot``.

:func:`plot_logs` draws one panel per metric (``acc|ds1`` and ``acc|ds2`` share the ``acc`` panel), in which every
experiment and mode is one curve: a solid line for train, dashed with diamond markers for eval, dotted with square
markers for test, dash-dotted with star markers for infer (a per-dataset key adds its own marker). A mode with a
single point is drawn as one large marker; a ValWithError is drawn as its value with a shaded band (or error bar)
from its low to its high end. Metrics with one value per experiment and mode (e.g. a final test score) are written
as text in their panel instead. With one experiment, the modes get different colours; with several, the
experiments do. ``epoch`` is never plotted. :func:`visualize_logs` draws and then saves or shows the figure.

Deliberate differences from FastEstimator 1.7, which draws with plotly:

* Figures are static matplotlib figures drawn on matplotlib's Agg canvas, without pyplot, so the global backend is
  untouched and matplotlib loads only when a figure is drawn (ImportError naming ``pip install matplotlib`` when it
  is missing). ``plot_logs`` returns a ``matplotlib.figure.Figure``.
* ``share_legend`` (from FastEstimator's earlier matplotlib plots) is kept: True puts one legend below the panels,
  False one legend in each panel. ``plot_logs`` takes it as its last argument so that FastEstimator 1.7's
  positional order still holds there.
* ``visualize_logs(save_path=...)`` writes a PNG (or any format matplotlib writes, by the extension; no extension
  adds ``.png``); a folder (existing, or ending with a separator) gets ``parse_logs.png``. Without a ``save_path``
  the figure is shown inline in a Jupyter notebook; elsewhere there is no window to show it in (Agg), so it is
  written to a temporary PNG whose path is printed. ``visualize_logs`` returns the path written (None inline).
* Bad arguments raise ValueError / TypeError naming the value; experiments are ordered by name, numbers in names
  compared as numbers (FastEstimator's natural sort).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.summary.summary import Summary, ValWithError
from fe_ray.util.base import to_list, to_set
from fe_ray.util.environment import in_notebook
from fe_ray.util.figures import check_matplotlib, figure_path, present, write_figure
from fe_ray.util.text import prettify_metric_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The file a folder given as ``save_path`` receives.
DEFAULT_FILE_NAME = "parse_logs.png"
_MODE_RANK = {"train": 0, "eval": 1, "test": 2, "infer": 3}
_LINESTYLES = {"train": "solid", "eval": "dashed", "test": "dotted"}
_MARKERS = {"train": "o", "eval": "D", "test": "s"}  # FastEstimator's circle, diamond, square; "*" for the rest
_DS_MARKERS = ["^", "v", "<", ">", "x", "+", "P", "X"]
_SAVE_DPI = 150

Points = list[tuple[int, Any]]


def _natural_key(name: Any) -> list[Any]:
    """Sort key comparing the digit runs of a name as numbers (``run2`` before ``run10``)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part.lower())
            for part in re.split(r"(\d+)", str(name)) if part]


def _as_plottable(value: Any) -> float | ValWithError | None:
    """A history value as something a curve can hold, or None when it cannot be plotted over time."""
    if isinstance(value, ValWithError):
        return ValWithError(float(value.y_min), float(value.y), float(value.y_max))
    if isinstance(value, np.ndarray):
        if value.size != 1 or not np.issubdtype(value.dtype, np.number):
            return None  # FastEstimator does not plot arrays over time either
        value = value.reshape(-1)[0]
    if isinstance(value, str):
        found = re.findall(r"(\d+\.\d+|\.?\d+)", value)  # FastEstimator's rule: one unambiguous number
        return float(found[0]) if len(found) == 1 else None
    if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, np.complexfloating):
        return float(value)
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.5f}"
    return str(value)


def _points(step_values: dict[int, Any]) -> Points | None:
    """The sorted (step, value) points of one curve; None when several points are not all plottable."""
    points = sorted(step_values.items(), key=lambda item: item[0])
    if len(points) == 1:
        return points  # any type: a lone value may end up as text
    converted = [(step, _as_plottable(value)) for step, value in points]
    if any(value is None for _, value in converted):
        return None
    if any(isinstance(value, ValWithError) for _, value in converted):
        converted = [(step, value if isinstance(value, ValWithError) else ValWithError(value, value, value))
                     for step, value in converted]
    return converted


def _is_graph(curves: dict[tuple[int, str, str], Points]) -> bool:
    """Whether a metric needs axes (some curve has several points or an error band) rather than text."""
    return any(len(points) > 1 or isinstance(points[0][1], ValWithError) for points in curves.values())


def _check_arguments(experiments: Any, smooth_factor: Any) -> list[Summary]:
    summaries = to_list(experiments)
    for experiment in summaries:
        if not isinstance(experiment, Summary):
            raise TypeError(f"experiments must be Summary objects (e.g. parse_log_file's or Estimator.fit's), got "
                            f"{type(experiment).__name__} {experiment!r}.")
    if isinstance(smooth_factor, bool) or not isinstance(smooth_factor, numbers.Real) \
            or not math.isfinite(smooth_factor) or smooth_factor < 0:
        raise ValueError(f"smooth_factor must be a non-negative number (the gaussian sigma; 0 for no smoothing), got "
                         f"{smooth_factor!r}.")
    return summaries


def _colors(count: int) -> list[Any]:
    import matplotlib

    if count <= 10:
        return list(matplotlib.colormaps["tab10"].colors)
    return [matplotlib.colormaps["hsv"](index / count) for index in range(count)]


def plot_logs(experiments: Summary | Iterable[Summary],
              smooth_factor: float = 0,
              ignore_metrics: str | Iterable[str] | None = None,
              pretty_names: bool = False,
              include_metrics: str | Iterable[str] | None = None,
              share_legend: bool = True) -> Figure:
    """Draw the histories of one or more experiments, one panel per metric.

    Args:
        experiments: The experiment(s) to draw (Summary objects, e.g. from :func:`parse_log_file`).
        smooth_factor: The sigma (in points) of the gaussian smoothing of curves and bands; 0 for none.
        ignore_metrics: Keys not to draw (``epoch`` is never drawn). A per-dataset key ``acc|ds1`` is also skipped
            when ``acc`` is ignored.
        pretty_names: Turn keys into titles (``"model_lr"`` -> ``"Model Lr"``) for the panel titles.
        include_metrics: The only keys to draw (None: all); a per-dataset key must be named as such (``acc|ds1``).
        share_legend: One legend below the panels (True) or one in each panel (False).

    Returns:
        The figure (a matplotlib Figure on an Agg canvas).

    Raises:
        TypeError: If an experiment is not a Summary.
        ValueError: If ``smooth_factor`` is negative or not a number.
        ImportError: If matplotlib is not installed.
    """
    summaries = _check_arguments(experiments, smooth_factor)
    check_matplotlib("fe_ray.summary.logs")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    summaries = sorted(summaries, key=lambda summary: _natural_key(summary.name))
    ignore_keys = to_set(ignore_metrics) | {"epoch"}
    include_keys = to_set(include_metrics)
    metrics: dict[str, dict[tuple[int, str, str], Points]] = {}
    ds_ids: set[str] = set()
    for exp_idx, summary in enumerate(summaries):
        for mode, keys in sorted(summary.history.items(), key=lambda item: _MODE_RANK.get(item[0], 4)):
            for key, step_values in keys.items():
                base, _, ds_id = key.partition("|")
                if not step_values or key in ignore_keys or base in ignore_keys:
                    continue
                if include_keys and key not in include_keys:
                    continue
                points = _points(step_values)
                if points is not None:
                    metrics.setdefault(base, {})[(exp_idx, mode, ds_id)] = points
                    ds_ids.add(ds_id)

    graphs = sorted(metric for metric, curves in metrics.items() if _is_graph(curves))
    texts = sorted(metric for metric in metrics if metric not in graphs)
    order = graphs + texts  # text panels go last, as in FastEstimator
    n_plots = max(len(order), 1)
    n_rows = math.ceil(math.sqrt(n_plots))
    n_cols = math.ceil(n_plots / n_rows)
    fig = Figure(figsize=(4 * n_cols, 2.8 * n_rows + (0.6 if share_legend and n_plots > 1 else 0)),
                 layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(n_rows, n_cols, squeeze=False)
    for ax in grid.flat[n_plots:]:
        ax.remove()  # only one panel per metric remains
    if not order:
        grid[0][0].axis("off")
        grid[0][0].text(0.5, 0.5, "No metrics to plot", ha="center", va="center", transform=grid[0][0].transAxes)
        return fig
    axes = dict(zip(order, grid.flat))

    n_experiments = len(summaries)
    palette = _colors(max(n_experiments, 4))
    named_ds = sorted((ds for ds in ds_ids if ds), key=_natural_key)
    ds_markers: dict[str, str | None] = {ds: _DS_MARKERS[idx % len(_DS_MARKERS)] for idx, ds in enumerate(named_ds)}
    ds_markers[""] = None  # keys without a dataset id keep their mode's own look
    legend: dict[str, Any] = {}  # label -> artist, over the whole figure
    panel_legends: dict[str, dict[str, Any]] = {metric: {} for metric in graphs}
    steps = [step for metric in graphs for points in metrics[metric].values() for step, _ in points]
    for metric in order:
        ax = axes[metric]
        ax.set_title(prettify_metric_name(metric) if pretty_names else metric, fontweight="bold")
        text_row = 0
        for (exp_idx, mode, ds_id), points in metrics[metric].items():
            name = summaries[exp_idx].name
            what = f"{ds_id} {mode}" if ds_id else mode
            label = f"{name} ({what})" if n_experiments > 1 else what
            color = palette[exp_idx if n_experiments > 1 else _MODE_RANK.get(mode, 4) % len(palette)]
            if metric in texts:
                _write_text(ax, text_row, f"{label}: {_as_text(points[0][1])}", color)
                text_row += 1
                continue
            handle = _draw_curve(ax, points, mode, ds_markers[ds_id], color, smooth_factor)
            if handle is not None:
                legend.setdefault(label, handle)
                panel_legends[metric].setdefault(label, handle)
        if metric in texts:
            ax.axis("off")
        else:
            _style_graph(ax, min(steps), max(steps))

    if legend:
        if share_legend and len(order) > 1:
            labels = sorted(legend, key=_natural_key)
            fig.legend([legend[label] for label in labels], labels, loc="outside lower center",
                       ncol=min(len(labels), 4), frameon=False)
        else:
            for metric, entries in panel_legends.items():
                if entries:
                    axes[metric].legend(list(entries.values()), list(entries), loc="best", fontsize="small")
    return fig


def _write_text(ax: Axes, row: int, text: str, color: Any) -> None:
    """Lines of text down the panel, continuing in a second column once the first is full (as FastEstimator)."""
    column, line = divmod(row, 10)
    ax.text(0.5 * column, 0.9 - 0.1 * line, text, color=color, transform=ax.transAxes, fontsize="small")


def _smooth(values: np.ndarray, sigma: float) -> np.ndarray:
    if sigma == 0 or len(values) < 2:
        return values
    from scipy.ndimage import gaussian_filter1d

    return gaussian_filter1d(values, sigma=sigma)


def _draw_curve(ax: Axes, points: Points, mode: str, ds_marker: str | None, color: Any,
                smooth_factor: float) -> Any:
    """Draw one experiment's mode of a metric; return the artist that stands for it in a legend."""
    marker = ds_marker or _MARKERS.get(mode, "*")
    if len(points) == 1:
        step, value = points[0]
        value = _as_plottable(value)
        if value is None:
            return None  # a lone string or array among curves has no place on the axes
        if isinstance(value, ValWithError):
            # The interval as logged, drawn from its ends: its middle need not lie inside it (CalibrationError logs
            # the debiased estimate with an interval about the plain one), which errorbar's offsets cannot draw.
            ax.plot([step, step], [value.y_min, value.y_max], color=color, linewidth=1.5, marker="_",
                    markersize=10, zorder=2)
            value = value.y
        return ax.scatter([step], [value], s=64, color=color, marker=marker, edgecolors="white", linewidths=1.0,
                          zorder=3)
    x = np.array([step for step, _ in points], dtype=float)
    if isinstance(points[0][1], ValWithError):
        low, y, high = (np.array(column, dtype=float) for column in zip(*(value for _, value in points)))
        ax.fill_between(x, _smooth(low, smooth_factor), _smooth(high, smooth_factor), color=color, alpha=0.3,
                        linewidth=0, zorder=1)
    else:
        y = np.array([value for _, value in points], dtype=float)
    # Evaluation points are sparse, so eval/test/infer curves mark their points (at most ~10, as FastEstimator).
    show_marker = mode != "train" or ds_marker is not None
    (line,) = ax.plot(x, _smooth(y, smooth_factor), color=color, linewidth=1.5,
                      linestyle=_LINESTYLES.get(mode, "dashdot"), marker=marker if show_marker else None,
                      markersize=5, markevery=max(1, math.ceil(len(x) / 10)), zorder=2)
    return line


def _style_graph(ax: Axes, first_step: float, last_step: float) -> None:
    if last_step > first_step:
        margin = 0.02 * (last_step - first_step)
        ax.set_xlim(first_step - margin, last_step + margin)  # the same steps axis in every panel
    ax.set_xlabel("Steps")
    ax.grid(linestyle="--", alpha=0.5)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def visualize_logs(experiments: Summary | Iterable[Summary],
                   save_path: str | None = None,
                   smooth_factor: float = 0,
                   pretty_names: bool = False,
                   ignore_metrics: str | Iterable[str] | None = None,
                   include_metrics: str | Iterable[str] | None = None,
                   verbose: bool = True,
                   share_legend: bool = True) -> str | None:
    """Draw experiment histories (see :func:`plot_logs`) and save or show the figure.

    Args:
        experiments: The experiment(s) to draw.
        save_path: Where to write the figure: a file (PNG, or another format matplotlib writes, by the extension;
            none adds ``.png``) or a folder (``parse_logs.png`` inside it). None shows the figure: inline in a
            notebook, otherwise written to a temporary PNG whose path is printed.
        smooth_factor: The sigma of the gaussian smoothing of the curves (0: none).
        pretty_names: Turn keys into titles for the panel titles.
        ignore_metrics: Keys not to draw.
        include_metrics: The only keys to draw (None: all).
        verbose: Print where the figure was saved.
        share_legend: One legend below the panels (True) or one in each panel (False); fe_ray's addition (after
            FastEstimator 1.7's arguments), from FastEstimator's earlier matplotlib version.

    Returns:
        The path of the file written, or None when shown inline in a notebook.

    Raises:
        TypeError: If an experiment is not a Summary, or ``save_path`` is not a path.
        ValueError: If ``smooth_factor`` or ``save_path`` is invalid.
        ImportError: If matplotlib is not installed.
    """
    fig = plot_logs(experiments, smooth_factor=smooth_factor, ignore_metrics=ignore_metrics,
                    pretty_names=pretty_names, include_metrics=include_metrics, share_legend=share_legend)
    if save_path is not None:
        path = figure_path(fig, save_path, DEFAULT_FILE_NAME)
        return write_figure(fig, path, _SAVE_DPI, verbose)
    return present(fig, in_notebook(), "parse_logs", "FastEstimator-Warn: no window to show the log plot in",
                   _SAVE_DPI)
