"""System behaviour FastEstimator users rely on."""

from __future__ import annotations

import os

import pytest

from fe_ray.io.state_files import CheckpointError
from fe_ray.summary import System
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp


def _system() -> System:
    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    return System(classifier_network(torch_mlp()), ToyPipeline(train, evaluation), traces=[], total_epochs=1)


@pytest.mark.parametrize("missing", ["everything", "objects.pkl"])
def test_load_state_of_missing_files_raises_file_not_found(tmp_path, missing: str) -> None:
    """As in FastEstimator, a missing checkpoint file is a FileNotFoundError (code that starts afresh when there is
    nothing to resume from catches that); it is still a CheckpointError naming the file."""
    directory = str(tmp_path / "ckpt")
    if missing != "everything":
        _system().save_state(directory)
        os.remove(os.path.join(directory, missing))
    # A missing folder is named as such (a mistyped path, or nothing was saved), a missing file by its name.
    expected = missing if missing != "everything" else r"No checkpoint folder at .*ckpt'.*Check the path"
    with pytest.raises(FileNotFoundError, match=expected) as info:
        _system().load_state(directory)
    assert isinstance(info.value, CheckpointError)


def test_eval_log_steps_are_batch_indices() -> None:
    network = classifier_network(torch_mlp())
    assert System(network, None, eval_log_steps=range(1, 4)).eval_log_steps_request == [1, 2, 3]
    assert System(network, None, eval_log_steps=5).eval_log_steps_request == [5]
    for bad, error, match in [("1,2", TypeError, r"got '1,2': entry '1,2' is a str"),
                              ([1, 1.5], TypeError, r"entry 1.5 is a float"),
                              ([0, 3], ValueError, r"counted from 1, got 0")]:
        with pytest.raises(error, match=match):
            System(network, None, eval_log_steps=bad)
