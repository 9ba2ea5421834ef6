"""get_signature_epochs: one epoch per distinct combination of scheduled items in a mode; get_current_items modes."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from fe_ray.op.op import Op
from fe_ray.schedule import EpochScheduler, RepeatScheduler, Scheduler, get_current_items, get_signature_epochs


def _brute_force(items: list[Any], total_epochs: int, mode: str | None = None) -> list[int]:
    """The first epoch of each distinct configuration, found by looking at every epoch of the run."""
    seen: list[list[Any]] = []
    found = []
    for epoch in range(1, total_epochs + 1):
        config = get_current_items(items, run_modes=mode, epoch=epoch)
        if config not in seen:
            seen.append(config)
            found.append(epoch)
    return found


def test_signature_epochs_of_combined_schedulers_match_fastestimator() -> None:
    # FastEstimator's own test case: each scheduler alone changes at 1, 2, 3, 30, but the pair first shows
    # (a, b) at epoch 5, and after the EpochScheduler turns off at 30 the RepeatScheduler alone at 30, 31 and 33.
    items = [RepeatScheduler(["a", "b", "c", "c"]), EpochScheduler({1: "a", 2: "b", 30: None})]
    assert get_signature_epochs(items, total_epochs=50, mode="train") == [1, 2, 3, 5, 30, 31, 33]
    assert get_signature_epochs(items, total_epochs=50) == [1, 2, 3, 5, 30, 31, 33]


def test_signature_epochs_skip_epochs_where_nothing_changes() -> None:
    items = [EpochScheduler({1: "a", 3: "a"}), RepeatScheduler(["x", "x"]), EpochScheduler({1: 8, 4: 8})]
    assert get_signature_epochs(items, total_epochs=5) == [1]


def test_signature_epochs_ignore_items_of_other_modes() -> None:
    first, second, evaluator = Op(mode="train"), Op(mode="train"), Op(mode="eval")
    items = [EpochScheduler({1: first, 3: second}), evaluator]
    assert get_signature_epochs(items, total_epochs=5, mode="eval") == [1]
    assert get_signature_epochs(items, total_epochs=5, mode="train") == [1, 3]
    assert get_signature_epochs(items, total_epochs=5, mode=["eval", "train"]) == [1, 3]
    # An eval-only op that comes and goes does change the eval configuration.
    assert get_signature_epochs([RepeatScheduler([evaluator, None])], total_epochs=5, mode="eval") == [1, 2]
    assert get_signature_epochs([RepeatScheduler([evaluator, None])], total_epochs=5, mode="train") == [1]


def test_signature_epochs_stay_within_total_epochs() -> None:
    items = [RepeatScheduler(["a", "b", "c", "c"]), EpochScheduler({1: "a", 2: "b", 30: None})]
    assert get_signature_epochs(items, total_epochs=4) == [1, 2, 3]
    assert get_signature_epochs(items, total_epochs=31) == [1, 2, 3, 5, 30, 31]
    assert get_signature_epochs(items, total_epochs=0) == []
    assert get_signature_epochs(["plain"], total_epochs=10) == [1]


def test_signature_epochs_scan_the_whole_run_for_other_schedulers() -> None:
    class Every7th(Scheduler[str]):
        def get_current_value(self, epoch: int) -> str | None:
            return "rare" if epoch % 7 == 0 else "usual"

        def get_all_values(self) -> list[str | None]:
            return ["rare", "usual"]

    class Shifted(RepeatScheduler[str]):
        def get_current_value(self, epoch: int) -> str | None:
            return "late" if epoch > 20 else super().get_current_value(epoch)

    assert get_signature_epochs([Every7th()], total_epochs=10) == [1, 7]
    assert get_signature_epochs([Shifted(["a", "b"])], total_epochs=30) == [1, 2, 21]


def test_signature_epochs_tolerate_values_without_plain_equality() -> None:
    # numpy arrays answer == elementwise; two distinct arrays count as distinct configurations, never an error.
    first, second = np.zeros(3), np.zeros(3)
    assert get_signature_epochs([EpochScheduler({1: first, 2: second, 3: first})], total_epochs=4) == [1, 2]


@pytest.mark.parametrize("seed", range(20))
def test_signature_epochs_match_a_scan_of_every_epoch(seed: int) -> None:
    # The search stops one combined repeat period after the last EpochScheduler key; it must lose nothing.
    rng = random.Random(seed)
    values = ["a", "b", "c", None]
    items: list[Any] = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            items.append(RepeatScheduler([rng.choice(values) for _ in range(rng.randint(2, 5))]))
        else:
            keys = rng.sample(range(1, 40), rng.randint(1, 4))
            items.append(EpochScheduler({key: rng.choice(values) for key in keys}))
    assert get_signature_epochs(items, total_epochs=80) == _brute_force(items, 80)


def test_get_current_items_accepts_several_modes() -> None:
    train_only, eval_only, test_only, always = Op(mode="train"), Op(mode="eval"), Op(mode="test"), Op()
    items = [train_only, eval_only, test_only, always]
    assert get_current_items(items, run_modes=["train", "eval"]) == [train_only, eval_only, always]
    assert get_current_items(items, run_modes={"test"}) == [test_only, always]
    assert get_current_items(items, run_modes=("eval",), epoch=1) == [eval_only, always]
    assert get_current_items(items, run_modes=[]) == items  # no mode asked for: nothing is filtered out
    sched = EpochScheduler({1: train_only, 2: eval_only})
    assert get_current_items([sched], run_modes=["eval", "infer"], epoch=2) == [eval_only]
    assert get_current_items([sched], run_modes=["eval", "infer"], epoch=1) == []


@pytest.mark.parametrize("bad", [3, [1, "train"], object()])
def test_get_current_items_rejects_bad_run_modes(bad: object) -> None:
    with pytest.raises(TypeError, match="Modes must be None, a str or an iterable of str"):
        get_current_items([Op()], run_modes=bad)  # type: ignore[arg-type]
