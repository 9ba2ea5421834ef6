"""SiameseDirDataset: pairs of files from a ``root_dir/class/file`` tree, labeled 1 (same class) or 0 (different).

FastEstimator draws each pair with numpy's global generator, so its pairs depend on everything drawn before. Here
the pair of sample ``i`` is a pure function of ``i`` and of the pass it is read in, as BatchDataset's batches are:
the Pipeline's Loader fetches sample ``i`` as :meth:`SiameseDirDataset.keyed_item` ``(i, (shuffle seed, mode,
ds_id, epoch, data pass))`` (the dataset says so with ``fe_keyed``), so a run resumed mid-epoch and ``num_process``
worker threads give exactly the pairs of the uninterrupted serial run, and each epoch pairs afresh. Plain indexing
(``dataset[i]``, outside a Pipeline epoch) draws from a generator seeded by numpy's global one, as the random ops'
fallback does (``fe.enable_deterministic`` makes it repeat).
"""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.dataset.dir_dataset import LabeledDirDataset
from fe_ray.dataset.splitting import plan_split
from fe_ray.dataset.summary import DatasetSummary, KeySummary, key_summaries

#: Tags the pairing's random streams apart from the shuffle's, the random ops' and BatchDataset's.
_PAIR_TAG = 0x50414952
#: The key of a pass: (shuffle seed, mode, ds_id, epoch, data pass), as the Loader gives it.
PassKey = tuple[int, str, str, int, int]
_INT64_MAX = np.iinfo(np.int64).max


class SiameseDirDataset(LabeledDirDataset):
    """Pairs ``{data_key_left: path, label_key: 1 or 0, data_key_right: path}`` from a folder of class folders.

    Sample ``i`` holds file ``i`` (sorted by class, then name, as in LabeledDirDataset) on the left. With chance
    ``percent_matching_data`` the right file is another file of the same class (label 1), else a file of another,
    uniformly chosen class (label 0). One epoch visits every file once on the left; a file may appear any number of
    times on the right. :meth:`split` moves whole classes (fractions count classes), as FastEstimator's does.

    Args:
        root_dir: The folder holding one subfolder per class.
        data_key_left: The key of the left file's path.
        data_key_right: The key of the right file's path.
        label_key: The key of the pair's label (1: same class, 0: different classes).
        percent_matching_data: The chance, in [0, 1], that a pair is of one class.
        label_mapping: ``{class folder name: label}`` used to group files into classes; None numbers the classes.
        file_extension: Keep only files whose name ends with this (e.g. ``".png"``).

    Attributes:
        class_data: ``{class label: set of sample indices}``.

    Raises:
        ValueError: If ``percent_matching_data`` is outside [0, 1], keys repeat, a class has a single file while
            matching pairs are asked for, or there is a single class while non-matching pairs are asked for (plus
            LabeledDirDataset's errors).
    """

    #: Tells the Pipeline's Loader to read sample ``i`` as ``keyed_item(i, pass key)`` (see the module doc).
    fe_keyed = True

    def __init__(self, root_dir: str | os.PathLike[str], data_key_left: str = "x_a", data_key_right: str = "x_b",
                 label_key: str = "y", percent_matching_data: float = 0.5,
                 label_mapping: Mapping[str, Any] | None = None,
                 file_extension: str | tuple[str, ...] | None = None) -> None:
        if not isinstance(data_key_right, str) or not data_key_right:
            raise TypeError(f"SiameseDirDataset data_key_right must be a non-empty string, got {data_key_right!r}.")
        if data_key_right in (data_key_left, label_key):
            raise ValueError(f"SiameseDirDataset data_key_right {data_key_right!r} repeats another key "
                             f"(data_key_left={data_key_left!r}, label_key={label_key!r}); give each its own name.")
        if isinstance(percent_matching_data, bool) or not isinstance(percent_matching_data, (int, float)) or \
                not 0.0 <= percent_matching_data <= 1.0:
            raise ValueError(f"SiameseDirDataset percent_matching_data is a chance in [0, 1], got "
                             f"{percent_matching_data!r}.")
        super().__init__(root_dir, data_key=data_key_left, label_key=label_key, label_mapping=label_mapping,
                         file_extension=file_extension)
        self.data_key_left = data_key_left
        self.data_key_right = data_key_right
        self.percent_matching_data = float(percent_matching_data)
        self._index_classes()
        self._check_pairable()

    def _index_classes(self) -> None:
        """Rebuild the class lookups from ``self.data`` (after construction and after a split)."""
        members: dict[Any, list[int]] = {}
        for index, row in self.data.items():
            members.setdefault(row[self.label_key], []).append(index)
        self.class_data: dict[Any, set[int]] = {label: set(indices) for label, indices in members.items()}
        # Ordered lookups for the draws: classes in the order their files come, members sorted.
        self._classes = list(members)
        self._members = {label: np.array(sorted(indices), dtype=np.int64) for label, indices in members.items()}

    def _check_pairable(self) -> None:
        if self.percent_matching_data > 0:
            folders = {label: name for name, label in self.mapping.items()}
            single = [folders.get(label, label) for label, indices in self._members.items() if len(indices) < 2]
            if single:
                raise ValueError(f"SiameseDirDataset class(es) {single!r:.200} hold a single file, so they cannot "
                                 f"form matching pairs (percent_matching_data={self.percent_matching_data}); add "
                                 "files, remove the class, or pass percent_matching_data=0.")
        if self.percent_matching_data < 1 and len(self._classes) < 2:
            raise ValueError(f"SiameseDirDataset needs two or more classes for non-matching pairs, got "
                             f"{len(self._classes)}; add class folders or pass percent_matching_data=1.")

    def __getitem__(self, index: int | str) -> Any:
        """Sample ``index`` with a fresh pair drawn via numpy's global generator (see the module doc), or every
        left value of a key (``dataset["x_a"]``) as in InMemoryDataset."""
        if isinstance(index, str):
            return super().__getitem__(index)
        seed = int(np.random.randint(0, _INT64_MAX, dtype=np.int64))
        return self._pair(index, np.random.default_rng(seed))

    def keyed_item(self, index: int, key: PassKey) -> dict[str, Any]:
        """Sample ``index`` as read in the pass ``key`` names: the same pair for the same index and key, always.

        Args:
            index: The sample (its file is the left one).
            key: (shuffle seed, mode, ds_id, epoch, data pass), as the Pipeline's Loader gives it.
        """
        entropy = [_PAIR_TAG, int(key[0]), zlib.crc32(key[1].encode()), zlib.crc32(key[2].encode()), int(key[3]),
                   int(key[4]), int(index) % max(len(self.data), 1)]
        return self._pair(index, np.random.default_rng(np.random.SeedSequence(entropy)))

    def _pair(self, index: int, rng: np.random.Generator) -> dict[str, Any]:
        sample = dict(super().__getitem__(index))  # a new pair: the stored row stays as it is
        index = int(index) % len(self.data)
        label = sample[self.label_key]
        if rng.random() < self.percent_matching_data:
            others = self._members[label][self._members[label] != index]
            other = int(others[rng.integers(len(others))])
            sample[self.label_key] = 1
        else:
            choice = int(rng.integers(len(self._classes) - 1))
            other_classes = [name for name in self._classes if name != label]
            members = self._members[other_classes[choice]]
            other = int(members[rng.integers(len(members))])
            sample[self.label_key] = 0
        sample[self.data_key_right] = self.data[other][self.data_key_left]
        return sample

    def one_shot_trial(self, n: int) -> tuple[list[str], list[str]]:
        """Draw an ``n``-way one-shot trial: ``n`` copies of one file, and ``n`` files to compare each with.

        The first comparison file is of the same class as the repeated file, the others each of a different class,
        so a good similarity model scores pair 0 highest. Draws from numpy's global generator, as FastEstimator.

        Args:
            n: The number of comparisons, from 2 to the number of classes.

        Returns:
            ``([file a1] * n, [file a2, file of class b, file of class c, ...])``.

        Raises:
            ValueError: If ``n`` is out of range, or the chosen classes lack a second file.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= len(self._classes):
            raise ValueError(f"one_shot_trial n must be an int from 2 to the number of classes "
                             f"({len(self._classes)}), got {n!r}.")
        classes = np.random.choice(len(self._classes), size=n, replace=False)
        first = self._members[self._classes[classes[0]]]
        if len(first) < 2:
            raise ValueError(f"one_shot_trial drew class {self._classes[classes[0]]!r}, which holds a single file; "
                             "every class needs two files for one-shot trials.")
        base, same = np.random.choice(first, size=2, replace=False)
        left = [self.data[int(base)][self.data_key_left]] * n
        right = [self.data[int(same)][self.data_key_left]]
        for position in classes[1:]:
            right.append(self.data[int(np.random.choice(self._members[self._classes[position]]))][
                self.data_key_left])
        return left, right

    def split(self, *fractions: float | int | Sequence[int], seed: int | None = None,
              stratify: str | None = None) -> Any:
        """Move whole classes into new SiameseDirDatasets; fractions, counts and index lists refer to classes
        (``stratify`` does not apply to whole classes: it is ignored with a warning, as in FastEstimator).

        The classes are numbered in the order of their files (sorted by class folder name); see
        :meth:`fe_ray.dataset.in_memory_dataset.InMemoryDataset.split` for the rules of ``fractions`` and ``seed``.

        Returns:
            The new dataset, or a list of them when several parts were asked for.

        Raises:
            ValueError: As InMemoryDataset's split (counted in classes), or if a part or the rest would hold a
                single class while non-matching pairs are asked for.
        """
        if stratify is not None:
            warnings.warn(f"SiameseDirDataset.split ignores stratify={stratify!r}: it moves whole classes.",
                          stacklevel=2)
        parts, keep = plan_split(fractions, len(self._classes), seed, type(self).__name__)
        if self.percent_matching_data < 1 and min(len(group) for group in [*parts, keep]) < 2:
            raise ValueError(f"SiameseDirDataset.split{tuple(fractions)!r:.100} would leave a dataset with a single "
                             f"class (of {len(self._classes)}), which cannot form non-matching pairs; every part "
                             "and the rest need two or more classes.")
        results = [self._take(self._samples_of(part)) for part in parts]
        self._keep(np.sort(self._samples_of(keep)))
        return results[0] if len(results) == 1 else results

    def _samples_of(self, class_positions: np.ndarray) -> np.ndarray:
        chosen = [self._members[self._classes[int(position)]] for position in class_positions]
        return np.concatenate(chosen) if chosen else np.zeros(0, np.int64)

    def _take(self, indices: np.ndarray) -> SiameseDirDataset:
        result: SiameseDirDataset = super()._take(indices)  # type: ignore[assignment]
        result._index_classes()
        return result

    def __setitem__(self, key: int | str, value: Any) -> None:
        """Edit rows as :class:`InMemoryDataset` does, then re-index the classes (labels may have changed)."""
        super().__setitem__(key, value)
        self._index_classes()

    def _keep(self, indices: np.ndarray) -> None:
        super()._keep(indices)
        self._index_classes()

    def summary(self) -> DatasetSummary:
        """One line naming the size, the keys of a pair, the number of classes and the matching chance, with
        FastEstimator's summary fields: the keys of a pair, ``num_classes`` (the class folders), ``class_key`` and
        no ``class_key_mapping`` (the pair label is not the class). Nothing is drawn to make it.

        The label key counts the pair labels a sample can have (1 and / or 0), where FastEstimator counts the
        classes there.
        """
        text = (f"SiameseDirDataset({len(self.data)} samples; {self.data_key_left}: str, {self.label_key}: int (1 "
                f"same class, 0 not), {self.data_key_right}: str; {len(self._classes)} classes; "
                f"percent_matching_data={self.percent_matching_data})")
        if not self.data:
            return DatasetSummary(text, 0, num_classes=len(self.mapping), class_key=self.label_key)
        left = key_summaries({self.data_key_left: self.data[0][self.data_key_left]},
                             lambda key: [row[key] for row in self.data.values()])[self.data_key_left]
        pair_labels = int(self.percent_matching_data > 0) + int(self.percent_matching_data < 1)
        keys = {self.data_key_left: left, self.label_key: KeySummary("int", pair_labels),
                self.data_key_right: KeySummary(left.dtype, shape=left.shape)}
        return DatasetSummary(text, len(self.data), keys, num_classes=len(self.mapping), class_key=self.label_key)


__all__ = ["SiameseDirDataset"]
