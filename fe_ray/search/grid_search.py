"""GridSearch: evaluate every combination of the given parameter options."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fe_ray.search.search import Search, eval_fn_arguments


class GridSearch(Search):
    """Evaluate ``eval_fn`` on the Cartesian product of parameter options.

    Combinations are tried in ``itertools.product`` order over ``params`` as given (the last parameter varies
    fastest). With ``fit(save_dir)``, an interrupted search resumes where it stopped: combinations already in the
    saved summary are not evaluated again.

    ```python
    search = fe.search.GridSearch(eval_fn=lambda search_idx, a, b: {"sum": a + b},
                                  params={"a": [1, 2, 3], "b": [4, 5, 6]}, best_mode="max")
    search.fit()
    search.get_best_results()  # {'param': {'a': 3, 'b': 6, 'search_idx': 9}, 'result': {'sum': 9}}
    ```

    Args:
        eval_fn: Called as ``eval_fn(search_idx=i, **combination)``; returns a dict of results or a single value
            (recorded as ``{"value": v}``).
        params: ``{argument name: list of options}``; every name must be an argument of ``eval_fn``. Any iterable
            of options (tuple, range, set, numpy array, generator) is taken in its iteration order.
        best_mode: 'max' or 'min', the default direction of :meth:`get_best_results`; None (a plain evaluation
            grid) leaves it to be given there.
        optimize_field: The result key compared by :meth:`get_best_results`; None uses the only key of single-key
            results.
        name: Name of the search (its save file is ``<name>.json``).

    Raises:
        TypeError: If ``params`` is not a dict, an option list is a string or not iterable, or ``eval_fn`` is not
            a function taking ``search_idx``.
        ValueError: If ``params`` is empty, an option list is empty, a name is not an argument of ``eval_fn``, a
            required argument of ``eval_fn`` has no options, or ``best_mode`` is invalid.
    """

    def __init__(self, eval_fn: Callable[..., Any], params: Mapping[str, Iterable[Any]],
                 best_mode: str | None = None, optimize_field: str | None = None, name: str = "grid_search") -> None:
        super().__init__(eval_fn, name=name, best_mode=best_mode, optimize_field=optimize_field)
        self.params = _check_params(params, eval_fn)

    def _fit(self) -> None:
        names = list(self.params)
        for values in itertools.product(*self.params.values()):
            self.evaluate(**dict(zip(names, values)))


def _check_params(params: Any, eval_fn: Callable[..., Any]) -> dict[str, list[Any]]:
    """Return ``params`` as ``{name: list of options}`` after checking it against ``eval_fn``'s arguments."""
    if not isinstance(params, Mapping):
        raise TypeError(f"GridSearch params must be a dict {{argument name: list of options}}, got "
                        f"{type(params).__name__}.")
    if not params:
        raise ValueError("GridSearch params is empty, so there is nothing to search; give at least one argument of "
                         "eval_fn with its options, e.g. params={'lr': [1e-3, 1e-4]}.")
    checked: dict[str, list[Any]] = {}
    for name, options in params.items():
        # A string is iterable too, but searching over its characters is never what was meant.
        if isinstance(options, (str, bytes)) or not isinstance(options, Iterable) \
                or getattr(options, "ndim", 1) == 0:  # a 0-d numpy array is one value
            raise TypeError(f"GridSearch params[{name!r}] must be a list of options, got {options!r}; wrap a single "
                            f"value in a list: [{options!r}].")
        # Any other iterable is taken in its iteration order, as FastEstimator's itertools.product takes it (a set,
        # a generator); numpy arrays become Python values. A list is also what a second fit() can iterate again.
        options = options.tolist() if hasattr(options, "tolist") else list(options)
        if not options:
            raise ValueError(f"GridSearch params[{name!r}] has no options, so the grid is empty; give at least one "
                             "value or remove the key.")
        checked[name] = options
    named, required, var_keyword = eval_fn_arguments(eval_fn)
    if "search_idx" in checked:
        raise ValueError("GridSearch params must not contain 'search_idx': the search passes it to eval_fn itself.")
    unknown = sorted(set(checked) - named)
    if unknown and not var_keyword:
        raise ValueError(f"GridSearch params {unknown} are not arguments of eval_fn (which takes {sorted(named)}); "
                         "rename them to match or add them to eval_fn's signature.")
    missing = sorted(required - set(checked) - {"search_idx"})
    if missing:
        raise ValueError(f"eval_fn requires argument(s) {missing} that GridSearch params does not give; add their "
                         "options to params or give them defaults in eval_fn.")
    return checked
