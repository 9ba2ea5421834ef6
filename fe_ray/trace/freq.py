"""How often a trace acts: FastEstimator's frequency arguments (``fastestimator.trace.trace.parse_freq``)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Freq:
    """How often something happens: every ``freq`` steps (``is_step``) or epochs; ``freq`` 0 is never."""

    is_step: bool
    freq: int

    def at_step(self, step: int) -> bool:
        return self.is_step and self.freq > 0 and step % self.freq == 0

    def at_epoch(self, epoch: int) -> bool:
        return not self.is_step and self.freq > 0 and epoch % self.freq == 0


def parse_freq(freq: None | str | int, name: str = "frequency") -> Freq:
    """Read a frequency as FastEstimator does: None (never), an int N (every N steps), 'step' / 's' (every step),
    'epoch' / 'e' (every epoch), or '<N>s' / '<N>e' (every N steps / epochs).

    Args:
        freq: The frequency.
        name: What the errors call the argument.

    Raises:
        ValueError: If ``freq`` is not one of those or N is not positive.
        TypeError: If ``freq`` is neither None, an int nor a str.
    """
    if freq is None:
        return Freq(False, 0)
    if isinstance(freq, bool) or not isinstance(freq, (int, str)):
        raise TypeError(f"{name} must be None, an int (steps) or a str like '5s' / '2e', got {type(freq).__name__} "
                        f"{freq!r}.")
    if isinstance(freq, int):
        if freq < 1:
            raise ValueError(f"{name} must be a positive number of steps, got {freq!r}; pass None to turn it off.")
        return Freq(True, freq)
    if freq in ("step", "s"):
        return Freq(True, 1)
    if freq in ("epoch", "e"):
        return Freq(False, 1)
    match = re.fullmatch(r"([0-9]+)([se])", freq)
    if match is None or int(match[1]) < 1:
        raise ValueError(f"{name} {freq!r} is not a frequency: use an int N or '<N>s' (every N steps), '<N>e' (every "
                         "N epochs), 'step' or 'epoch', with N >= 1.")
    return Freq(match[2] == "s", int(match[1]))


__all__ = ["Freq", "parse_freq"]
