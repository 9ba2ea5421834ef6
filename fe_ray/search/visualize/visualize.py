"""``visualize_search``: plot a search with the chart that suits its shape.

Differences from FastEstimator 1.7, which draws interactive plotly figures (these apply to every plot of
:mod:`fe_ray.search.visualize`):

* Figures are static matplotlib figures drawn on matplotlib's Agg canvas (pyplot and its global backend are never
  touched; matplotlib is imported on first use, ``pip install matplotlib`` if missing). The ``plot_*`` functions
  return a ``matplotlib.figure.Figure`` instead of a plotly figure.
* ``save_path`` writes an image in the format its extension names (any matplotlib writes: png, svg, pdf, ...;
  ``.html``, FastEstimator's plotly format, gives a page showing the static image); a path without an extension
  gets ``.png`` (FastEstimator writes ``.html`` there), and an existing folder or a path ending in a separator
  gets ``figure.png`` inside it (FastEstimator's fallback name, ``figure``).
* Without ``save_path`` there is no window to open: in a notebook the figure is shown inline, elsewhere it is
  written to a temporary PNG under ``<tempdir>/fe_ray_figures`` whose path is printed (when ``verbose``).
* The ``visualize_*`` functions return the path written (None when shown inline); FastEstimator returns None.
* Bad input raises: a search without results, ``ignore_keys`` naming keys the search lacks, or extra keyword
  arguments other than ``groups`` and ``color_by`` (FastEstimator ignores them or draws an empty figure).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from fe_ray.search.visualize.cartesian import _cartesian_supports_data, visualize_cartesian
from fe_ray.search.visualize.heatmap import _heatmap_supports_data, visualize_heatmap
from fe_ray.search.visualize.parallel_coordinate_plot import visualize_parallel_coordinates
from fe_ray.search.visualize.vis_util import SearchData, resolve_search

_PASS_THROUGH = ("groups", "color_by")


def choose_plot(search: Any, ignore_keys: None | str | Sequence[str] = None) -> str:
    """The chart :func:`visualize_search` draws for ``search``: 'cartesian' (one varying numeric parameter),
    'heatmap' (two varying parameters, numeric results) or 'parallel_coordinates' (anything else)."""
    data = SearchData(resolve_search(search), ignore_keys=ignore_keys)
    if _cartesian_supports_data(data, throw_on_invalid=False):
        return "cartesian"
    if _heatmap_supports_data(data, throw_on_invalid=False):
        return "heatmap"
    return "parallel_coordinates"


def visualize_search(search: Any,
                     title: str | None = None,
                     ignore_keys: None | str | Sequence[str] = None,
                     save_path: str | os.PathLike[str] | None = None,
                     verbose: bool = True,
                     **kwargs: Any) -> str | None:
    """Plot a search's results with the chart that suits them.

    One varying parameter (numbers only) gives line plots of each result against it (:func:`visualize_cartesian`);
    two varying parameters give one heatmap per result (:func:`visualize_heatmap`); anything else, including
    string-valued results or more parameters, gives a parallel coordinate plot
    (:func:`visualize_parallel_coordinates`). Parameters that kept a single value do not count.

    ```python
    search = fe.search.GridSearch(eval_fn=lambda search_idx, a, b: {"sum": a + b},
                                  params={"a": [1, 2, 3], "b": [4, 5, 6]})
    search.fit()
    fe.search.visualize.visualize_search(search, save_path="plots/")  # a heatmap: plots/figure.png
    ```

    Args:
        search: A search (e.g. a fitted GridSearch or GoldenSection) or the path of its saved JSON file.
        title: The figure title; None uses the search's name.
        ignore_keys: Parameter or result keys to leave out: one name or a list of names.
        save_path: Where to write the image: a file (no extension: '.png') or a folder (gets 'figure.png'). None
            shows it inline in a notebook, else writes a temporary PNG and prints its path.
        verbose: Whether to print where the figure was written.
        **kwargs: ``groups`` (for line plots, see :func:`visualize_cartesian`) and ``color_by`` (for parallel
            coordinate plots, see :func:`visualize_parallel_coordinates`); the one the chosen chart does not use is
            ignored.

    Returns:
        The path of the file written, or None when shown inline in a notebook.

    Raises:
        TypeError: If ``search`` is neither a search nor a path, an argument has the wrong type, or an unknown
            keyword argument is given.
        ValueError: If the search has no results, the path holds no saved search, or ``ignore_keys`` names keys the
            search lacks.
    """
    unknown = sorted(set(kwargs) - set(_PASS_THROUGH))
    if unknown:
        raise TypeError(f"visualize_search got unexpected keyword arguments {unknown}; it passes on only "
                        f"{list(_PASS_THROUGH)}.")
    search = resolve_search(search)
    chart = choose_plot(search, ignore_keys=ignore_keys)
    if chart == "cartesian":
        return visualize_cartesian(search=search, title=title, ignore_keys=ignore_keys, save_path=save_path,
                                   verbose=verbose, groups=kwargs.get("groups"))
    if chart == "heatmap":
        return visualize_heatmap(search=search, title=title, ignore_keys=ignore_keys, save_path=save_path,
                                 verbose=verbose)
    return visualize_parallel_coordinates(search=search, title=title, ignore_keys=ignore_keys, save_path=save_path,
                                          verbose=verbose, color_by=kwargs.get("color_by"))
