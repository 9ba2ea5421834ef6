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
    # As FastEstimator: None is the default, and indices no batch has are accepted ([-1] silences progress lines).
    assert System(network, None, eval_log_steps=None).eval_log_steps_request == []
    assert System(network, None, eval_log_steps=[-1]).eval_log_steps_request == [-1]
    assert System(network, None, eval_log_steps=[0, 3]).eval_log_steps_request == [0, 3]
    for bad, match in [("1,2", r"got '1,2': entry '1,2' is a str"), ([1, 1.5], r"entry 1.5 is a float")]:
        with pytest.raises(TypeError, match=match):
            System(network, None, eval_log_steps=bad)


def test_eval_log_steps_minus_one_prints_no_eval_progress(capsys: pytest.CaptureFixture[str]) -> None:
    """FastEstimator's tutorials pass eval_log_steps=[-1] to silence the evaluation progress lines."""
    import fe_ray as fe

    train, evaluation = digits_arrays(n_train=16, n_eval=16)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(torch_mlp()), epochs=1,
                             log_steps=0, eval_log_steps=[-1])
    estimator.fit()
    out = capsys.readouterr().out
    assert "FastEstimator-Eval: step: 2; epoch: 1;" in out and "Eval Progress" not in out
    assert estimator.system.eval_log_steps[0] == [-1]
