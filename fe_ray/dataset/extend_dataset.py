"""ExtendDataset: a dataset that a Pipeline reads for a chosen number of samples per epoch, more or fewer than it has.

As in FastEstimator, ``len()`` stays the wrapped dataset's length; only the Pipeline's Loader reads ``spoof_length``:
an epoch then hands out ``spoof_length`` samples (``ceil(spoof_length / batch_size)`` batches, the last one partial
unless ``drop_last``). The samples are a stream of passes over the dataset, each a fresh permutation when shuffling,
and a batch may span the end of one pass and the start of the next, as in FastEstimator. Sample ``k`` of the epoch
is a pure function of ``k`` (pass ``k // len``, position ``k % len`` of that pass's permutation), so a resumed run
and ``num_process`` threads give exactly the batches of the uninterrupted serial run; with ``spoof_length ==
len(dataset)`` the batches are those of the plain dataset. A dataset of whole batches (BatchDataset) or an
InterleaveDataset wrapped this way gives ``spoof_length`` batches per epoch. ``steps_per_epoch``, when the Estimator
sets it, takes precedence (``steps_per_epoch`` full batches), again as in FastEstimator.
"""

from __future__ import annotations

import numbers
from typing import Any

from fe_ray.dataset.combined_dataset import child_states, load_child_states

#: The key of a pass, as the Pipeline's Loader gives it: (shuffle seed, mode, ds_id, epoch, data pass).
PassKey = tuple[int, str, str, int, int]


class ExtendDataset:
    """Present ``dataset`` to the Pipeline as ``spoof_length`` samples per epoch (see the module doc).

    Args:
        dataset: The map-style dataset to extend or contract (not itself an ExtendDataset).
        spoof_length: Samples per epoch (batches per epoch for a BatchDataset or InterleaveDataset), >= 1.

    Raises:
        TypeError: If ``spoof_length`` is not an int or ``dataset`` is not a map-style dataset.
        ValueError: If ``spoof_length`` is below 1, ``dataset`` is empty or is an ExtendDataset already.
    """

    #: Tells the Pipeline's Loader to read ``spoof_length`` samples of ``dataset`` per epoch.
    fe_extended = True

    def __init__(self, dataset: Any, spoof_length: int) -> None:
        if isinstance(spoof_length, bool) or not isinstance(spoof_length, numbers.Integral):
            raise TypeError(f"ExtendDataset spoof_length must be an int (samples per epoch), got "
                            f"{type(spoof_length).__name__}: {spoof_length!r}.")
        if spoof_length < 1:
            raise ValueError(f"ExtendDataset spoof_length must be >= 1, got {spoof_length}.")
        if isinstance(dataset, ExtendDataset):
            raise ValueError("ExtendDataset cannot wrap another ExtendDataset; give the inner dataset the final "
                             "spoof_length instead.")
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(f"ExtendDataset needs a map-style dataset (__len__ and __getitem__), got "
                            f"{type(dataset).__name__}.")
        if len(dataset) == 0:
            raise ValueError(f"ExtendDataset cannot extend an empty {type(dataset).__name__}.")
        self.dataset = dataset
        self.spoof_length = int(spoof_length)

    # The wrapped dataset's nature, so that the Pipeline treats the wrapper as it treats the dataset.
    @property
    def fe_batched(self) -> bool:
        """Whether the wrapped dataset's items are whole batches (BatchDataset)."""
        return bool(getattr(self.dataset, "fe_batched", False))

    @property
    def fe_keyed(self) -> bool:
        """Whether the wrapped dataset draws its samples by position (SiameseDirDataset)."""
        return bool(getattr(self.dataset, "fe_keyed", False))

    @property
    def fe_interleaved(self) -> bool:
        """Whether the wrapped dataset is an InterleaveDataset."""
        return bool(getattr(self.dataset, "fe_interleaved", False))

    def __len__(self) -> int:
        """The wrapped dataset's length (as FastEstimator: only the Pipeline reads ``spoof_length``)."""
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        return self.dataset[index]

    def keyed_item(self, index: int, key: PassKey) -> Any:
        """The wrapped dataset's ``keyed_item`` (for a dataset drawing its samples by position)."""
        return self.dataset.keyed_item(index, key)

    def batch_samples(self, index: int, key: PassKey) -> Any:
        """The wrapped dataset's ``batch_samples`` (for a dataset of whole batches)."""
        return self.dataset.batch_samples(index, key)

    def summary(self) -> str:
        """One line naming the spoofed length and the wrapped dataset."""
        inner = self.dataset.summary() if callable(getattr(self.dataset, "summary", None)) else \
            f"{type(self.dataset).__name__}({len(self.dataset)})"
        return f"ExtendDataset(spoof_length={self.spoof_length} of {inner})"

    def __repr__(self) -> str:
        return self.summary()

    def state_dict(self) -> dict[str, Any]:
        """The wrapped dataset's state (None if it keeps none), so a Pipeline checkpoint holds it."""
        return child_states([self.dataset])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` into the wrapped dataset.

        Raises:
            ValueError: If ``state`` did not come from an ExtendDataset.
        """
        load_child_states(self, [self.dataset], state)


__all__ = ["ExtendDataset"]
