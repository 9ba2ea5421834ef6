"""GeneratorDataset: samples pulled from a Python generator, FastEstimator style (not resumable exactly).

Each ``dataset[i]`` sends ``i`` into the generator and returns what it yields next. A generator's output depends on
how often and in which order it was called before, not on ``i`` alone, so unlike every other dataset here:

* a resumed run (``Pipeline.load_state_dict``) does not see the batches the interrupted run would have seen: a new
  generator starts from its beginning, not where the checkpointed one stood, and a Python generator cannot be saved;
* ``num_process > 0`` changes the samples: worker threads take turns on the generator (one at a time, under a
  lock) in whatever order they get there;
* anything else that reads the dataset (``get_results``, the Estimator's warm-up pass, :meth:`summary` in
  FastEstimator) moves the generator on.

:meth:`GeneratorDataset.state_dict` therefore says ``exact_resume: False`` and :meth:`load_state_dict` warns. Use a
map-style dataset whose sample ``i`` is a pure function of ``i`` (with random ops for randomness) where exact
resumption matters.
"""

from __future__ import annotations

import threading
import types
import warnings
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from fe_ray.dataset.splitting import plan_split
from fe_ray.dataset.summary import DatasetSummary, key_summaries


class GeneratorDataset:
    """A dataset of ``samples_per_epoch`` samples, each the next dict a generator yields.

    The generator is started on construction (one ``next()``, whose sample is dropped, as in FastEstimator: a new
    generator cannot be sent a value); then ``dataset[i]`` returns ``generator.send(i)``, so a generator written as
    ``index = yield sample`` can use the index and one written as ``yield sample`` ignores it. It must not end
    before training does: loop forever (``while True``).

    Args:
        generator: A generator object, not yet started (call your generator function: ``gen()``, not ``gen``).
        samples_per_epoch: The dataset's length: the number of samples one pass over it draws.

    Raises:
        TypeError: If ``generator`` is not a generator object or ``samples_per_epoch`` is not an int.
        ValueError: If ``samples_per_epoch`` is below 1 or the generator ends at once.
    """

    def __init__(self, generator: Generator[dict[str, Any], int, None], samples_per_epoch: int) -> None:
        if isinstance(generator, types.FunctionType):
            raise TypeError(f"GeneratorDataset needs a generator object; got the function {generator.__name__!r}: "
                            f"call it, GeneratorDataset({generator.__name__}(), ...).")
        if not isinstance(generator, Generator):
            raise TypeError(f"GeneratorDataset needs a generator object (from a function using yield), got "
                            f"{type(generator).__name__}.")
        _check_size(samples_per_epoch)
        try:
            first = next(generator)
        except StopIteration:
            raise ValueError("GeneratorDataset's generator ended without yielding a sample; make it loop forever "
                             "(while True: ... yield sample).") from None
        self.generator = generator
        self.samples_per_epoch = int(samples_per_epoch)
        # Kept for summary(), which FastEstimator answers by drawing a sample: describing the warm-up one instead
        # leaves the generator where it was.
        self._first = first
        # Generators refuse to be resumed from two threads at once ("generator already executing"): Pipeline worker
        # threads take turns. Shared with the datasets split off, which share the generator.
        self._lock = threading.Lock()
        self._drawn = 0

    def __len__(self) -> int:
        return self.samples_per_epoch

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Return the generator's next sample, sending it ``index``.

        Raises:
            IndexError: If ``index`` is outside ``[-len, len)``.
            ValueError: If the generator has ended.
        """
        if not isinstance(index, int) or isinstance(index, bool):
            index = _as_int(index)
        if not -self.samples_per_epoch <= index < self.samples_per_epoch:
            raise IndexError(f"GeneratorDataset index {index} out of range for {self.samples_per_epoch} samples.")
        with self._lock:
            try:
                sample = self.generator.send(index)
            except StopIteration:
                raise ValueError(f"GeneratorDataset's generator ended after {self._drawn + 1} sample(s); make it loop "
                                 "forever (while True: ... yield sample).") from None
            self._drawn += 1
        return sample

    def split(self, *fractions: float | int | Sequence[int], seed: int | None = None, stratify: str | None = None
              ) -> GeneratorDataset | list[GeneratorDataset]:
        """Split off datasets drawing from the same generator, as FastEstimator's (with a warning).

        Only the sizes move: each part gets as many samples per epoch as the fraction, count or index list asks
        for, and this dataset keeps the rest; all of them keep pulling from the one generator, so the parts' samples
        are not disjoint in any sense. ``seed`` is accepted for the common signature and does not matter, nor does
        ``stratify`` (a generator's classes are not known ahead; a warning says so, as in FastEstimator).

        Returns:
            The new dataset, or a list of them when several parts were asked for.

        Raises:
            ValueError: If a part is out of range or nothing would be left (the rules of NumpyDataset's split).
            TypeError: If an argument is neither a number nor a list of indices.
        """
        warnings.warn("GeneratorDataset.split only divides samples_per_epoch: every part draws from the same "
                      "generator. Give each part its own generator instead if they must differ.", stacklevel=2)
        if stratify is not None:
            warnings.warn(f"GeneratorDataset.split ignores stratify={stratify!r}: a generator's classes are not "
                          "known ahead.", stacklevel=2)
        parts, keep = plan_split(fractions, self.samples_per_epoch, seed, "GeneratorDataset")
        results = []
        for part in parts:
            child = object.__new__(GeneratorDataset)
            child.generator, child.samples_per_epoch, child._first = self.generator, len(part), self._first
            child._lock, child._drawn = self._lock, 0
            results.append(child)
        self.samples_per_epoch = int(keep.size)
        return results[0] if len(results) == 1 else results

    def summary(self) -> DatasetSummary:
        """One line naming the samples per epoch and the keys of the generator's first (warm-up) sample, with
        FastEstimator's summary fields (``num_instances``, each key's dtype and shape; values are not counted).

        FastEstimator describes a sample it draws for the summary, moving the generator on; the warm-up sample
        leaves the generator where it stands.
        """
        first = self._first
        keys = ", ".join(f"{key}: {type(value).__name__}" for key, value in first.items()) \
            if isinstance(first, dict) else f"first item a {type(first).__name__}"
        return DatasetSummary(f"GeneratorDataset({self.samples_per_epoch} samples per epoch; {keys})",
                              self.samples_per_epoch, key_summaries(first) if isinstance(first, dict) else {})

    def __repr__(self) -> str:
        return self.summary()

    def state_dict(self) -> dict[str, Any]:
        """Return what can be saved: not the generator's position (a generator cannot be saved), only a count.

        ``exact_resume`` is False: a run restored from this state draws from its generator as it stands, so its
        batches differ from those of the uninterrupted run (see the module docstring).
        """
        return {"exact_resume": False, "samples_drawn": self._drawn}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Accept a :meth:`state_dict`, warning that the generator is not rewound or advanced to it.

        Raises:
            ValueError: If ``state`` did not come from a GeneratorDataset.
        """
        if set(state) != {"exact_resume", "samples_drawn"}:
            raise ValueError(f"GeneratorDataset state needs keys ['exact_resume', 'samples_drawn'], got "
                             f"{sorted(state)}; the checkpoint belongs to a different dataset.")
        warnings.warn(f"GeneratorDataset cannot resume exactly: the checkpointed run had drawn "
                      f"{state['samples_drawn']} sample(s), but a generator's position cannot be restored, so the "
                      "resumed run continues from this generator's current state and its batches differ from the "
                      "uninterrupted run's.", stacklevel=2)


def _check_size(samples_per_epoch: Any) -> None:
    if not isinstance(samples_per_epoch, int) or isinstance(samples_per_epoch, bool):
        raise TypeError(f"GeneratorDataset samples_per_epoch must be an int, got "
                        f"{type(samples_per_epoch).__name__}: {samples_per_epoch!r}.")
    if samples_per_epoch < 1:
        raise ValueError(f"GeneratorDataset samples_per_epoch must be >= 1, got {samples_per_epoch}.")


def _as_int(index: Any) -> int:
    if isinstance(index, np.integer):
        return int(index)
    raise TypeError(f"GeneratorDataset index must be an int, got {type(index).__name__}: {index!r:.100}.")
