"""The figure side of fe_ray's image displays: matplotlib figures on the Agg canvas, panel grids, colours shared
by every panel of a figure, the legend, saving / presenting a figure, and the :class:`Display` base class."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.util.figures import check_matplotlib, figure_path, present, write_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

BASE_DPI = 100  # layout pixels per inch: a figure of W layout pixels saved with dpi D is W * D / 100 pixels wide
_TOP, _BOTTOM = 60, 40  # title and legend margins in layout pixels (FastEstimator's plotly margins)
_MASK_ALPHA, _HEATMAP_ALPHA = 0.3, 0.5


def in_notebook() -> bool:
    """Whether this runs in a notebook: looked up on the package, so patching ``fe_ray.util.img_data.in_notebook``
    (as tests do) reaches every module of it."""
    from fe_ray.util import img_data

    return img_data.in_notebook()


def _colormap(name: str) -> Any:
    check_matplotlib("fe_ray's image displays")
    import matplotlib

    by_lower = {known.lower(): known for known in matplotlib.colormaps}
    if not isinstance(name, str) or name.lower() not in by_lower:
        raise ValueError(f"color_map {name!r} is not a matplotlib colour map; use one such as 'gray', 'Greys', "
                         "'turbo', 'viridis' or 'inferno'.")
    return matplotlib.colormaps[by_lower[name.lower()]]


def _palette(index: int, alpha: float) -> tuple[float, float, float, float]:
    import matplotlib

    colors = matplotlib.colormaps["tab10"].colors + matplotlib.colormaps["tab20"].colors[1::2]
    red, green, blue = colors[index % len(colors)][:3]
    return (red, green, blue, alpha)


def _color(fig: Figure, clazz: str, label: Any, alpha: float = 1.0) -> tuple[tuple[float, ...], bool]:
    """The colour of ``label`` among ``clazz`` things ('mask', 'bbox', 'keypoint') of ``fig``, the same in every
    panel, and whether this is its first use in the figure (it then goes into the legend)."""
    assigned = fig.__dict__.setdefault("_fe_ray_colors", {}).setdefault(clazz, {})
    if label in assigned:
        return assigned[label], False
    assigned[label] = _palette(len(assigned), alpha)
    return assigned[label], True


def _add_legend_entry(fig: Figure, label: str, handle: Any) -> None:
    fig.__dict__.setdefault("_fe_ray_legend", {}).setdefault(label, handle)


def _finish(fig: Figure) -> None:
    """Add the figure's legend (labelled masks, boxes and keypoints) in the bottom margin."""
    legend = fig.__dict__.get("_fe_ray_legend")
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=min(len(legend), 5), fontsize=7,
                   frameon=False)


def new_figure(width: int, height: int, rows: int, cols: int) -> Figure:
    """A figure of ``width`` x ``height`` layout pixels holding a ``rows`` x ``cols`` grid of blank panels, with
    FastEstimator's top (titles) and bottom (legend) margins."""
    check_matplotlib("fe_ray's image displays")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width / BASE_DPI, height / BASE_DPI), dpi=BASE_DPI)
    FigureCanvasAgg(fig)
    fig.__dict__["_fe_ray_size"] = (int(width), int(height))
    top = 1.0 - min(_TOP / height, 0.4)
    bottom = min(_BOTTOM / height, 0.3)
    axes = fig.subplots(rows, cols, squeeze=False,
                        gridspec_kw={"left": 0.005, "right": 0.995, "top": top, "bottom": bottom, "hspace": 0.02,
                                     "wspace": 0.02})
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
    return fig


def _axes_at(fig: Figure, axis: tuple[int, int]) -> Axes:
    """The panel of ``fig`` at 1-based (row, column) ``axis``."""
    row, col = axis
    for ax in fig.axes:
        spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
        if spec is not None and spec.rowspan.start == row - 1 and spec.colspan.start == col - 1:
            return ax
    raise ValueError(f"The figure has no panel at axis (row, col) = {axis!r} (1-based); pass a figure made by a "
                     "display's prepare() or fig.subplots(), and an axis inside its grid.")


def _title_size(text: str, col_width: int) -> float:
    """FastEstimator's title size rule (pixels, capped at 20) in points."""
    return max(4, min(20, 3 + (1 + col_width) // max(len(text), 1))) * 72 / BASE_DPI


def set_column_title(ax: Axes, title: str, col_width: int) -> None:
    if title:
        ax.set_title(title, fontsize=_title_size(title, col_width), family="monospace")


def save_figure(fig: Figure, save_path: str, dpi: float = BASE_DPI, verbose: bool = True) -> str:
    """Write ``fig`` to ``save_path`` (folders created; no extension: ``.png``) at ``dpi``, so a raster file is
    ``round(layout size * dpi / 100)`` pixels; return the path written.

    Raises:
        TypeError: If ``save_path`` is not a path.
        ValueError: If ``dpi`` is not positive or the extension is not a format matplotlib writes.
    """
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not dpi > 0:
        raise ValueError(f"dpi must be a positive number, got {dpi!r}.")
    path = figure_path(fig, save_path)
    width, height = fig.__dict__.get("_fe_ray_size") or tuple(np.round(fig.get_size_inches() * BASE_DPI))
    pixels = (round(width * dpi / BASE_DPI), round(height * dpi / BASE_DPI))
    # Matplotlib truncates inches * dpi to whole pixels; a quarter pixel more keeps float error from losing one.
    fig.set_size_inches((pixels[0] + 0.25) / dpi, (pixels[1] + 0.25) / dpi)
    return write_figure(fig, path, dpi, verbose)


def present_figure(fig: Figure, title: str, folder: str | None = None, file_name: str | None = None,
                   prefix: str = "FastEstimator") -> str | None:
    """Show ``fig`` inline in a notebook (returns None); elsewhere write it as a PNG (into ``folder``, default a
    ``fe_ray_figures`` folder in the temporary directory; named ``file_name`` or after ``title``), print where and
    return the path (see :func:`fe_ray.util.figures.present`)."""
    return present(fig, in_notebook(), title, f"{prefix}: no window to show {title or 'the figure'!r} in", BASE_DPI,
                   folder=folder, file_name=file_name,
                   write=lambda figure, path: save_figure(figure, path, verbose=False))


class Display(ABC):
    """Base of the displays: :meth:`prepare` draws the figure, :meth:`show` saves or presents it."""

    title: str = ""

    @abstractmethod
    def prepare(self, **kwargs: Any) -> Figure:
        """Draw the display into a matplotlib figure and return it."""

    def show(self, save_path: str | None = None, verbose: bool = True, scale: float = 1,
             interactive: bool = False) -> str | None:
        """Save the figure to ``save_path``, or present it when None (see the module docstring).

        Args:
            save_path: Where to write the figure (its extension picks the format; none: '.png'), or None.
            verbose: Print where the file went.
            scale: Resolution factor of the file: ``scale`` times the layout's pixels (dpi = 100 * scale).
            interactive: Accepted for FastEstimator compatibility; matplotlib figures are always static.

        Returns:
            The path written, or None when the figure was shown inline in a notebook.

        Raises:
            ValueError: If ``scale`` is not positive or the extension is not one matplotlib writes.
        """
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise ValueError(f"show() scale must be a positive number (the file has scale x the figure's pixels), "
                             f"got {scale!r}.")
        fig = self.prepare()
        if save_path is None:
            return present_figure(fig, self.title)
        return save_figure(fig, save_path, dpi=BASE_DPI * scale, verbose=verbose)

    def save(self, save_path: str, dpi: float = BASE_DPI, verbose: bool = False) -> str:
        """Write the figure to ``save_path`` at ``dpi`` and return the path (an fe_ray addition)."""
        return save_figure(self.prepare(), save_path, dpi=dpi, verbose=verbose)

