"""Small value types of FastEstimator's ``fe.util``: a key-aware default dict, a printable id, a mutable flag, and
the symmetric-range argument convention of augmentation ops."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

KT = TypeVar("KT")
VT = TypeVar("VT")


class DefaultKeyDict(dict[KT, VT]):
    """A dict whose missing keys are filled by ``default(key)``: like ``collections.defaultdict``, but the factory
    sees the key.

    ``DefaultKeyDict(lambda k: k + k, a=4)["c"]`` is ``"cc"`` (and ``"c"`` is then stored); ``["a"]`` is 4.

    Args:
        default: Called with a missing key; its result is stored under that key and returned.
        **kwargs: Initial entries.

    Raises:
        TypeError: If ``default`` is not callable.
    """

    def __init__(self, default: Callable[[Any], VT], **kwargs: VT) -> None:
        if not callable(default):
            raise TypeError(f"DefaultKeyDict needs a callable default (called with the missing key), got "
                            f"{default!r}; e.g. DefaultKeyDict(lambda key: key.upper()).")
        super().__init__(**kwargs)
        self.factory = default

    def __missing__(self, key: Any) -> VT:
        value = self[key] = self.factory(key)
        return value


class FEID:
    """An integer id that prints through a class-wide lookup table (FastEstimator's object ids in reports).

    Compares, sorts and hashes as its int, so ``FEID(3) == 3`` and ``{FEID(3): x}[3]`` works; ``str``/``repr`` show
    the table's entry for the id if there is one, else the number.

    Args:
        val: The id.

    Raises:
        TypeError: If ``val`` is not an int.
    """

    __slots__ = ("_val",)
    _translation_dict: ClassVar[dict[int, Any]] = {}

    def __init__(self, val: int) -> None:
        if not isinstance(val, numbers.Integral) or isinstance(val, bool):
            raise TypeError(f"FEID wraps an int id, got {type(val).__name__} {val!r}.")
        self._val = int(val)

    def __int__(self) -> int:
        return self._val

    def __index__(self) -> int:
        return self._val

    def __hash__(self) -> int:
        return hash(self._val)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, FEID):
            return self._val == other._val
        return self._val == other

    def __lt__(self, other: Any) -> bool:
        return self._val < (other._val if isinstance(other, FEID) else other)

    def __str__(self) -> str:
        return str(self._translation_dict.get(self._val, self._val))

    __repr__ = __str__

    @classmethod
    def set_translation_dict(cls, mapping: Mapping[int, Any]) -> None:
        """Replace the lookup table used when printing ids (``{id: printable}``) for every FEID."""
        cls._translation_dict.clear()
        cls._translation_dict.update(mapping)


class Flag:
    """A mutable boolean, for sharing an on/off switch between objects (truthiness is its value).

    Args:
        val: The initial value.
    """

    __slots__ = ("_val",)

    def __init__(self, val: bool = False) -> None:
        self._val = bool(val)

    def set_true(self) -> None:
        """Switch the flag on."""
        self._val = True

    def set_false(self) -> None:
        """Switch the flag off."""
        self._val = False

    def __bool__(self) -> bool:
        return self._val

    def __repr__(self) -> str:
        return f"Flag({self._val})"


def param_to_range(data: float | tuple[float, float] | list[float]) -> tuple[float, float]:
    """Read a range argument: one number ``x`` means the symmetric range ``(-|x|, |x|)``, a pair is taken as is.

    ``param_to_range(7)`` is ``(-7, 7)``, ``param_to_range(-3.2)`` is ``(-3.2, 3.2)``, ``param_to_range([7, 8])``
    is ``(7, 8)``.

    Unlike FastEstimator, which returns any other argument unchanged, a value that is neither a number nor a pair
    raises here, so that a typo surfaces where the op is built.

    Raises:
        TypeError: If ``data`` is neither a real number nor a list / tuple.
        ValueError: If a list / tuple does not hold exactly two numbers.
    """
    if isinstance(data, numbers.Real) and not isinstance(data, bool):
        return (data, -data) if data <= 0 else (-data, data)
    if not isinstance(data, (list, tuple)):
        raise TypeError(f"A range must be a number x (meaning (-x, x)) or a (low, high) pair, got "
                        f"{type(data).__name__} {data!r}.")
    if len(data) != 2 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in data):
        raise ValueError(f"A range pair must hold exactly two numbers (low, high), got {data!r}.")
    return tuple(data)  # type: ignore[return-value]
