"""CSVDataset: one sample per row of a CSV file, typed per column as FastEstimator's (pandas-based) reader does.

pandas is not a dependency, so the file is read with the ``csv`` module and each column is typed by the rules of
``pandas.read_csv`` with its defaults, which is what FastEstimator returns: a column whose values are all integers
gives Python ``int``, all numbers ``float``, all ``True``/``False`` ``bool``, anything else ``str``. A missing value
(an empty field or ``NA``, ``nan``, ``null`` ...) is ``float('nan')``, which turns an integer column into floats.

Numbers are read as pandas' default (C engine) reader reads them, so that the values are FastEstimator's to the bit:
integers beyond 64 bits leave their column text (pandas' overflow rule), and decimals are converted by pandas'
fast converter, which keeps the first 17 digits (leading zeros included) and scales them by a power of ten. That
can be one unit in the last place away from Python's ``float()`` (``0.30000000000000004`` reads as ``0.3``, as in
FastEstimator), for about a third of the 17-digit values Python and pandas write. One exception: where that
converter would drop every significant digit (17 or more leading zeros, ``0.000000000000000000012`` reads as
``0.0`` under FastEstimator), the value is read exactly.

``fill_na`` and ``include_if`` follow FastEstimator's (pandas ``fillna``, ``isin`` and ``query``) semantics; a query
string is parsed here (pandas is not used), see :class:`CSVDataset` for the subset supported.
"""

from __future__ import annotations

import csv
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

import numpy as np

from fe_ray.dataset._files import checked_file, open_file
from fe_ray.dataset.csv_numbers import FALSE_VALUES, TRUE_VALUES, checked_float, infer_kind
from fe_ray.dataset.csv_query import row_filter
from fe_ray.dataset.in_memory_dataset import InMemoryDataset

# pandas' default missing-value markers (``keep_default_na=True``).
DEFAULT_NA_VALUES = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
    "NULL", "NaN", "None", "n/a", "nan", "null"})
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
            keep = row_filter(include_if, [name for _, name in columns])
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
    kind = forced or infer_kind(present)
    if kind == "int" and any(missing):
        if forced:
            raise ValueError(f"CSVDataset column {name!r} has missing values, so it cannot be dtype int; use float.")
        kind = "int_float"  # pandas reads the integers, then makes the column float (exact int -> float rounding)
    gap_value: Any = float("nan")
    if fill_na is None:
        gap_value = None
    elif not _is_default_fill(fill_na):
        numeric = kind in ("float", "float32", "int_float") and isinstance(fill_na, numbers.Real) and not isinstance(
            fill_na, bool)
        gap_value = float(fill_na) if numeric else fill_na  # pandas keeps a numeric column with gaps float
    convert = {"int": int, "int_float": lambda value: float(int(value)), "float": checked_float,
               "float32": lambda value: float(np.float32(checked_float(value))),  # pandas: double, then float32
               "bool": lambda value: value in TRUE_VALUES, "str": str}[kind]
    values = []
    for value, gap in zip(raw, missing):
        if gap:
            values.append(gap_value)
            continue
        try:
            if kind == "bool" and value not in TRUE_VALUES | FALSE_VALUES:
                raise ValueError(value)
            values.append(convert(value))
        except ValueError:
            raise ValueError(f"CSVDataset column {name!r} value {value!r} is not a {kind}; drop the column's dtype "
                             "entry to have the type inferred.") from None
    return values
