"""Argument checks shared by the PyTorch and TensorFlow architectures (no framework imports)."""

from __future__ import annotations

from collections.abc import Sequence


def spatial_size(name: str, argument: str, size: Sequence[int], channels_first: bool) -> tuple[int, int, int]:
    """Checks that ``size`` has three positive integer entries and returns it as (channels, height, width).

    Args:
        name: The architecture's name, for the error message.
        argument: The argument's name (``input_size`` or ``input_shape``), for the error message.
        size: The size as the user passed it.
        channels_first: Whether ``size`` is (channels, height, width) (PyTorch) rather than (height, width,
            channels) (TensorFlow).

    Returns:
        The size as (channels, height, width).

    Raises:
        ValueError: If ``size`` does not have exactly three positive integer entries.
    """
    layout = "(channels, height, width)" if channels_first else "(height, width, channels)"
    try:
        dims = tuple(size)
    except TypeError:
        dims = ()
    if len(dims) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise ValueError(f"{name} {argument} must be three positive integers {layout}, got {size!r}; pass e.g. "
                         f"{(3, 32, 32) if channels_first else (32, 32, 3)!r}.")
    return (dims[0], dims[1], dims[2]) if channels_first else (dims[2], dims[0], dims[1])


def min_height_width(name: str, argument: str, size: Sequence[int], height: int, width: int, minimum: int,
                     multiple: int = 1) -> None:
    """Checks that height and width are at least ``minimum`` and multiples of ``multiple``.

    Args:
        name: The architecture's name, for the error message.
        argument: The argument's name, for the error message.
        size: The size as the user passed it, for the error message.
        height: Input height in pixels.
        width: Input width in pixels.
        minimum: Smallest accepted height and width.
        multiple: Height and width must be multiples of this.

    Raises:
        ValueError: If height or width is below ``minimum`` or not a multiple of ``multiple``.
    """
    if min(height, width) < minimum or height % multiple or width % multiple:
        need = f"at least {minimum}x{minimum} pixels" + (f" with sides a multiple of {multiple}" if multiple > 1
                                                          else "")
        raise ValueError(f"{name} needs inputs of {need}, got {argument} {tuple(size)!r}; resize or pad the images "
                         "in the Pipeline.")


def positive_int(name: str, argument: str, value: int) -> None:
    """Checks that ``value`` is a positive integer.

    Args:
        name: The architecture's name, for the error message.
        argument: The argument's name, for the error message.
        value: The value to check.

    Raises:
        ValueError: If ``value`` is not an integer of at least 1.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} {argument} must be a positive integer, got {value!r}.")


def wrn_blocks(name: str, depth: int, widen_factor: int, dropout: float) -> int:
    """Checks Wide Residual Network arguments and returns the number of residual blocks per stage.

    Args:
        name: The architecture's name, for the error message.
        depth: Total depth; must be 6 * N + 4 for some N >= 1 (10, 16, 22, 28, 34, 40, ...).
        widen_factor: Width multiplier of the three stages (16, 32, 64 channels times this).
        dropout: Dropout rate inside each residual block.

    Returns:
        N, the residual blocks per stage, ``(depth - 4) // 6``.

    Raises:
        ValueError: If ``depth`` is not 6 * N + 4 with N >= 1, ``widen_factor`` is not a positive integer, or
            ``dropout`` is outside [0, 1).
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 10 or (depth - 4) % 6:
        raise ValueError(f"{name} depth must be 6 * N + 4 for a whole N >= 1 (10, 16, 22, 28, 34, 40, ...), got "
                         f"{depth!r}.")
    positive_int(name, "widen_factor", widen_factor)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{name} dropout must be in [0, 1), got {dropout!r}; pass 0.0 for no dropout.")
    return (depth - 4) // 6
