"""Text ops: Tokenize (split strings into tokens), WordtoId (tokens to ids) and PadSequence (pad or cut to a length)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp


class _PerInput(NumpyOp):
    """A NumpyOp transforming each input into the output at the same position, one value at a time."""

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"{type(self).__name__} writes each input's result to the output at the same position, "
                             f"but got {len(self.inputs)} input(s) {self.inputs} and {len(self.outputs)} output(s) "
                             f"{self.outputs}.")
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [self.transform(key, value) for key, value in zip(self.inputs, data)]

    def transform(self, key: str, value: Any) -> Any:
        """The result for the value of input ``key``."""
        raise NotImplementedError


class Tokenize(_PerInput):
    """Split each string into a list of tokens: on whitespace (``str.split()``) or with ``tokenize_fn``.

    Args:
        inputs: Key(s) of the strings.
        outputs: Key(s) to write the token lists to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        tokenize_fn: A function from a string to its list of tokens; None splits on whitespace.
        to_lower_case: Lower-case every token (after ``tokenize_fn``).

    Raises:
        TypeError: If ``tokenize_fn`` is neither None nor callable; when running, if a value is not a string
            (bytes are decoded as UTF-8).
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 tokenize_fn: Callable[[str], list[str]] | None = None, to_lower_case: bool = False) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if tokenize_fn is not None and not callable(tokenize_fn):
            raise TypeError(f"Tokenize tokenize_fn must be a function from a string to its tokens (or None to split "
                            f"on whitespace), got {type(tokenize_fn).__name__}.")
        self.tokenize_fn = tokenize_fn
        self.to_lower_case = to_lower_case

    def transform(self, key: str, value: Any) -> list[str]:
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if not isinstance(value, str):
            raise TypeError(f"Tokenize {key!r} must hold a string, got {type(value).__name__}: {value!r:.100}.")
        tokens = self.tokenize_fn(value) if self.tokenize_fn is not None else value.split()
        return [token.lower() for token in tokens] if self.to_lower_case else list(tokens)


class WordtoId(_PerInput):
    """Map a sequence of tokens to an array of ids, with a ``{token: id}`` dict or a function of the whole list.

    Deliberate difference from FastEstimator: a token missing from a dict mapping raises a ValueError naming it
    (FastEstimator puts None in the array, which fails later, far from the cause). Map unknown words with a
    function, e.g. ``lambda tokens: [vocab.get(t, unk_id) for t in tokens]``.

    Args:
        mapping: ``{token: id}``, or a function from the list of tokens to the list of ids.
        inputs: Key(s) of the token sequences.
        outputs: Key(s) to write the id arrays to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        TypeError: If ``mapping`` is neither a dict nor callable.
        ValueError: When running, if a token is not in a dict mapping.
    """

    def __init__(self, mapping: Mapping[str, int] | Callable[[list[str]], list[int]],
                 inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not (callable(mapping) or isinstance(mapping, Mapping)):
            raise TypeError(f"WordtoId mapping must be a dict {{token: id}} or a function from a token list to ids, "
                            f"got {type(mapping).__name__}.")
        self.mapping = mapping

    def transform(self, key: str, value: Any) -> np.ndarray:
        if callable(self.mapping):
            return np.array(self.mapping(value))
        ids = []
        for token in value:
            token_id = self.mapping.get(token)
            if token_id is None:
                raise ValueError(f"WordtoId: token {token!r} of {key!r} has no id in the mapping "
                                 f"({len(self.mapping)} entries); add it, or pass a function mapping that handles "
                                 "unknown tokens.")
            ids.append(token_id)
        return np.array(ids)


class PadSequence(_PerInput):
    """Pad each sequence with ``value`` up to ``max_len`` (after it, or before it with ``append=False``), or cut it
    to its first ``max_len`` elements.

    Args:
        inputs: Key(s) of the sequences.
        outputs: Key(s) to write the padded sequences to (one per input).
        max_len: The length of every output.
        value: The padding value.
        append: Pad after the sequence (True) or before it (False).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: If ``max_len`` is not a positive int.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], max_len: int,
                 value: str | int | float = 0, append: bool = True, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if isinstance(max_len, bool) or not isinstance(max_len, (int, np.integer)) or max_len < 1:
            raise ValueError(f"PadSequence max_len must be a positive int, got {max_len!r}.")
        self.max_len = int(max_len)
        self.value = value
        self.append = append

    def transform(self, key: str, value: Any) -> np.ndarray:
        sequence = np.asarray(value)
        if len(sequence) >= self.max_len:
            return sequence[:self.max_len]
        padding = np.full(self.max_len - len(sequence), self.value)
        # np.append flattens and promotes the dtypes, as FastEstimator pads.
        return np.append(sequence, padding) if self.append else np.append(padding, sequence)
