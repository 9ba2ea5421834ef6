"""FastEstimator 1.7's image displays (``fe.util.ImageDisplay``, ``BatchDisplay``, ``GridDisplay``), drawn with
matplotlib.

An :class:`ImageDisplay` is one panel: an image (grey or RGB, any of FastEstimator's value ranges) with optional
masks, bounding boxes, keypoints and a line of text on top. A :class:`BatchDisplay` stacks one panel per element of
a batch into a column; a :class:`GridDisplay` puts such columns side by side. ``prepare()`` returns the matplotlib
``Figure``; ``show()`` saves it (a path) or presents it (no path: inline in a notebook, otherwise written to a
temporary PNG whose path is printed).

Deliberate differences from FastEstimator 1.7, which draws with plotly:

* Figures are static matplotlib figures drawn on matplotlib's Agg canvas (pyplot and its global backend are never
  touched): no interactive plotly figure, no hover; labelled masks, boxes and keypoints get one legend per figure
  instead of plotly's clickable one. ``prepare`` returns a ``matplotlib.figure.Figure``.
* ``show(save_path)`` writes a PNG (or any other format matplotlib writes, by the extension); a path without an
  extension gets ``.png`` (FastEstimator writes HTML there). ``show()`` without a path outside a notebook cannot
  open a window (Agg), so it writes the figure to a temporary PNG, prints its path and returns it.
* Sizes are in pixels at 100 dots per inch (see each ``prepare``); saving with ``dpi`` (or ``scale``, which is
  ``dpi / 100``) scales the file's pixel size by ``dpi / 100``.
* Colour maps are matplotlib's (plotly names such as ``'gray'``, ``'turbo'``, ``'Greys'``, ``'viridis'`` exist in
  both; names are matched ignoring case).
* Bad arguments raise ValueError / TypeError (FastEstimator asserts). Batched arguments of a BatchDisplay must have
  the same length (FastEstimator pads the shorter ones with nothing). Integer images are clipped to [0, 255]
  (FastEstimator wraps them around), and images outside FastEstimator's known ranges are scaled per channel from
  their minimum to their maximum.
* A text given to a BatchDisplay as one string is written on every panel (FastEstimator would split it into
  characters); a single bounding box may be given as one (x0, y0, width, height[, label]) tuple.

The package's modules: :mod:`~fe_ray.util.img_data.figure` (figures, colours, legend, saving, the ``Display``
base), :mod:`~fe_ray.util.img_data.values` (argument conversion and value ranges),
:mod:`~fe_ray.util.img_data.image` (``ImageDisplay``) and :mod:`~fe_ray.util.img_data.batch` (``BatchDisplay``,
``GridDisplay``).
"""

from __future__ import annotations

from fe_ray.util.environment import in_notebook
from fe_ray.util.img_data.batch import BatchDisplay, GridDisplay
from fe_ray.util.img_data.figure import (
    BASE_DPI,
    Display,
    check_matplotlib,
    new_figure,
    present_figure,
    save_figure,
    set_column_title,
)
from fe_ray.util.img_data.image import ImageDisplay
from fe_ray.util.img_data.values import image_to_rgb

__all__ = ["BASE_DPI", "BatchDisplay", "Display", "GridDisplay", "ImageDisplay", "check_matplotlib", "image_to_rgb",
           "in_notebook", "new_figure", "present_figure", "save_figure", "set_column_title"]
