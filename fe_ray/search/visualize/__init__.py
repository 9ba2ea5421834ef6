"""Plots of search results (``fe.search.visualize``), drawn with matplotlib (imported on first use).

:func:`visualize_search` picks the chart by the number of varying parameters: line plots (1), heatmaps (2) or a
parallel coordinate plot (more). Each chart also has a ``plot_*`` function returning the matplotlib figure and a
``visualize_*`` function saving it. See :mod:`fe_ray.search.visualize.visualize` for the differences from
FastEstimator 1.7's plotly figures.
"""

from fe_ray.search.visualize.cartesian import plot_cartesian, visualize_cartesian
from fe_ray.search.visualize.heatmap import plot_heatmap, visualize_heatmap
from fe_ray.search.visualize.parallel_coordinate_plot import plot_parallel_coordinates, visualize_parallel_coordinates
from fe_ray.search.visualize.visualize import visualize_search

__all__ = ["plot_cartesian", "plot_heatmap", "plot_parallel_coordinates", "visualize_cartesian", "visualize_heatmap",
           "visualize_parallel_coordinates", "visualize_search"]
