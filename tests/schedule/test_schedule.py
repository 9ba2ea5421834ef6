"""Schedulers and get_current_items: epoch/repeat lookups, mode and ds_id filtering."""

import pytest

from fe_ray.op.op import Op
from fe_ray.schedule import EpochScheduler, RepeatScheduler, get_current_items, get_signature_epochs


def test_epoch_scheduler_lookup() -> None:
    sched = EpochScheduler({1: "a", 3: "b", 5: None})
    assert [sched.get_current_value(e) for e in range(1, 7)] == ["a", "a", "b", "b", None, None]
    assert EpochScheduler({2: "x"}).get_current_value(1) is None


def test_repeat_scheduler_lookup() -> None:
    sched = RepeatScheduler(["a", "b", None])
    assert [sched.get_current_value(e) for e in range(1, 8)] == ["a", "b", None, "a", "b", None, "a"]


@pytest.mark.parametrize("bad", [{0: "a"}, {"1": "a"}, [1, 2]])
def test_epoch_scheduler_rejects_bad_keys(bad: object) -> None:
    with pytest.raises(ValueError, match="EpochScheduler"):
        EpochScheduler(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [[], ["a"], ("a", "b"), "ab"])
def test_repeat_scheduler_needs_a_list_of_two_or_more(bad: object) -> None:
    # FastEstimator asserts len(repeat_list) > 1: a one-entry cycle never changes.
    with pytest.raises(ValueError, match="at least 2 entries"):
        RepeatScheduler(bad)  # type: ignore[arg-type]


def test_epoch_scheduler_accepts_empty_dict() -> None:
    # As in FastEstimator: an empty mapping is valid and yields nothing in every epoch.
    sched: EpochScheduler[str] = EpochScheduler({})
    assert [sched.get_current_value(e) for e in (1, 5)] == [None, None]
    assert sched.get_all_values() == []
    assert get_current_items([sched], "train", epoch=3) == []
    assert get_signature_epochs([sched], total_epochs=4) == [1]


def test_signature_epochs() -> None:
    # Epochs 1-4 hold the four combinations of (a|b) x (x|y); epoch 5 repeats epoch 3's.
    items = [EpochScheduler({1: "a", 3: "b", 9: "c"}), RepeatScheduler(["x", "y"]), "plain"]
    assert get_signature_epochs(items, total_epochs=5) == [1, 2, 3, 4]


def test_get_current_items_modes_and_negation() -> None:
    train_only = Op(mode="train")
    not_train = Op(mode="!train")
    always = Op()
    items = [train_only, not_train, always]
    assert get_current_items(items, "train") == [train_only, always]
    assert get_current_items(items, "eval") == [not_train, always]
    assert get_current_items(items, "infer") == [not_train, always]


def test_get_current_items_ds_id_white_and_blacklist() -> None:
    only_a = Op(ds_id="a")
    not_a = Op(ds_id="!a")
    items = [only_a, not_a]
    assert get_current_items(items, "train", ds_id="a") == [only_a]
    assert get_current_items(items, "train", ds_id="b") == [not_a]


def test_get_current_items_resolves_schedulers() -> None:
    first, second = Op(mode="train"), Op(mode="train")
    sched = EpochScheduler({1: first, 2: second, 3: None})
    assert get_current_items([sched], "train", epoch=1) == [first]
    assert get_current_items([sched], "train", epoch=2) == [second]
    assert get_current_items([sched], "train", epoch=3) == []
    assert get_current_items([sched]) == [first, second]


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"Unknown mode\(s\) \['trian'\]"):
        Op(mode="trian")
    with pytest.raises(ValueError, match="Cannot mix plain and negated"):
        Op(mode=["train", "!eval"])


def test_get_current_items_takes_several_ds_ids_as_fastestimator() -> None:
    """FastEstimator's ds_id may be an iterable: a whitelist naming one of them, or a blacklist naming none, keeps
    the item (a list raised 'unhashable type')."""
    only_a, not_b, every = Op(ds_id="a"), Op(ds_id="!b"), Op()
    assert get_current_items([only_a, not_b, every], ds_id=["a", "b"]) == [only_a, every]
    assert get_current_items([only_a, not_b, every], ds_id={"a", "c"}) == [only_a, not_b, every]
    assert get_current_items([only_a, not_b, every], ds_id="b") == [every]
