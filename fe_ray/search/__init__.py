"""Hyperparameter searches (``fe.search``): GridSearch, GoldenSection and their base class Search.

Pure Python: a search only calls the user's ``eval_fn``, which may train with any backend. ``fe.search.visualize``
plots a search's results (matplotlib, imported when a plot is drawn).
"""

from fe_ray.search import visualize
from fe_ray.search.golden_section import GoldenSection
from fe_ray.search.grid_search import GridSearch
from fe_ray.search.search import Search

__all__ = ["GoldenSection", "GridSearch", "Search", "visualize"]
