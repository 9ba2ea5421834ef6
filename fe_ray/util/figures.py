"""Where fe_ray's matplotlib figures go (image displays, search plots, log plots): one place that checks for
matplotlib, turns a ``save_path`` into a file to write, writes it, and "shows" a figure (inline in a notebook; as a
temporary PNG elsewhere, since fe_ray draws on matplotlib's Agg canvas, which has no window, and never switches the
user's pyplot backend)."""

from __future__ import annotations

import base64
import html
import importlib.util
import io
import os
import re
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


#: Extensions written as an HTML page around a PNG (FastEstimator writes plotly HTML there).
HTML_EXTENSIONS = ("html", "htm")


def check_matplotlib(what: str) -> None:
    """Raise the ImportError telling how to install matplotlib when it is missing (without importing it).

    Args:
        what: What needs it, for the message (e.g. "ImageSaver").
    """
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError(f"{what} draws its figures with matplotlib, which is not installed: pip install matplotlib")


def figure_path(fig: Figure, save_path: Any, folder_file: str | None = None) -> str:
    """The file to write ``fig`` to for ``save_path``: normalised, ``.png`` added when there is no extension, and,
    when ``folder_file`` is given, ``folder_file`` inside an existing folder or a path ending in a separator.

    Besides matplotlib's formats, ``.html`` (FastEstimator's plotly format) is accepted: :func:`write_figure` writes
    a page showing the figure as an embedded PNG, so programs that name an HTML file keep working.

    Args:
        fig: The figure (its canvas says which formats it writes).
        save_path: The user's path.
        folder_file: The file name to use inside a folder; None treats every path as a file.

    Raises:
        TypeError: If ``save_path`` is not a path.
        ValueError: If it is empty or its extension is not a format matplotlib writes.
    """
    if not isinstance(save_path, (str, os.PathLike)):
        raise TypeError(f"save_path must be a file or folder path (str) or None, got {save_path!r}.")
    text = os.fspath(save_path)
    if not text:
        raise ValueError("save_path is empty; give a file path such as 'figure.png', a folder, or None.")
    if folder_file is not None and (os.path.isdir(text) or text.endswith(("/", os.sep))):
        text = os.path.join(text, folder_file)
    path = os.path.normpath(text)
    if not os.path.splitext(path)[1]:
        path += ".png"
    extension = os.path.splitext(path)[1][1:].lower()
    supported = fig.canvas.get_supported_filetypes()
    if extension not in supported and extension not in HTML_EXTENSIONS:
        raise ValueError(f"Cannot save the figure as {path!r}: matplotlib writes {sorted(supported)}; use one of "
                         f"those extensions (e.g. '.png') or '.html'.")
    return path


def write_figure(fig: Figure, path: str, dpi: float, verbose: bool = True) -> str:
    """Write ``fig`` to ``path`` (a :func:`figure_path`; folders created) at ``dpi`` and return the path."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    extension = os.path.splitext(path)[1][1:].lower()
    if extension in HTML_EXTENSIONS:
        _write_html(fig, path, dpi)
    else:
        fig.savefig(path, dpi=dpi, format=extension)
    if verbose:
        print(f"Saving to {path}", flush=True)
    return path


def present(fig: Figure, notebook: bool, stem: str, message: str, dpi: float, folder: str | None = None,
            file_name: str | None = None, verbose: bool = True,
            write: Callable[[Figure, str], str] | None = None) -> str | None:
    """Show ``fig``: inline in a notebook (returns None), else write it as a PNG and return its path.

    Args:
        fig: The figure.
        notebook: Whether this runs in a notebook (the caller's check, so tests can patch the caller's).
        stem: Start of the temporary file's name (sanitised; a random suffix follows).
        message: Printed before the path, e.g. ``"FastEstimator-Search: no window to show the figure in"``.
        dpi: Resolution of the PNG.
        folder: Where to write (default: ``fe_ray_figures`` in the temporary directory).
        file_name: A fixed file name in ``folder`` instead of a temporary one.
        verbose: Print where the figure went.
        write: Writes the figure to a path (default: :func:`write_figure` at ``dpi``), e.g. one that sizes it first.
    """
    if notebook:
        from IPython.display import Image, display

        buffer = io.BytesIO()
        fig.savefig(buffer, dpi=dpi, format="png")
        display(Image(buffer.getvalue()))
        return None
    folder = folder or os.path.join(tempfile.gettempdir(), "fe_ray_figures")
    os.makedirs(folder, exist_ok=True)
    if file_name is None:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("_") or "figure"
        handle, path = tempfile.mkstemp(prefix=f"{safe}_", suffix=".png", dir=folder)
        os.close(handle)
    else:
        path = os.path.join(folder, file_name)
    if write is None:
        write_figure(fig, path, dpi, verbose=False)
    else:
        write(fig, path)
    if verbose:
        print(f"{message} (matplotlib's Agg canvas); wrote it to {path}", flush=True)
    return path


def _write_html(fig: Figure, path: str, dpi: float) -> None:
    """A self-contained HTML page showing ``fig`` as an inline PNG (static: fe_ray draws with matplotlib)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=dpi, format="png")
    title = html.escape(os.path.splitext(os.path.basename(path))[0])
    image = base64.b64encode(buffer.getvalue()).decode("ascii")
    with open(path, "w", encoding="utf-8") as page:
        page.write(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n"
                   f"<body><img alt=\"{title}\" src=\"data:image/png;base64,{image}\"></body></html>\n")
