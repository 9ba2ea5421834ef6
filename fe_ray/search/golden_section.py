"""GoldenSection: golden-section search for the best value of one parameter of a unimodal objective."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from fe_ray.search.search import LOG_PREFIX, Result, Search, check_best_mode, eval_fn_arguments

# The interval shrinks by 1/phi per iteration; the two interior points sit at 1/phi^2 and 1/phi of it, which is what
# lets every iteration reuse one of the previous points and evaluate only one new one.
INV_PHI = (math.sqrt(5) - 1) / 2
INV_PHI_SQ = (3 - math.sqrt(5)) / 2


class GoldenSection(Search):
    """Golden-section search over one argument of ``eval_fn`` in ``[x_min, x_max]``.

    Finds the maximum (or minimum) of a unimodal objective: after two initial evaluations, each of the
    ``max_iter`` iterations narrows the bracket by the factor 0.618 and evaluates one new point, so the bracket
    after ``i`` iterations is ``0.618**i * (x_max - x_min)`` wide. The points are those FastEstimator evaluates
    (interior points truncated to ints in integer mode), so a search saved by either resumes in the other. In
    integer mode points repeat once the bracket is narrow; repeats are answered from the cache, not re-evaluated,
    and the truncation can leave the result one step from the true optimum.

    ```python
    search = fe.search.GoldenSection(eval_fn=lambda search_idx, n: -(n - 3) ** 2, x_min=0, x_max=6, max_iter=10,
                                     best_mode="max")
    search.fit()
    search.get_best_results()["param"]["n"]  # 3
    ```

    Args:
        eval_fn: Called as ``eval_fn(search_idx=i, <x>=value)``; besides ``search_idx`` it must take exactly one
            argument, the one searched. Returns a dict of results or a single value (recorded as ``{"value": v}``).
        x_min: Lower end of the search interval.
        x_max: Upper end of the search interval (greater than ``x_min``).
        max_iter: Number of narrowing iterations (>= 1), each evaluating at most one new point.
        best_mode: 'max' or 'min': which end of the objective is sought.
        optimize_field: The result key to optimize; None uses the only key of single-key results.
        integer: Search integers only (``x_min`` and ``x_max`` must then be ints); False searches floats.
        name: Name of the search (its save file is ``<name>.json``).

    Raises:
        TypeError: If the bounds are not numbers (ints in integer mode), ``max_iter`` is not an int, or ``eval_fn``
            is not a function taking ``search_idx``.
        ValueError: If ``x_min >= x_max``, ``max_iter < 1``, ``best_mode`` is not 'max' or 'min', or ``eval_fn``
            does not take exactly one argument besides ``search_idx``.
    """

    def __init__(self, eval_fn: Callable[..., Any], x_min: int | float, x_max: int | float, max_iter: int,
                 best_mode: str = "max", optimize_field: str | None = None, integer: bool = True,
                 name: str = "golden_section_search") -> None:
        super().__init__(eval_fn, name=name, best_mode=check_best_mode(best_mode, allow_none=False),
                         optimize_field=optimize_field)
        self.integer = bool(integer)
        self.x_min, self.x_max = _check_bounds(x_min, x_max, self.integer)
        if not isinstance(max_iter, numbers.Integral) or isinstance(max_iter, bool):
            raise TypeError(f"max_iter must be an int (the number of narrowing iterations), got {max_iter!r}.")
        if max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}; each iteration narrows the interval by 0.618.")
        self.max_iter = int(max_iter)
        self.arg_name = _searched_argument(eval_fn)

    def _point(self, x: float) -> int | float:
        # Truncation (not rounding), as FastEstimator converts its points: the same points keep saved searches
        # interchangeable.
        return int(x) if self.integer else x

    def _score(self, x: int | float) -> float:
        result: Result = self.evaluate(**{self.arg_name: x})
        field = self.optimize_field
        if field is None:
            if len(result) != 1:
                raise ValueError(f"eval_fn returned keys {sorted(result)}, so which one to optimize is ambiguous; pass "
                                 "optimize_field=<one of them> to GoldenSection.")
            field = next(iter(result))
        if field not in result:
            raise ValueError(f"optimize_field {field!r} is not in eval_fn's result {sorted(result)}; pass one of "
                             "those keys.")
        return result[field]

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.best_mode == "max" else a < b

    def _fit(self) -> None:
        low, width = self.x_min, self.x_max - self.x_min
        left, right = self._point(low + INV_PHI_SQ * width), self._point(low + INV_PHI * width)
        left_score, right_score = self._score(left), self._score(right)
        for _ in range(self.max_iter):
            width *= INV_PHI
            if self._better(left_score, right_score):
                # The optimum is left of ``right``: the old left point becomes the new right one.
                right, right_score = left, left_score
                left = self._point(low + INV_PHI_SQ * width)
                left_score = self._score(left)
            else:
                # The optimum is right of ``left``: the bracket starts there and the old right point moves left.
                low = left
                left, left_score = right, right_score
                right = self._point(low + INV_PHI * width)
                right_score = self._score(right)
        best = self.get_best_results()
        print(f"{LOG_PREFIX} Golden Section Search Finished, best parameters: {best['param']}, best result: "
              f"{best['result']}", flush=True)


def _check_bounds(x_min: Any, x_max: Any, integer: bool) -> tuple[int | float, int | float]:
    kind = numbers.Integral if integer else numbers.Real
    for label, value in (("x_min", x_min), ("x_max", x_max)):
        if not isinstance(value, kind) or isinstance(value, bool):
            fix = "pass integer=False to search floats" if integer and isinstance(value, numbers.Real) else \
                "give a number"
            raise TypeError(f"GoldenSection {label} must be {'an int' if integer else 'a number'}, got {value!r}; "
                            f"{fix}.")
    if not x_min < x_max:
        raise ValueError(f"GoldenSection needs x_min < x_max, got x_min={x_min!r}, x_max={x_max!r}; swap or widen "
                         "the bounds.")
    cast = int if integer else float
    return cast(x_min), cast(x_max)


def _searched_argument(eval_fn: Callable[..., Any]) -> str:
    named, _, _ = eval_fn_arguments(eval_fn)
    others = sorted(named - {"search_idx"})
    if len(others) != 1:
        raise ValueError(f"GoldenSection searches one argument, so eval_fn must take exactly one besides search_idx; "
                         f"it takes {others}. Fix the others with functools.partial or defaults in a wrapper.")
    return others[0]
