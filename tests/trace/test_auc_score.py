"""AUCScore: a hand-computed binary AUC, multiclass and multilabel against scikit-learn's definition, batching,
per-dataset keys, exact mid-epoch checkpoint state, framework tensors and argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from fe_ray.trace.metric import AUCScore
from tests.trace.test_fe17_more_metrics import _epoch, _resumed


def test_binary_auc_by_hand_over_batches() -> None:
    # Positives score 0.35 and 0.8, negatives 0.1 and 0.4: 3 of the 4 (positive, negative) pairs are ordered right.
    batches = [{"y": np.array([0, 0]), "p": np.array([0.1, 0.4])}, {"y": np.array([1, 1]), "p": np.array([0.35, 0.8])}]
    assert _epoch(AUCScore("y", "p"), batches)["auc"] == pytest.approx(0.75)


def test_multiclass_ovr_is_the_mean_of_one_vs_rest_aucs() -> None:
    y = np.array([0, 1, 2, 0, 1, 2])
    p = np.array([[.8, .1, .1], [.2, .7, .1], [.3, .3, .4], [.5, .4, .1], [.6, .3, .1], [.1, .2, .7]])
    # One vs rest: class 0's positives score 0.8 (above all four negatives' 0.2, 0.3, 0.6, 0.1) and 0.5 (above three)
    # -> 7 / 8; class 1: 0.7 beats all four negatives (0.1, 0.3, 0.4, 0.2), 0.3 beats 0.1 and 0.2 and ties 0.3
    # -> 6.5 / 8; class 2: 0.4 and 0.7 beat every 0.1 -> 1.
    expected = (7 / 8 + 6.5 / 8 + 1.0) / 3
    batches = [{"y": y[:4], "p": p[:4]}, {"y": y[4:], "p": p[4:]}]
    assert _epoch(AUCScore("y", "p", multi_class="ovr"), batches)["auc"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="AUCScore .* could not compute"):
        _epoch(AUCScore("y", "p"), batches)  # multi_class="raise", as scikit-learn's default


def test_per_dataset_keys_and_mid_epoch_resume_match_the_uninterrupted_epoch() -> None:
    rng = np.random.default_rng(1)
    batches = [{"y": rng.integers(0, 2, 6), "p": rng.uniform(size=6)} for _ in range(4)]
    ds_ids = ["a", "b", "a", "b"]
    full = _epoch(AUCScore("y", "p"), batches, ds_ids)
    assert set(full) == {"auc", "auc|a", "auc|b"}
    resumed = _resumed(lambda: AUCScore("y", "p"), batches, split=2, ds_ids=ds_ids)
    for key in full:
        assert resumed[key] == pytest.approx(full[key])


def test_torch_tensors_and_partial_auc() -> None:
    import torch

    y, p = torch.tensor([0, 1, 0, 1, 1, 0]), torch.tensor([0.2, 0.9, 0.6, 0.4, 0.8, 0.1])
    whole = _epoch(AUCScore("y", "p"), [{"y": y, "p": p}])["auc"]
    assert whole == pytest.approx(8 / 9)  # positives 0.9, 0.8 beat all three negatives; 0.4 beats 0.2 and 0.1
    partial = _epoch(AUCScore("y", "p", max_fpr=0.5), [{"y": y, "p": p}])["auc"]
    assert 0.5 <= partial <= 1.0 and partial != pytest.approx(whole)


@pytest.mark.parametrize("kwargs, match", [({"average": "mean"}, "average must be None or one of"),
                                           ({"multi_class": "all"}, "multi_class must be one of"),
                                           ({"max_fpr": 0}, "max_fpr must be None or a number in"),
                                           ({"max_fpr": 1.5}, "got 1.5")])
def test_bad_arguments_name_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AUCScore("y", "p", **kwargs)
