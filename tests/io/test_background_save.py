"""BackgroundSaver: one write in flight, errors surfaced at the next save or wait, ordering, timeouts."""

from __future__ import annotations

import os
import pickle
import threading
import time
from typing import Any

import numpy as np
import pytest

from fe_ray.io import background_save
from fe_ray.io.background_save import BackgroundSaver, saver_for
from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.state_files import read_checkpoint


def _payload(value: float) -> dict[str, Any]:
    return {"system": {"global_step": int(value)}, "config": {}, "models": {"m": {"w": np.full(4, value)}},
            "note": f"v{value}"}


def _capture(value: float, log: list | None = None):
    def capture(buffers):
        if log is not None:
            log.append(("capture", value))
        payload = _payload(value)
        payload["models"] = buffers.copy(payload["models"])
        return payload
    return capture


def test_saves_commit_in_order_and_wait_returns_the_last(tmp_path) -> None:
    store = CheckpointStore(str(tmp_path), keep=None)
    saver = BackgroundSaver()
    first = saver.save(store, _capture(1.0), info={"n": 1})
    second = saver.save(store, _capture(2.0), info={"n": 2})  # waits for the first write
    assert first.done()
    assert saver.wait() == second.result() == store.latest()
    assert store.committed() == [first.result(), second.result()]
    assert store.manifest(store.latest())["info"] == {"n": 2}
    restored = read_checkpoint(store.latest())
    np.testing.assert_array_equal(restored["models"]["m"]["w"], np.full(4, 2.0))
    assert restored["note"] == "v2.0"
    saver.close()
    assert saver.wait() == second.result()  # nothing in flight: the last URL


def test_next_save_waits_for_the_write_in_flight_before_capturing(tmp_path, monkeypatch) -> None:
    release = threading.Event()
    log: list = []
    real_write = background_save.write_checkpoint

    def slow_write(payload, directory):
        log.append(("write starts", payload["note"]))
        assert release.wait(30)
        real_write(payload, directory)
        log.append(("written", payload["note"]))
    monkeypatch.setattr(background_save, "write_checkpoint", slow_write)
    store = CheckpointStore(str(tmp_path), keep=None)
    saver = BackgroundSaver()
    saver.save(store, _capture(1.0, log))
    assert saver.busy
    second = threading.Thread(target=lambda: saver.save(store, _capture(2.0, log)))
    second.start()
    second.join(0.3)
    assert second.is_alive(), "the second save must wait for the first write"
    release.set()
    second.join(30)
    saver.wait()
    # The second snapshot is taken into the same buffers only after the first write is done with them.
    assert log == [("capture", 1.0), ("write starts", "v1.0"), ("written", "v1.0"), ("capture", 2.0),
                   ("write starts", "v2.0"), ("written", "v2.0")]
    assert [read_checkpoint(url)["models"]["m"]["w"][0] for url in store.committed()] == [1.0, 2.0]
    saver.close()


def test_a_failed_write_is_raised_once_at_the_next_save_and_that_save_is_not_taken(tmp_path, monkeypatch) -> None:
    real_write = background_save.write_checkpoint
    calls = []

    def failing_once(payload, directory):
        calls.append(payload["note"])
        if len(calls) == 1:
            raise OSError("disk full (simulated)")
        real_write(payload, directory)
    monkeypatch.setattr(background_save, "write_checkpoint", failing_once)
    store = CheckpointStore(str(tmp_path), keep=None)
    saver = BackgroundSaver()
    saver.save(store, _capture(1.0))
    with pytest.raises(OSError, match="disk full"):
        saver.save(store, _capture(2.0))
    assert calls == ["v1.0"] and store.latest() is None  # the failed one was never committed
    saver.save(store, _capture(3.0))  # the error was raised once: the next save starts clean
    assert saver.wait() == store.latest()
    assert read_checkpoint(store.latest())["note"] == "v3.0"
    saver.close()


def test_wait_times_out_and_can_be_called_again(tmp_path, monkeypatch) -> None:
    release = threading.Event()
    real_write = background_save.write_checkpoint

    def blocked_write(payload, directory):
        assert release.wait(30)
        real_write(payload, directory)
    monkeypatch.setattr(background_save, "write_checkpoint", blocked_write)
    store = CheckpointStore(str(tmp_path))
    saver = BackgroundSaver(timeout_s=0.2)
    saver.save(store, _capture(1.0))
    with pytest.raises(TimeoutError, match="did not finish within 0.2s"):
        saver.wait()
    release.set()
    assert saver.wait() == store.latest() is not None
    saver.close()


def test_close_logs_a_failed_write_instead_of_raising(tmp_path, monkeypatch, caplog) -> None:
    def broken(payload, directory):
        raise OSError("gone (simulated)")
    monkeypatch.setattr(background_save, "write_checkpoint", broken)
    saver = BackgroundSaver()
    saver.save(CheckpointStore(str(tmp_path)), _capture(1.0))
    saver.close()
    assert "gone (simulated)" in caplog.text
    assert saver.buffers.nbytes == 0 and not saver.busy


@pytest.mark.parametrize("timeout_s", [0, -1, "5", True])
def test_bad_timeout_is_rejected(timeout_s) -> None:
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        BackgroundSaver(timeout_s=timeout_s)


def test_one_saver_per_root_and_pickled_savers_start_idle(tmp_path) -> None:
    assert saver_for(str(tmp_path / "a")) is saver_for(str(tmp_path / "a"))
    assert saver_for(str(tmp_path / "a")) is not saver_for(str(tmp_path / "b"))
    saver = BackgroundSaver(timeout_s=7.0, copy_threads=1)
    saver.save(CheckpointStore(str(tmp_path / "c")), _capture(1.0))
    saver.wait()
    clone = pickle.loads(pickle.dumps(saver))
    assert (clone.timeout_s, clone.buffers.threads, clone.last_committed) == (7.0, 1, saver.last_committed)
    assert not clone.busy and clone.buffers.nbytes == 0
    saver.close()


def test_fit_that_raises_commits_the_checkpoint_still_being_written(tmp_path, monkeypatch) -> None:
    import fe_ray as fe
    from fe_ray.trace import RestoreWizard, Trace
    from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp

    real_write = background_save.write_checkpoint

    def slow_write(payload, directory):
        time.sleep(0.5)  # still writing when training fails right after the save
        real_write(payload, directory)
    monkeypatch.setattr(background_save, "write_checkpoint", slow_write)

    class Fail(Trace):
        def on_batch_begin(self, data):
            if self.system.global_step == 4:  # right after the checkpoint of step 3 was handed to the writer
                raise RuntimeError("training failed (simulated)")

    train, evaluation = digits_arrays(n_train=64, n_eval=16)
    directory = str(tmp_path / "ckpt")
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=16), classifier_network(torch_mlp()),
                             epochs=1, traces=[RestoreWizard(directory, steps=3), Fail(mode="train")],
                             log_steps=None)
    with pytest.raises(RuntimeError, match="simulated"):
        estimator.fit()
    latest = CheckpointStore(directory).latest()
    assert latest is not None, "the checkpoint of step 3 must be committed before fit's exception is raised"
    assert CheckpointStore(directory).manifest(latest)["info"]["global_step"] == 3


@pytest.mark.skipif(not hasattr(os, "getpriority") or not os.path.isdir("/proc/self/task"),
                    reason="per-thread nice values are a Linux feature")
def test_writer_thread_runs_at_lower_priority_than_training(tmp_path, monkeypatch) -> None:
    seen = {}
    real_write = background_save.write_checkpoint

    def recording_write(payload, directory):
        seen["writer"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        real_write(payload, directory)
    monkeypatch.setattr(background_save, "write_checkpoint", recording_write)
    saver = BackgroundSaver()
    saver.save(CheckpointStore(str(tmp_path)), _capture(1.0))
    saver.wait()
    saver.close()
    training = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen["writer"] == min(training + background_save.WRITER_NICENESS, 19)


def test_restore_wizard_saves_synchronously_when_the_snapshot_does_not_fit(tmp_path, monkeypatch, capsys) -> None:
    import fe_ray as fe
    from fe_ray.io import snapshot
    from fe_ray.trace import RestoreWizard
    from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp

    monkeypatch.setattr(snapshot, "available_memory", lambda: 1000)  # far less than the model's state
    train, evaluation = digits_arrays(n_train=64, n_eval=16)
    directory = str(tmp_path / "ckpt")
    wizard = RestoreWizard(directory, steps=2, keep=10)
    fe.Estimator(ToyPipeline(train, evaluation, batch_size=16), classifier_network(torch_mlp()), epochs=1,
                 traces=[wizard], log_steps=None).fit()
    out = capsys.readouterr().out
    assert out.count("Saving synchronously instead") == 1  # said once, then every save is synchronous
    steps = [CheckpointStore(directory).manifest(url)["info"]["global_step"]
             for url in CheckpointStore(directory, keep=None).committed()]
    assert steps == [2, 4, 4]  # steps 2 and 4, and the end of the epoch (step 4 again, after evaluation)
    assert wizard.last_checkpoint == CheckpointStore(directory).latest()  # a synchronous save returns its URL


def _epochs_saved(directory: str) -> list[tuple[int, str]]:
    store = CheckpointStore(directory, keep=None)
    infos = [store.manifest(url)["info"] for url in store.committed()]
    return [(info["epoch_idx"], info["mode"]) for info in infos]


def test_restore_wizard_frequency_saves_every_nth_epoch_and_keep_prunes_the_older_ones(tmp_path) -> None:
    import fe_ray as fe
    from fe_ray.trace import RestoreWizard
    from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp

    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    every_second, kept = str(tmp_path / "every_second"), str(tmp_path / "kept")
    traces = [RestoreWizard(every_second, frequency=2, keep=10, background=False), RestoreWizard(kept, keep=2)]
    fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(torch_mlp()), epochs=5,
                 traces=traces, log_steps=None).fit()
    # After evaluation of epochs 2 and 4 only; epochs 1, 3 and 5 write nothing.
    assert _epochs_saved(every_second) == [(2, "eval"), (4, "eval")]
    assert _epochs_saved(kept) == [(4, "eval"), (5, "eval")]  # the newest two of five


@pytest.mark.parametrize("kwargs, error, message", [
    ({"frequency": 0}, ValueError, "frequency must be a positive int, got 0"),
    ({"steps": 0}, ValueError, "steps must be a positive int, got 0"),
    ({"keep": 1.5}, ValueError, "keep must be a positive int, got 1.5"),
    ({"frequency": True}, ValueError, "frequency must be a positive int, got True"),
    ({"background": "yes"}, TypeError, "background must be True or False, got 'yes'"),
])
def test_restore_wizard_rejects_bad_arguments_by_name(tmp_path, kwargs, error, message) -> None:
    from fe_ray.trace import RestoreWizard

    with pytest.raises(error, match=message):
        RestoreWizard(str(tmp_path), **kwargs)
