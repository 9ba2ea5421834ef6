"""The Hadamard codebook shared by ``fe.op.numpyop.univariate.Hadamard`` (labels to codes) and
``fe.op.tensorop.UnHadamard`` (codes back to class probabilities).

Numpy only: the ops convert the codebook to their framework themselves.
"""

from __future__ import annotations

import numpy as np


def hadamard_code_length(n_classes: int, code_length: int | None, op: str) -> int:
    """Check ``n_classes`` / ``code_length`` and return the code length to use.

    Args:
        n_classes: How many classes the codes stand for; at least 2.
        code_length: A power of 2 no smaller than ``n_classes``; None for the smallest such power.
        op: The op's name, for error messages.

    Raises:
        ValueError: If ``n_classes`` is not an int >= 2, or ``code_length`` is not a power of 2 >= ``n_classes``.
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"{op} n_classes must be an int >= 2 (one code per class), got {n_classes!r}.")
    n_classes = int(n_classes)
    if code_length is None:
        return 1 << (n_classes - 1).bit_length()  # the smallest power of 2 >= n_classes
    if isinstance(code_length, bool) or not isinstance(code_length, (int, np.integer)) or code_length <= 0 or \
            code_length & (code_length - 1):
        raise ValueError(f"{op} code_length must be a positive power of 2 (e.g. 16, 32, 64), got {code_length!r}.")
    if code_length < n_classes:
        raise ValueError(f"{op} code_length {code_length} is shorter than n_classes {n_classes}: give a power of 2 "
                         f">= {n_classes}, or None for the smallest one.")
    return int(code_length)


def hadamard_codes(n_classes: int, code_length: int) -> np.ndarray:
    """The float32 codebook ``(n_classes, code_length)`` of +1 / -1 entries: row ``i`` is the code of class ``i``.

    The rows are the first ``n_classes`` rows of the Sylvester Hadamard matrix of order ``code_length`` (the one
    ``scipy.linalg.hadamard`` builds), whose rows differ pairwise in exactly half their entries. The first column
    of that matrix is all +1 and carries no information, so every even-numbered row gets -1 there instead, as in
    FastEstimator: the codes of the classes then differ in that entry too, and the +1 / -1 balance of each column
    stays even.

    Args:
        n_classes: The number of codes (rows); at most ``code_length``.
        code_length: The length of each code; a power of 2 (see :func:`hadamard_code_length`).
    """
    assert 0 < n_classes <= code_length and code_length & (code_length - 1) == 0, (n_classes, code_length)
    matrix = np.ones((1, 1), dtype=np.float32)
    while matrix.shape[0] < code_length:  # Sylvester: H_2n = [[H_n, H_n], [H_n, -H_n]]
        matrix = np.block([[matrix, matrix], [matrix, -matrix]])
    matrix[0::2, 0] = -1.0
    return np.ascontiguousarray(matrix[:n_classes])
