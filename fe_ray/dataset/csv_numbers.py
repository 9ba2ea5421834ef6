"""How a CSV field becomes a number, by the rules of pandas' default reader (FastEstimator reads CSV files with
pandas): which columns are integers, floats, booleans or text, and the exact double pandas' fast converter makes of a
decimal, so that :class:`~fe_ray.dataset.csv_dataset.CSVDataset` gives FastEstimator's values to the bit."""

from __future__ import annotations

import math
import re

TRUE_VALUES, FALSE_VALUES = frozenset({"True", "TRUE", "true"}), frozenset({"False", "FALSE", "false"})
# Python's int()/float() also accept '1_000' and 'infinity' variants pandas keeps as text, hence explicit patterns.
_SPACE = " \t\n\r\v\f"  # the ASCII spaces pandas skips around a number
_INT = re.compile(r"[ \t\n\r\v\f]*[+-]?[0-9]+[ \t\n\r\v\f]*")
# A decimal without an exponent: (integer digits, fraction digits).
_PLAIN_DECIMAL = re.compile(r"[ \t\n\r\v\f]*[+-]?([0-9]*)(?:\.([0-9]*))?[ \t\n\r\v\f]*")
# Infinities pandas reads (any case, no spaces around them).
_INFINITIES = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf, "+infinity": math.inf,
               "-infinity": -math.inf}
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2 ** 63), 2 ** 63 - 1, 2 ** 64 - 1
# pandas' converter scales by these (C double literals 1e0 ... 1e308: Python's parse of them is the same double).
_POWERS_OF_TEN = [float(f"1e{exponent}") for exponent in range(309)]


def infer_kind(present: list[str]) -> str:
    """pandas' inference for a column's non-missing values (a column of only missing values is float)."""
    if not present:
        return "float"
    integers = _integer_kind(present)
    if integers is not None:
        return integers
    if all(to_float(value) is not None for value in present):
        return "float"
    if all(value in TRUE_VALUES or value in FALSE_VALUES for value in present):
        return "bool"
    return "str"


def _integer_kind(present: list[str]) -> str | None:
    """pandas' integer passes over a column: "int" (every value fits int64, or uint64), "str" (integers that fit
    neither: pandas leaves the column text), or None (a value is not an integer: the column is tried as floats).

    As in pandas, values are read in order and the first event decides: a non-integer before any overflow means
    floats; an integer beyond int64 starts a second pass as unsigned integers, which a value beyond uint64 ends as
    text, a non-integer as floats, and which otherwise gives text if it saw a value below int64, or negatives with
    values above int64.
    """
    for value in present:
        if not _INT.fullmatch(value):
            return None
        if not _INT64_MIN <= int(value) <= _INT64_MAX:
            break
    else:
        return "int"
    negative = above_int64 = below_int64 = False
    for value in present:
        if not _INT.fullmatch(value):
            return None
        number = int(value)
        if number > _UINT64_MAX:
            return "str"
        below_int64 = below_int64 or number < _INT64_MIN
        negative, above_int64 = negative or number < 0, above_int64 or number > _INT64_MAX
    return "str" if below_int64 or (negative and above_int64) else "int"


def checked_float(value: str) -> float:
    """:func:`to_float` for a column already known to be float; a field that is none raises ValueError."""
    number = to_float(value)
    if number is None:
        raise ValueError(value)
    return number


def to_float(text: str) -> float | None:
    """``text`` as pandas' default reader converts a field to a float, or None where pandas finds no float.

    The digits are gathered in a double, the first 17 only (a leading zero counts), the rest shifting the decimal
    exponent, then scaled by one power of ten (two below 1e-308); an exponent above 308, an infinite result or any
    other character than spaces around the number is no float. Besides numbers, the infinities of ``_INFINITIES``.
    """
    plain = _PLAIN_DECIMAL.fullmatch(text)
    if plain is not None and 0 < len(plain[1]) + len(plain[2] or "") <= 15:
        # Up to 15 digits gather exactly in a double and one exact power of ten scales them: pandas' converter
        # rounds once, as float() does, so the fast float() is the same value (the usual case by far).
        return float(text)
    infinity = _INFINITIES.get(text.lower())
    if infinity is not None:
        return infinity
    size, position = len(text), 0
    while position < size and text[position] in _SPACE:
        position += 1
    negative = position < size and text[position] == "-"
    position += position < size and text[position] in "+-"
    number, exponent, digits, significant = 0.0, 0, 0, False
    while position < size and "0" <= text[position] <= "9":
        if digits < 17:
            number = number * 10.0 + (ord(text[position]) - 48)
            digits += 1
        else:
            exponent += 1
        significant = significant or text[position] != "0"
        position += 1
    if position < size and text[position] == ".":
        position += 1
        while position < size and "0" <= text[position] <= "9":
            if digits < 17:
                number = number * 10.0 + (ord(text[position]) - 48)
                digits += 1
                exponent -= 1
            significant = significant or text[position] != "0"
            position += 1
    if digits == 0:
        return None
    if position < size and text[position] in "eE":
        start, sign = position + 1, 1
        if start < size and text[start] in "+-":
            sign = -1 if text[start] == "-" else 1
            start += 1
        end = start
        while end < size and "0" <= text[end] <= "9":
            end += 1
        if end - start > 17:  # pandas reads no float with an exponent of more than 17 digits
            return None
        if end > start:  # an "e" without digits is not part of the number (and then not a float)
            exponent += sign * int(text[start:end])
            position = end
    while position < size and text[position] in _SPACE:
        position += 1
    if position != size or exponent > 308:
        return None
    if exponent >= 0:
        number *= _POWERS_OF_TEN[exponent]
    elif exponent >= -308:
        number /= _POWERS_OF_TEN[-exponent]
    elif exponent >= -616:
        number = number / _POWERS_OF_TEN[-308 - exponent] / _POWERS_OF_TEN[308]
    else:
        number = 0.0
    if math.isinf(number):
        return None
    if number == 0.0 and significant:
        # pandas' converter kept only leading zeros (17 or more of them): not worth copying, read it exactly.
        number = abs(float(text.strip(_SPACE)))
    return -number if negative else number
