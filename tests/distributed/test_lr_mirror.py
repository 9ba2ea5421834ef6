"""Which learning rates the coordinator sends with a step, and what an epoch's end keeps (in-process)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend, get_lr, set_lr  # noqa: E402
from fe_ray.distributed.lr_mirror import LrMirror  # noqa: E402
from tests.helpers.models import linear  # noqa: E402


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_only_changed_rates_are_sent_once(framework: str) -> None:
    first, second = linear(framework, lr=0.1, name="first"), linear(framework, lr=0.2, name="second")
    no_optimizer = linear(framework, name="frozen")
    no_optimizer.current_optimizer = None
    mirror = LrMirror()
    models = [first, second, no_optimizer]
    assert mirror.changes(models) == {"first": pytest.approx(0.1), "second": pytest.approx(0.2)}
    assert mirror.changes(models, read=False) is None
    set_lr(second, 0.3)
    assert mirror.changes(models, read=False) == {"second": pytest.approx(0.3)}
    mirror.reset()
    assert set(mirror.changes(models, read=False) or {}) == {"first", "second"}


def test_a_tf_rate_written_behind_set_lr_is_sent_when_read() -> None:
    model = linear("tf", lr=0.1)
    mirror = LrMirror()
    mirror.changes([model])
    model.current_optimizer.learning_rate.assign(0.5)
    assert mirror.changes([model], read=False) is None  # per step: not read
    assert mirror.changes([model], read=True) == {"linear": pytest.approx(0.5)}  # entering a context: read


def replica_sync(mirror: LrMirror, model: Any) -> Callable[[], None]:
    """A sync as RayNetwork.sync_models_to_driver's: the replicas' state (``model``'s now: they still train with its
    current rate) replaces the driver's, and the mirror records the synced rates."""
    backend = get_backend(model)
    replica_state = backend.get_state(model)

    def sync() -> None:
        backend.set_state(model, replica_state)
        mirror.reset()
        mirror.changes([model])

    return sync


def test_epoch_end_sync_keeps_an_unsent_rate(caplog: pytest.LogCaptureFixture) -> None:
    model = linear("tf", lr=0.1)
    mirror = LrMirror()
    sync = replica_sync(mirror, model)
    mirror.changes([model])
    model.current_optimizer.learning_rate.assign(0.5)
    with caplog.at_level(logging.WARNING, logger="fe_ray.distributed.lr_mirror"):
        mirror.keep_unsent([model], sync)
    assert get_lr(model) == pytest.approx(0.5)
    assert "without fe_ray.backend.set_lr" in caplog.text
    assert mirror.changes([model]) == {"linear": pytest.approx(0.5)}  # the next context sends it


def test_epoch_end_sync_without_unsent_rates_is_quiet(caplog: pytest.LogCaptureFixture) -> None:
    model = linear("torch", lr=0.1)
    mirror = LrMirror()
    mirror.changes([model])
    synced: list[bool] = []
    with caplog.at_level(logging.WARNING):
        mirror.keep_unsent([model], lambda: synced.append(True))
    assert synced == [True] and not caplog.text


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_a_rate_set_after_the_last_step_is_kept_without_a_warning(framework: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A context that ends before the step whose rate a trace set through set_lr (an interrupted run: LRScheduler's
    on_batch_begin ran, the step did not): no step missed that rate, so it is kept quietly for the next one."""
    model = linear(framework, lr=0.1)
    mirror = LrMirror()
    sync = replica_sync(mirror, model)
    mirror.changes([model])
    set_lr(model, 0.5)
    with caplog.at_level(logging.WARNING, logger="fe_ray.distributed.lr_mirror"):
        mirror.keep_unsent([model], sync)
    assert get_lr(model) == pytest.approx(0.5)
    assert not caplog.text
    assert mirror.changes([model]) == {"linear": pytest.approx(0.5)}


def test_a_scheduled_models_rates_are_sent_per_optimizer() -> None:
    """With a Scheduler of optimizers each optimizer's rate is its own entry, and set_rates gives each its own
    whichever is current: a rate set on the optimizer of the previous epoch reaches that optimizer."""
    import torch

    import fe_ray as fe
    from fe_ray.distributed.lr_mirror import set_rates
    from fe_ray.schedule import RepeatScheduler

    def build() -> Any:
        return fe.build(lambda: torch.nn.Linear(2, 1), model_name="rep",
                        optimizer_fn=RepeatScheduler([lambda p: torch.optim.Adam(p, lr=0.1),
                                                      lambda p: torch.optim.SGD(p, lr=0.2)]))

    driver, replica = build(), build()
    adam, sgd = driver.optimizer.get_all_values()
    mirror = LrMirror()
    assert mirror.changes([driver]) == {("rep", 0): pytest.approx(0.1), ("rep", 1): pytest.approx(0.2)}
    set_lr(driver, 0.05)  # Adam is current
    driver.current_optimizer = sgd
    sent = mirror.changes([driver], read=False)
    assert sent == {("rep", 0): pytest.approx(0.05)}
    set_rates([replica], sent)
    assert [opt.param_groups[0]["lr"] for opt in replica.optimizer.get_all_values()] == [0.05, 0.2]
    assert replica.current_optimizer is replica.optimizer.get_all_values()[0]  # current as it was
    assert driver.current_optimizer is sgd and adam.param_groups[0]["lr"] == 0.05
