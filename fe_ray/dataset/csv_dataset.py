"""CSVDataset: one sample per row of a CSV file, typed per column as FastEstimator's (pandas-based) reader does.

pandas is not a dependency, so the file is read with the ``csv`` module and each column is typed by the rules of
``pandas.read_csv`` with its defaults, which is what FastEstimator returns: a column whose values are all integers
gives Python ``int``, all numbers ``float``, all ``True``/``False`` ``bool``, anything else ``str``. A missing value
(an empty field or ``NA``, ``nan``, ``null`` ...) is ``float('nan')``, which turns an integer column into floats.

``fill_na`` and ``include_if`` follow FastEstimator's (pandas ``fillna``, ``isin`` and ``query``) semantics; a query
string is parsed here (pandas is not used), see :class:`CSVDataset` for the subset supported.
"""

from __future__ import annotations

import ast
import csv
import inspect
import io
import math
import numbers
import operator
import os
import re
import tokenize
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

import numpy as np

from fe_ray.dataset._files import checked_file, open_file
from fe_ray.dataset.in_memory_dataset import InMemoryDataset

# pandas' default missing-value markers (``keep_default_na=True``).
DEFAULT_NA_VALUES = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
    "NULL", "NaN", "None", "n/a", "nan", "null"})
_TRUE, _FALSE = frozenset({"True", "TRUE", "true"}), frozenset({"False", "FALSE", "false"})
# Python's int()/float() also accept '1_000' and 'infinity' variants pandas keeps as text, hence explicit patterns.
_INT = re.compile(r"\s*[+-]?\d+\s*")
_FLOAT = re.compile(r"\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity)\s*", re.IGNORECASE)
# numpy types are accepted as pandas accepts them; its to_dict gives Python values for them all the same (float32
# ones rounded to float32 first, hence a kind of their own).
_DTYPES: dict[Any, str] = {
    int: "int", float: "float", bool: "bool", str: "str", object: "str", "int": "int", "float": "float",
    "bool": "bool", "str": "str", "object": "str", np.int64: "int", np.int32: "int", np.float64: "float",
    np.float32: "float32", np.bool_: "bool", np.str_: "str", "int64": "int", "int32": "int", "float64": "float",
    "float32": "float32"}
# Characters FastEstimator strips from column names (keys holding them could not be used in ops).
_BANNED_KEY_CHARS = str.maketrans("", "", ":|;")
_PANDAS_DEFAULT = "pandas_default"
_SUPPORTED_KWARGS = ("sep", "encoding", "quotechar", "usecols", "nrows", "na_values", "keep_default_na", "dtype")


class CSVDataset(InMemoryDataset):
    """A dataset with one sample per row of a CSV file whose first row names the columns (the sample keys).

    Sample ``i`` is ``{column: value}`` for row ``i``, typed per column as described in the module docstring, the
    same values FastEstimator's ``CSVDataset`` gives. ``parent_path`` is the file's folder, for columns holding
    relative file paths (join them to it, e.g. in a reading op). As in FastEstimator, ``:``, ``|`` and ``;`` are
    removed from column names once the rows are filtered (so a blank header becomes ``Unnamed 2``, not
    ``Unnamed: 2``).

    ``fill_na`` replaces missing values: ``"pandas_default"`` keeps ``float('nan')``, None puts ``None``, any other
    value is put as given, except that a number becomes a float in a numeric column with gaps (pandas keeps such a
    column float). ``include_if`` then keeps only some rows:

    * a dict ``{column: value or list of values}`` keeps rows whose every named column holds one of its values
      (pandas ``isin``: equal values match, ``1 == 1.0``; a None value or list entry matches missing values);
    * a string is a pandas ``query`` expression, e.g. ``"type >= 1 and mode == 'train'"``: column names (in
      backticks when they are not identifiers), numbers, strings, True/False/None, lists, arithmetic, comparisons
      (``== [a, b]`` and ``in [a, b]`` test membership, as pandas does), ``and``/``or``/``not`` and ``&``/``|``/``~``
      (with the precedence of ``and``/``or``, as pandas gives them). pandas' ``@variable`` references, function
      calls and ``.str`` accessors are not supported (use a function instead);
    * a function whose parameters are column names keeps the rows for which it returns a true value.

    Unlike FastEstimator (whose kept rows keep their file row numbers as indices, so ``dataset[0]`` fails when row
    0 was dropped), the kept rows are numbered from 0.

    Args:
        file_path: Path of the CSV file (``.gz``, ``.bz2`` and ``.xz`` files are decompressed).
        delimiter: The one-character field separator.
        include_if: Which rows to keep (see above); None keeps all.
        fill_na: The value for missing fields (see above).
        **kwargs: The ``pandas.read_csv`` options FastEstimator passes through that are supported here: ``sep``
            (an alias of ``delimiter``), ``encoding`` (default utf-8), ``quotechar`` (default ``"``), ``usecols``
            (column names or positions to keep), ``nrows`` (rows to read), ``na_values`` (extra missing-value
            markers: a string, a list, or ``{column: list}``), ``keep_default_na`` (False: only ``na_values`` mark
            missing values) and ``dtype`` (``str``, ``int``, ``float`` or ``bool``, for all columns or as
            ``{column: type}``).

    Raises:
        FileNotFoundError: If ``file_path`` does not exist.
        ValueError: If the path is a folder, the file is empty, a delimiter is not one character, a row has more
            fields than the header, the file looks split by another delimiter, or a ``usecols``/``dtype`` entry
            does not fit the file, ``include_if`` is not a dict, string or function, names a column the file lacks,
            or a query cannot be parsed or evaluated.
        TypeError: If an option is not supported or has the wrong type.
    """

    def __init__(self, file_path: str | os.PathLike[str], delimiter: str = ",",
                 include_if: None | Mapping[str, Any] | str | Callable[..., bool] = None,
                 fill_na: Any = _PANDAS_DEFAULT, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(_SUPPORTED_KWARGS))
        if unknown:
            raise TypeError(f"CSVDataset does not support the pandas option(s) {unknown}; supported: "
                            f"{list(_SUPPORTED_KWARGS)}. Read the file yourself and pass the rows to "
                            "InMemoryDataset for anything else.")
        if "sep" in kwargs:
            if delimiter != ",":
                raise ValueError(f"CSVDataset got both delimiter={delimiter!r} and sep={kwargs['sep']!r}; pass one.")
            delimiter = kwargs["sep"]
        _check_char(delimiter, "delimiter")
        quotechar = kwargs.get("quotechar", '"')
        _check_char(quotechar, "quotechar")
        path = checked_file(file_path, "CSVDataset", "pass the path of a CSV file (for a folder of files use "
                            "DirDataset or LabeledDirDataset).")
        header, rows = _read(path, delimiter, quotechar, kwargs.get("encoding") or "utf-8", kwargs.get("nrows"))
        columns = _select(header, kwargs.get("usecols"), path)
        na = _na_values(kwargs.get("na_values"), kwargs.get("keep_default_na", True), header)
        dtypes = _dtypes(kwargs.get("dtype"), header)
        typed = {name: _type_column([row[pos] if pos < len(row) else None for row in rows], na.get(name, na[None]),
                                    dtypes.get(name), name, fill_na)
                 for pos, name in columns}
        samples = [{name: typed[name][i] for _, name in columns} for i in range(len(rows))]
        if include_if is not None:
            keep = _row_filter(include_if, [name for _, name in columns])
            samples = [sample for sample in samples if keep(sample)]
        samples = [{name.translate(_BANNED_KEY_CHARS): value for name, value in sample.items()} for sample in samples]
        super().__init__(samples)
        self.parent_path = os.path.dirname(path)


def _check_char(value: Any, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"CSVDataset {what} must be a one-character string, got {type(value).__name__}: {value!r}.")
    if len(value) != 1 or value in "\r\n":
        raise ValueError(f"CSVDataset {what} must be one character (',', ';', '\\t' ...) other than a line break, "
                         f"got {value!r}.")


def _open(path: str, encoding: str) -> IO[str]:
    # utf-8-sig drops a byte-order mark, which pandas also ignores; it reads plain utf-8 unchanged.
    encoding = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    return open_file(path, "rt", encoding=encoding, newline="")


def _read(path: str, delimiter: str, quotechar: str, encoding: str, nrows: int | None
          ) -> tuple[list[str], list[list[str]]]:
    """The header (duplicates and blanks renamed as pandas does) and the data rows, blank lines skipped."""
    if nrows is not None and (not isinstance(nrows, int) or isinstance(nrows, bool)):
        raise TypeError(f"CSVDataset nrows must be an int or None, got {type(nrows).__name__}: {nrows!r}.")
    if nrows is not None and nrows < 0:
        raise ValueError(f"CSVDataset nrows must be >= 0, got {nrows}.")
    with _open(path, encoding) as handle:
        reader = csv.reader(handle, delimiter=delimiter, quotechar=quotechar)
        lines = (row for row in reader if row)
        header = next(lines, None)
        if header is None:
            raise ValueError(f"CSVDataset file {path!r} is empty; it needs a header row naming the columns.")
        rows = []
        for row in lines:
            if nrows is not None and len(rows) >= nrows:
                break
            if len(row) > len(header):
                raise ValueError(f"CSVDataset file {path!r}, line {reader.line_num}: {len(row)} fields but the "
                                 f"header has {len(header)}; check the delimiter ({delimiter!r}) and quoting.")
            rows.append(row)
    if len(header) == 1:
        _check_other_delimiter(header[0], rows, delimiter, path)
    return _mangle(header), rows


def _check_other_delimiter(name: str, rows: list[list[str]], delimiter: str, path: str) -> None:
    """Refuse a one-column read whose header and first row split alike on another common delimiter: a wrong one."""
    for other in (",", ";", "\t", "|"):
        if other == delimiter or other not in name:
            continue
        if not rows or rows[0][0].count(other) == name.count(other):
            raise ValueError(f"CSVDataset read {path!r} as one column named {name!r:.80}, which looks split by "
                             f"{other!r} rather than {delimiter!r}; pass delimiter={other!r}.")


def _mangle(header: list[str]) -> list[str]:
    """Rename blank and repeated column names as pandas does: ``Unnamed: i``, then ``a``, ``a.1``, ``a.2``."""
    names = [name if name != "" else f"Unnamed: {position}" for position, name in enumerate(header)]
    seen: dict[str, int] = {}
    result = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        result.append(name if count == 0 else f"{name}.{count}")
    return result


def _select(header: list[str], usecols: Iterable[str | int] | None, path: str) -> list[tuple[int, str]]:
    """The ``(position, name)`` of each column to keep, in file order (pandas ignores the order of ``usecols``)."""
    if usecols is None:
        return list(enumerate(header))
    if isinstance(usecols, (str, bytes)) or not isinstance(usecols, Iterable):
        raise TypeError(f"CSVDataset usecols must be a list of column names or positions, got {usecols!r}.")
    wanted = set()
    for item in usecols:
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < len(header):
                raise ValueError(f"CSVDataset usecols position {item} is out of range: {path!r} has {len(header)} "
                                 "columns.")
            wanted.add(item)
        elif item in header:
            wanted.add(header.index(item))
        else:
            raise ValueError(f"CSVDataset usecols names {item!r}, which is not a column of {path!r}; its columns are "
                             f"{header}.")
    return [(position, header[position]) for position in sorted(wanted)]


def _na_values(given: Any, keep_default: bool, header: list[str]) -> dict[str | None, frozenset[str]]:
    """Missing-value markers per column name; key None holds those of every column."""
    base = DEFAULT_NA_VALUES if keep_default else frozenset()
    if given is None:
        return {None: base}
    if isinstance(given, Mapping):
        for name in given:
            if name not in header:
                raise ValueError(f"CSVDataset na_values names column {name!r}, which the file lacks; its columns are "
                                 f"{header}.")
        return {None: base, **{name: base | _strings(values) for name, values in given.items()}}
    return {None: base | _strings(given)}


def _strings(values: Any) -> frozenset[str]:
    items = [values] if isinstance(values, (str, int, float)) else list(values)
    return frozenset(str(item) for item in items)


def _dtypes(given: Any, header: list[str]) -> dict[str, str]:
    """The forced type of each column named by ``dtype`` (all columns for a single type)."""
    if given is None:
        return {}
    items = given.items() if isinstance(given, Mapping) else [(name, given) for name in header]
    result = {}
    for name, kind in items:
        if name not in header:
            raise ValueError(f"CSVDataset dtype names column {name!r}, which the file lacks; its columns are "
                             f"{header}.")
        if kind not in _DTYPES:
            raise TypeError(f"CSVDataset dtype for column {name!r} must be one of str, int, float, bool, got "
                            f"{kind!r}.")
        result[name] = _DTYPES[kind]
    return result


def _is_default_fill(fill_na: Any) -> bool:
    return isinstance(fill_na, str) and fill_na == _PANDAS_DEFAULT


def _type_column(raw: Sequence[str | None], na: frozenset[str], forced: str | None, name: str,
                 fill_na: Any = _PANDAS_DEFAULT) -> list[Any]:
    """Convert one column's strings to Python values (a field missing from a short row is None, then ``fill_na``'s
    value: NaN by default)."""
    missing = [value is None or value in na for value in raw]
    present = [value for value, gap in zip(raw, missing) if not gap]
    kind = forced or _infer(present)
    if kind == "int" and any(missing):
        if forced:
            raise ValueError(f"CSVDataset column {name!r} has missing values, so it cannot be dtype int; use float.")
        kind = "float"
    gap_value: Any = float("nan")
    if fill_na is None:
        gap_value = None
    elif not _is_default_fill(fill_na):
        numeric = kind in ("float", "float32") and isinstance(fill_na, numbers.Real) and not isinstance(
            fill_na, bool)
        gap_value = float(fill_na) if numeric else fill_na  # pandas keeps a numeric column with gaps float
    convert = {"int": int, "float": float, "float32": lambda value: float(np.float32(value)),
               "bool": lambda value: value in _TRUE, "str": str}[kind]
    values = []
    for value, gap in zip(raw, missing):
        if gap:
            values.append(gap_value)
            continue
        try:
            if kind == "bool" and value not in _TRUE | _FALSE:
                raise ValueError(value)
            values.append(convert(value))
        except ValueError:
            raise ValueError(f"CSVDataset column {name!r} value {value!r} is not a {kind}; drop the column's dtype "
                             "entry to have the type inferred.") from None
    return values


def _infer(present: list[str]) -> str:
    """pandas' inference for a column's non-missing values (a column of only missing values is float)."""
    if all(_INT.fullmatch(value) for value in present):
        return "int" if present else "float"
    if all(_FLOAT.fullmatch(value) for value in present):
        return "float"
    if all(value in _TRUE or value in _FALSE for value in present):
        return "bool"
    return "str"



# ------------------------------------------------------------------ include_if
def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _isin(value: Any, candidates: Sequence[Any]) -> bool:
    """pandas ``isin`` for one value: equality, and missing values (None or NaN) match each other."""
    if _is_null(value):
        return any(_is_null(candidate) for candidate in candidates)
    return any(not _is_null(candidate) and value == candidate for candidate in candidates)


def _row_filter(include_if: Any, columns: list[str]) -> Callable[[dict[str, Any]], bool]:
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
