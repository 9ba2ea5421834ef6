"""Recovery prerequisites, checked before fit starts anything: checkpoint directories compared by location, and
``max_failures`` refused without a RestoreWizard writing where recovery reads."""

from __future__ import annotations

import os
from typing import Any

import pytest

import fe_ray as fe
from fe_ray.distributed import ReplicaDiedError
from fe_ray.distributed.recovery import check_recoverable, may_recover, restore_wizards, same_location
from fe_ray.io.checkpoint import is_process_local, normalize_location
from fe_ray.trace import RestoreWizard
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp


def test_locations_are_compared_as_places(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = str(tmp_path / "ck")
    assert normalize_location("ck") == absolute == normalize_location(f"file://{absolute}/")
    assert normalize_location("~/ck") == os.path.join(os.path.expanduser("~"), "ck")
    assert normalize_location("s3://bucket/run/") == "s3://bucket/run"
    assert same_location("ck", absolute) and same_location(f"file://{absolute}", "./ck/")
    assert not same_location("ck", str(tmp_path / "other"))
    assert is_process_local("memory://ck") and not is_process_local(absolute)


def test_a_relative_restore_wizard_directory_is_made_absolute_on_the_driver(tmp_path: Any,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Replica rank 0 writes distributed checkpoints from its own working directory: the driver's relative path
    must mean the same place there."""
    monkeypatch.chdir(tmp_path)
    wizard = RestoreWizard("rel_ck")
    monkeypatch.chdir("/")
    assert wizard.directory == str(tmp_path / "rel_ck") and wizard.store.root == str(tmp_path / "rel_ck")


def test_max_failures_needs_a_restore_wizard_writing_to_checkpoint_dir(tmp_path: Any) -> None:
    ckpt = str(tmp_path / "ck")
    assert restore_wizards([RestoreWizard(f"file://{ckpt}")], ckpt)  # the same place, spelled differently
    check_recoverable(0, None, [])  # nothing asked, nothing needed
    with pytest.raises(ValueError, match=r"checkpoint_dir='.*/ck', but there is no RestoreWizard trace\. Add "
                                         r"RestoreWizard\("):
        check_recoverable(1, ckpt, [])
    with pytest.raises(ValueError, match=r"the RestoreWizard traces write to \['.*/elsewhere'\]"):
        check_recoverable(2, ckpt, [RestoreWizard(str(tmp_path / "elsewhere"))])


def test_fit_refuses_max_failures_without_a_matching_restore_wizard_before_starting_replicas(tmp_path: Any) -> None:
    pytest.importorskip("ray")
    train, evaluation = digits_arrays("torch", n_train=16, n_eval=8)
    model = torch_mlp()
    ops = classifier_network(model).ops
    network = fe.Network(ops, num_replicas=2, max_failures=1, checkpoint_dir=str(tmp_path / "ck"))
    estimator = fe.Estimator(ToyPipeline(train, evaluation), network, epochs=1,
                             traces=RestoreWizard(str(tmp_path / "other")), log_steps=None)
    with pytest.raises(ValueError, match="max_failures=1 resumes a failed run"):
        estimator.fit()
    assert not network.started


def test_only_a_failure_of_the_replicas_may_resume_and_only_max_failures_times(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    died = ReplicaDiedError(1, "node", 42, "ActorDiedError", "the replica process died")
    directory = str(tmp_path / "ck")
    wizards = [RestoreWizard(directory)]
    assert may_recover(died, 2, 1, directory, wizards)
    assert may_recover(died, 2, 1, directory, None)  # no traces given: not checked
    assert not may_recover(ValueError("a user op's error"), 2, 0, directory, wizards)
    assert not may_recover(KeyboardInterrupt(), 2, 0, directory, wizards)
    assert not may_recover(died, 0, 0, directory, wizards)
    assert not may_recover(died, 2, 0, None, wizards)
    assert caplog.text == ""  # nothing asked for a recovery, so nothing to explain
    with caplog.at_level("ERROR", logger="fe_ray.distributed.recovery"):
        assert not may_recover(died, 2, 2, directory, wizards)
        assert not may_recover(died, 2, 0, directory, [RestoreWizard(str(tmp_path / "elsewhere"))])
    assert "after 2 recoveries (max_failures=2); giving up" in caplog.text
    assert "no RestoreWizard(directory=" in caplog.text


def test_recovery_finds_the_restore_wizard_among_the_traces_the_run_executes(tmp_path: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """fit() checked the traces it runs (``system.traces_in_use``); recovery looked at ``system.traces`` only, a copy
    of the list given to the Estimator: a RestoreWizard appended to ``estimator.traces`` passed the check, wrote the
    checkpoints, and then "cannot recover: no RestoreWizard" ended the run at the first replica failure."""
    from types import SimpleNamespace

    from fe_ray.distributed import lifecycle

    pytest.importorskip("ray")
    ckpt = str(tmp_path / "ck")
    network = fe.Network(classifier_network(torch_mlp()).ops, num_replicas=2, max_failures=1, checkpoint_dir=ckpt)
    latest = SimpleNamespace(latest=lambda: f"{ckpt}/ckpt-000001")
    monkeypatch.setattr(lifecycle, "CheckpointStore", lambda root, keep=None: latest)
    system = SimpleNamespace(traces=[], traces_in_use=[RestoreWizard(ckpt)])
    assert network.recover(ReplicaDiedError(1, "n", 2, "ActorDiedError", "died"), system)
    assert network.recoveries == 1
