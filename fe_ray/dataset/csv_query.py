"""``CSVDataset(include_if=...)``: FastEstimator's row filters (pandas ``isin`` dicts, ``query`` strings and
predicates over columns), evaluated here without pandas."""

from __future__ import annotations

import ast
import inspect
import io
import math
import operator
import re
import tokenize
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _isin(value: Any, candidates: Sequence[Any]) -> bool:
    """pandas ``isin`` for one value: equality, and missing values (None or NaN) match each other."""
    if _is_null(value):
        return any(_is_null(candidate) for candidate in candidates)
    return any(not _is_null(candidate) and value == candidate for candidate in candidates)


def row_filter(include_if: Any, columns: list[str]) -> Callable[[dict[str, Any]], bool]:
    """A predicate over samples from FastEstimator's ``include_if`` (a dict, a query string or a function).

    Raises:
        ValueError: If ``include_if`` has another type, names a missing column, or a query does not parse.
    """
    if isinstance(include_if, Mapping):
        conditions = []
        for column, wanted in include_if.items():
            if column not in columns:
                raise ValueError(f"CSVDataset include_if names column {column!r}, which the file lacks; its columns "
                                 f"are {columns}.")
            candidates = [None] if wanted is None else list(wanted) if isinstance(wanted, (list, tuple, set)) \
                else [wanted]
            conditions.append((column, candidates))
        return lambda sample: all(_isin(sample[column], candidates) for column, candidates in conditions)
    if isinstance(include_if, str):
        return _Query(include_if, columns)
    if callable(include_if):
        params = list(inspect.signature(include_if).parameters)
        missing = [param for param in params if param not in columns]
        if missing:
            raise ValueError(f"CSVDataset include_if function asks for {missing}, which are not columns of the file; "
                             f"its parameters must be column names among {columns}.")
        return lambda sample: bool(include_if(**{param: sample[param] for param in params}))
    raise ValueError(f"CSVDataset include_if must be None, a dict {{column: values}}, a query string or a function "
                     f"of columns, got {type(include_if).__name__}: {include_if!r}.")


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge}


class _Query:
    """A pandas ``query`` string evaluated on one sample at a time (the subset :class:`CSVDataset` describes)."""

    def __init__(self, query: str, columns: list[str]) -> None:
        self.query = query
        self.names: dict[str, str] = {name: name for name in columns if name.isidentifier()}
        try:
            self.tree = ast.parse(self._rewrite(query), mode="eval")
        except (SyntaxError, tokenize.TokenError) as error:
            raise ValueError(f"CSVDataset include_if query {query!r} does not parse ({error}); write it as pandas "
                             "query does, e.g. \"type >= 1 and mode == 'train'\".") from None
        self._check(self.tree.body, columns)

    def _rewrite(self, query: str) -> str:
        """Backtick-quoted names become placeholders; ``&``/``|`` become ``and``/``or`` (pandas' precedence)."""
        pieces, index = [], 0
        for match in re.finditer(r"`([^`]*)`|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", query):
            pieces.append(query[index:match.start()])
            if match.group(1) is not None:
                placeholder = f"__fe_column_{len(self.names)}__"
                self.names[placeholder] = match.group(1)
                pieces.append(placeholder)
            else:
                pieces.append(match.group(0))
            index = match.end()
        pieces.append(query[index:])
        if "@" in query and "@" in "".join(pieces[::2]):
            raise ValueError(f"CSVDataset include_if query {query!r} uses '@' (a pandas local variable), which fe_ray "
                             "does not support: put the value in the string, or pass a function instead.")
        tokens = []
        for token in tokenize.generate_tokens(io.StringIO("".join(pieces)).readline):
            if token.type == tokenize.OP and token.string in ("&", "|"):
                tokens.append((tokenize.NAME, "and" if token.string == "&" else "or"))
            else:
                tokens.append((token.type, token.string))
        return tokenize.untokenize(tokens).strip()

    def _check(self, node: ast.AST, columns: list[str]) -> None:
        allowed = (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.Invert, ast.BinOp,
                   ast.Compare, ast.In, ast.NotIn, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Set,
                   *_BINARY, *_COMPARE)
        for child in ast.walk(node):
            if not isinstance(child, allowed):
                raise ValueError(f"CSVDataset include_if query {self.query!r} uses {type(child).__name__}, which "
                                 "fe_ray's query reader does not support (columns, literals, arithmetic, comparisons "
                                 "and and/or/not only); pass a function of the columns instead.")
            if isinstance(child, ast.Name) and self.names.get(child.id, child.id) not in columns:
                raise ValueError(f"CSVDataset include_if query {self.query!r} names {child.id!r}, which is not a "
                                 f"column of the file; its columns are {columns} (quote names with spaces in "
                                 "backticks).")

    def __call__(self, sample: dict[str, Any]) -> bool:
        try:
            return bool(self._eval(self.tree.body, sample))
        except TypeError as error:
            raise ValueError(f"CSVDataset include_if query {self.query!r} failed on row {sample}: {error}.") from None

    def _eval(self, node: ast.AST, sample: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return sample[self.names.get(node.id, node.id)]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self._eval(item, sample) for item in node.elts]
        if isinstance(node, ast.BoolOp):
            values = (self._eval(item, sample) for item in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp):
            value = self._eval(node.operand, sample)
            if isinstance(node.op, ast.Not) or (isinstance(node.op, ast.Invert) and isinstance(value, bool)):
                return not value
            return -value if isinstance(node.op, ast.USub) else +value if isinstance(node.op, ast.UAdd) else ~value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, sample), self._eval(node.right, sample))
        assert isinstance(node, ast.Compare), node  # _check allowed nothing else
        left = self._eval(node.left, sample)
        for op, right_node in zip(node.ops, node.comparators):
            right = self._eval(right_node, sample)
            if not self._compare(op, left, right, right_node):
                return False
            left = right
        return True

    def _compare(self, op: ast.cmpop, left: Any, right: Any, right_node: ast.AST) -> bool:
        listed = isinstance(right_node, (ast.List, ast.Tuple, ast.Set))
        if isinstance(op, (ast.In, ast.NotIn)) or (listed and isinstance(op, (ast.Eq, ast.NotEq))):
            if not listed:
                raise ValueError(f"CSVDataset include_if query {self.query!r}: 'in' needs a list of values on its "
                                 "right, e.g. \"mode in ['train', 'eval']\".")
            found = _isin(left, right)
            return found if isinstance(op, (ast.In, ast.Eq)) else not found
        if _is_null(left) or _is_null(right):
            return isinstance(op, ast.NotEq)  # a missing value equals nothing and orders with nothing
        return bool(_COMPARE[type(op)](left, right))
