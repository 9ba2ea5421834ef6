"""Smoke test of the benchmark suite: the harness helpers and a seconds-long plain-variant throughput run."""

from __future__ import annotations

import json
import mmap
import time

import pytest

from benchmarks import harness, idle_gap, step_gap, throughput, variants
from fe_ray.distributed.step_stream import StepReply


def test_alternate_rotates_order_and_takes_medians() -> None:
    calls: list[str] = []

    def make(name: str, value: float):  # noqa: ANN202
        def run() -> float:
            calls.append(name)
            return value
        return run

    series = harness.alternate({"x": make("x", 1.0), "y": make("y", 3.0)}, repeats=3, unit="s", log=None)
    assert calls == ["x", "y", "y", "x", "x", "y"]
    assert series["x"].median == 1.0 and series["y"].median == 3.0
    assert harness.ratio(series, "y", "x") == 3.0
    table = harness.ratio_table([("y/x", 3.0, 2.0, ">="), ("x/y", None, 1.0, ">=")])
    assert "MET" in table and "not run" in table


def test_paired_ratio_is_the_median_of_per_repeat_ratios() -> None:
    plain, fe = harness.Series("a", "samples/s"), harness.Series("c", "samples/s")
    plain.values = [100.0, 50.0, 80.0]  # repeat 2: the whole machine was slow for both variants
    fe.values = [90.0, 45.0, 40.0]  # repeat 3: only this variant was disturbed
    series = {"a": plain, "c": fe}
    assert harness.ratio(series, "c", "a") == pytest.approx(45.0 / 80.0)  # medians from different repeats
    assert harness.ratio(series, "c", "a", paired=True) == pytest.approx(0.9)
    assert harness.ratio(series, "c", "a", best=True) == pytest.approx(0.9)


def test_median_interval_uses_binomial_order_statistics() -> None:
    # n=9: [2nd, 8th] smallest covers the median with 1 - 2 * 10/512 = 96% (the 3rd/7th would give only 82%).
    assert harness.median_interval([9, 1, 8, 2, 7, 3, 6, 4, 5]) == (2, 8)
    assert harness.median_interval(range(1, 6)) == (1, 5)  # 5 values: 1 - 2/32 = 94%
    assert harness.median_interval(range(1, 5)) is None  # 4 values: at most 1 - 2/16 = 88% < 90%
    assert harness.median_interval(range(1, 10), confidence=0.8) == (3, 7)  # 82% suffices for 80%
    with pytest.raises(ValueError, match="confidence"):
        harness.median_interval([1.0, 2.0], confidence=1.0)


def test_interval_verdict_tells_noise_from_a_miss() -> None:
    plain, fe = harness.Series("a", "samples/s"), harness.Series("c", "samples/s")
    plain.values = [100.0] * 9
    fe.values = [88.0, 90.0, 91.0, 92.0, 92.0, 93.0, 94.0, 95.0, 97.0]
    interval = harness.paired_interval({"a": plain, "c": fe}, "c", "a")
    assert interval == pytest.approx((0.90, 0.95))
    assert harness.interval_verdict(interval, 0.93) == "within noise"
    assert harness.interval_verdict(interval, 0.96) == "missed beyond noise"
    assert harness.interval_verdict(interval, 0.90) == "met beyond noise"
    assert harness.interval_verdict(None, 0.9) == "too few repeats"


def test_no_save_skips_the_default_file_but_writes_an_asked_for_path(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path / "results")
    parser = harness.base_parser("test")
    assert harness.save_results("x", {"k": 1}, parser.parse_args(["--no-save"])) is None
    assert not (tmp_path / "results").exists()
    out = tmp_path / "run" / "x.json"
    written = harness.save_results("x", {"k": 1}, parser.parse_args(["--no-save", "--json-out", str(out)]))
    assert written == out and json.loads(out.read_text()) == {"k": 1}
    assert not (tmp_path / "results").exists()
    assert harness.save_results("x", {"k": 2}, parser.parse_args([])) == tmp_path / "results" / "x.json"


def test_the_process_malloc_is_fixed_before_measuring(monkeypatch) -> None:  # noqa: ANN001
    from fe_ray import allocator

    monkeypatch.setattr(harness, "_MALLOC", harness._MALLOC)  # noqa: SLF001 - restored after the test
    monkeypatch.setattr(allocator, "_apply", lambda: True)
    monkeypatch.setattr(allocator, "malloc_chosen", lambda env_vars=None: False)
    monkeypatch.setattr(allocator, "_tuned", None)
    assert harness.set_process_malloc(glibc_defaults=True) == "glibc defaults"
    assert allocator.tune_process_malloc() is False  # an in-process Network started later leaves it so
    assert harness.environment(1, "cpu")["driver_malloc"] == "glibc defaults"
    monkeypatch.setattr(allocator, "_tuned", None)
    assert harness.set_process_malloc(glibc_defaults=False) == "fe_ray.allocator settings"


def test_throughput_quick_plain_variant(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert throughput.main(["--quick", "--model", "lenet", "--variants", "a,a_shuffled", "--device", "cpu",
                            "--threads", "1"]) == 0
    payload = json.loads((tmp_path / "throughput_quick.json").read_text())
    for key in ("a", "a_shuffled"):
        series = payload["results"]["lenet"]["series"][key]
        assert series["repeats"] == 2 and series["median"] > 0


def test_shuffled_plain_loop_gathers_each_batch_from_a_permutation_of_the_whole_dataset() -> None:
    import numpy as np

    from benchmarks.models import synthetic_data
    from benchmarks.variants import WARMUP_STEPS, PlainShuffled

    cfg = {"model": "mlp", "device": "cpu", "batch_size": 4, "steps": 6,
           "data": synthetic_data("mlp", 4 * (WARMUP_STEPS + 6))}
    variant = PlainShuffled("a_shuffled", cfg)
    variant.prepare()
    rows = np.concatenate(variant.indices)
    assert len(variant.indices) == 6 and len(np.unique(rows)) == rows.size  # one epoch's order: no repeats
    assert not np.array_equal(rows, np.arange(rows.size))  # shuffled, not the consecutive pre-cut batches
    assert variant.measure() > 0


def test_throughput_quick_replica_variant_splits_its_steps_into_phases(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """One replica on a local Ray started by the harness: the step probe's setup hook (named in ``ray.init``'s
    runtime environment) runs in the replica, the phases it stamps add up to the measured step time, and the
    driver's CPU per step is reported."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # the probe's hook is part of the Ray the harness starts, not of one started before
        ray.shutdown()
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    try:
        assert throughput.main(["--quick", "--model", "lenet", "--variants", "c,a_malloc,a_served", "--device",
                                "cpu", "--threads", "1"]) == 0
    finally:
        ray.shutdown()
    result = json.loads((tmp_path / "throughput_quick.json").read_text())["results"]["lenet"]
    phases = result["fixed_costs"]["c"]
    assert phases["replica_us"] > 0 and phases["to_replicas_us"] > 0 and phases["back_us"] > 0
    step_us = result["us_per_step"]["c"]
    assert abs(phases["unaccounted_us"]) < 0.05 * step_us
    # The driver's own CPU per step: one thread's time, so above zero and below the step's wall time.
    assert 0 < phases["driver_cpu_us"] < step_us
    assert result["us_per_step"]["a_malloc"] > 0  # the plain loop in an actor with a replica's environment
    # The plain step behind fe_ray's stream: its actor's own step is part of the whole step the driver timed.
    assert 0 < result["fixed_costs"]["a_served"]["inner_step_us"] < result["us_per_step"]["a_served"]


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_overhead_quick_times_the_default_transports_phases(framework, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The breakdown times fe_ray's step stream (its own, and the slices over it to plain actors), plain steps alone
    and in lockstep, the Estimator's trace events and the calls transport's phases, and its unaccounted rest is the
    step less the stream's phases; for TF also the plain step split as a data-parallel step is."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("tensorflow" if framework == "tf" else "torch")
    from benchmarks import overhead

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    try:
        assert overhead.main(["--quick", "--device", "cpu", "--threads", "2", "--replicas", "2",
                              "--framework", framework]) == 0
    finally:
        ray.shutdown()
    name = "overhead_tf_quick.json" if framework == "tf" else "overhead_quick.json"
    result = json.loads((tmp_path / name).read_text())
    median = result["median_us"]
    phases = ["stream_rtt", "stream_slices", "compute", "compute_lockstep", "allreduce", "merge", "traces",
              "call_slices"]
    for phase in phases + (["compute_split"] if framework == "tf" else []):
        assert median[phase] > 0, phase
    assert ("compute_split" in median) == (framework == "tf")
    accounted = sum(median[k] for k in ("slice", "stream_busy", "compute_lockstep", "allreduce", "merge"))
    assert result["unaccounted_us"] == pytest.approx(median["full_step"] - accounted)


def test_mlp_probe_reports_microseconds_per_step(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The overhead probe model runs through the plain loop and fe_ray's in-process Network; the JSON carries
    each variant's time per step, consistent with its samples/s."""
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert throughput.main(["--quick", "--model", "mlp", "--variants", "a,b0,b_prefetch", "--device", "cpu",
                            "--threads", "1"]) == 0
    result = json.loads((tmp_path / "throughput_quick.json").read_text())["results"]["mlp"]
    assert set(result["us_per_step"]) == {"a", "b0", "b_prefetch"}
    for key, us in result["us_per_step"].items():
        assert us == pytest.approx(1e6 * 32 / result["series"][key]["median"])
        # The driver's thread per step, read around each whole measure() call: never shorter than that repeat's
        # timed steps (each reading against its own repeat: repeats of a quick run can differ by half).
        readings = result["series"][key]["extra"]["driver_thread"]
        values = result["series"][key]["values"]
        assert len(readings) == len(values) == result["series"][key]["repeats"]
        assert all(r["wall_us"] >= 0.9 * 1e6 * 32 / rate and 0 < r["cpu_us"] <= 1.05 * r["wall_us"]
                   for r, rate in zip(readings, values))
    # The Pipeline's worker thread hands each batch over: the driver's thread waits for it at least sometimes.
    assert max(r["voluntary_switches"] for r in result["series"]["b_prefetch"]["extra"]["driver_thread"]) > 0


def test_metered_records_per_step_thread_usage() -> None:
    """harness.metered divides what the calling thread spent by the call's steps; a sleeping call is wall time,
    not CPU time, and touching fresh pages counts minor faults."""
    import time

    import numpy as np

    readings: list[dict[str, float]] = []
    sleeper = harness.metered(lambda: time.sleep(0.05) or 1.0, steps=10, into=readings)
    assert sleeper() == 1.0
    (sleep,) = readings
    assert sleep["wall_us"] == pytest.approx(5000, rel=0.5) and sleep["cpu_us"] < 1000
    assert sleep["voluntary_switches"] >= 0.1  # the sleep gave up the CPU at least once in the 10 steps
    toucher = harness.metered(lambda: float(np.ones(64 * 2**20 // 8).sum()), steps=1, into=readings)
    toucher()
    assert readings[1]["minor_faults"] >= 16  # 64 MiB of new pages faulted in on first write (2 MiB huge ones: 32)


def test_tf_data_parallel_rank_trains_like_the_plain_tf_loop() -> None:
    """One rank of the hand-written TF baseline (e_tf), alone in its gloo group, must do exactly the plain TF
    loop's work: its flat-bucket split/apply may not reorder or drop gradients."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    import numpy as np

    from benchmarks.baselines import PlainTFTrainer, TFDPWorker, batches_of
    from benchmarks.models import synthetic_data

    batches = batches_of(synthetic_data("lenet", 3 * 8, channels_last=True), 8)
    plain = PlainTFTrainer("lenet")
    plain.run(batches)
    rank = TFDPWorker(0, 1, harness.free_port(), "lenet", threads=1)
    rank.setup()
    try:
        losses = [rank.step(b["x"], b["y"]) for b in batches]
    finally:
        rank.shutdown()
    assert all(np.isfinite(losses))
    for ours, ref in zip(rank.model.trainable_variables, plain.model.trainable_variables, strict=True):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-4, atol=1e-6)


def test_paired_stall_is_the_extra_time_of_the_window_with_the_save(tmp_path) -> None:
    import time
    from types import SimpleNamespace

    from benchmarks.save_stall import StallBench

    started = []

    def start_save(kind: str):  # noqa: ANN202 - blocks 50 ms, then the "write" is done at once
        started.append(kind)
        time.sleep(0.05)
        return lambda: True

    fake = SimpleNamespace(start_save=start_save, fe_root=tmp_path)
    result = StallBench.paired_stall(fake, "fe_thread", lambda: time.sleep(0.001), window_steps=40, save_first=True)
    assert started == ["fe_thread"]  # one save, in the window that has it
    assert 0.04 <= result["stall_s"] <= 0.2 and result["write_inside_window"] == 1.0
    assert result["window_s"] >= 0.04


def test_step_probe_breakdown_splits_each_step_into_phases_that_add_up() -> None:
    from benchmarks import step_probe

    # Two steps of two replicas, stamps in ms: call, replicas' start/end, answers back. Step 0's replicas finished
    # their weight update after answering (at 9.5 and 11), step 1's before (finished == end).
    calls = [(0.0, 10.0), (12.0, 25.0)]
    rows = {0: [(1.0, 8.0, 6.0, 10, 2.0, 9.5), (13.0, 22.0, 8.0, 0, 1.0, 22.0)],
            1: [(2.0, 9.0, 7.0, 30, 1.0, 11.0), (14.0, 23.0, 9.0, 0, 0.0, 23.0)]}
    phases = step_probe.breakdown(calls, rows)
    assert phases["replica_tail"] == pytest.approx((2.0 + 0.0) / 2)  # last end -> last finished
    assert phases["replica_idle"] == pytest.approx(((13.0 - 9.5) + (14.0 - 11.0)) / 2)  # finished -> next start
    assert phases["to_replicas"] == pytest.approx((1.0 + 1.0) / 2)  # to the first replica's start
    assert phases["replica"] == pytest.approx((8.0 + 10.0) / 2)  # first start -> last end
    assert phases["back"] == pytest.approx((1.0 + 2.0) / 2)
    assert phases["driver"] == pytest.approx(2.0)  # answers of step 0 -> call of step 1
    assert phases["replica_cpu"] == pytest.approx((6.5 + 8.5) / 2)
    assert phases["replica_faults"] == pytest.approx((20 + 0) / 2)  # per replica and step
    assert phases["replica_allreduce"] == pytest.approx((1.5 + 0.5) / 2)
    assert step_probe.breakdown(calls, rows, last=1)["replica"] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="recorded"):
        step_probe.breakdown(calls, {0: rows[0][:1]})
    with pytest.raises(ValueError, match="out of order"):
        step_probe.breakdown([(5.0, 10.0)], {0: [(1.0, 8.0, 6.0, 0, 0.0, 8.0)]})  # a replica started before the call


def test_step_probe_hook_stamps_replica_steps_and_writes_them_per_epoch(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from benchmarks import step_probe
    from fe_ray.distributed.collective import TcpCollective, TorchCollective
    from fe_ray.distributed.replica import Replica

    # Stand-ins for the real methods, which need a running replica; monkeypatch restores the classes afterwards. The
    # step touches 8 MiB of fresh memory: ~2,048 page faults. An anonymous mapping of its own, because a bytearray
    # may come from heap memory the process has touched before (glibc raises its mmap threshold after an earlier
    # test freed large blocks). With "reduce" in its arguments it also runs a 20 ms stand-in all-reduce.
    def touch_fresh_memory(self: Replica, args: object) -> dict[str, object]:
        with mmap.mmap(-1, 8 << 20) as memory:
            for offset in range(0, len(memory), mmap.PAGESIZE):
                memory[offset] = 1
            if args is not None and "reduce" in args:
                TcpCollective.allreduce_sum(None, [])  # type: ignore[arg-type]
            return {"args": args, "touched": len(memory)}

    def answer_then_update(self: Replica, args: object) -> object:
        if args is None:
            return True
        # The stream's early answer: stamped when the answer is ready, and when the update after it is done.
        return StepReply({"args": args}, lambda: (TcpCollective.allreduce_sum(None, []), time.sleep(0.03)))

    monkeypatch.setattr(Replica, "step", touch_fresh_memory)
    monkeypatch.setattr(Replica, "step_early", answer_then_update)
    monkeypatch.setattr(Replica, "exit_context", lambda self: True)
    monkeypatch.setattr(TcpCollective, "allreduce_sum", lambda self, arrays: time.sleep(0.02))
    monkeypatch.setattr(TorchCollective, "allreduce_tensor_", TorchCollective.allreduce_tensor_)
    log = tmp_path / "steps.log"
    monkeypatch.setenv(step_probe.LOG_ENV, str(log))
    step_probe.install()

    class FakeReplica:
        rank = 0

    replica = FakeReplica()
    assert Replica.step(replica, None)["args"] is None  # a transport warm-up: passed through, not stamped
    assert Replica.step(replica, ("batch",))["args"] == ("batch",)
    Replica.step(replica, ("batch", "reduce"))
    Replica.step(replica, ("batch",))
    assert Replica.step_early(replica, None) is True  # not stamped either
    reply = Replica.step_early(replica, ("early",))
    assert isinstance(reply, StepReply) and reply.value == {"args": ("early",)}
    reply.then()
    assert not log.exists()  # nothing is written during the steps
    assert Replica.exit_context(replica) is True
    rows = step_probe.collect(log, replicas=1)
    assert list(rows) == [0] and len(rows[0]) == 4
    start, end, cpu, faults, allreduce, finished = rows[0][0]
    assert start <= end == finished and cpu >= 0  # answered after its work: no update follows
    assert faults >= 1_000
    assert allreduce == 0.0
    assert 0.02 <= rows[0][1][4] <= rows[0][1][1] - rows[0][1][0]  # the all-reduce's time, within its step's
    assert rows[0][2][4] == 0.0  # counted per step
    start, end, cpu, faults, allreduce, finished = rows[0][3]
    assert finished - end >= 0.05 and allreduce >= 0.02  # the update after the answer, its all-reduce included
    assert not log.exists()  # read and cleared for the next epoch
    with pytest.raises(TimeoutError, match="setup hook"):
        step_probe.collect(log, replicas=1, timeout_s=0.05)


def test_step_probe_hook_profiles_each_contexts_steps_when_asked(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import pstats

    from benchmarks import step_probe
    from fe_ray.distributed.collective import TcpCollective, TorchCollective
    from fe_ray.distributed.replica import Replica

    def busy_step(self: Replica, args: object) -> object:
        return sum(range(1000)) if args is not None else None

    monkeypatch.setattr(Replica, "step", busy_step)
    monkeypatch.setattr(Replica, "step_early", Replica.step_early)  # install() wraps it: restored afterwards
    monkeypatch.setattr(Replica, "exit_context", lambda self: True)
    for cls, name in ((TcpCollective, "allreduce_sum"), (TorchCollective, "allreduce_tensor_")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # install() wraps them: restored afterwards
    monkeypatch.setenv(step_probe.LOG_ENV, str(tmp_path / "steps.log"))
    monkeypatch.setenv(step_probe.PROFILE_ENV, str(tmp_path / "prof"))
    step_probe.install()

    class FakeReplica:
        rank = 1

    replica = FakeReplica()
    for context_steps in (3, 2):
        Replica.step(replica, None)  # the transport's warm-up is not profiled
        for _ in range(context_steps):
            Replica.step(replica, ("batch",))
        Replica.exit_context(replica)
        calls = {name: count for (_, _, name), (count, *_) in pstats.Stats(str(tmp_path / "prof.rank1")).stats.items()}
        assert calls["busy_step"] == context_steps  # this context's steps only


def test_build_variants_names_why_a_variant_cannot_run(monkeypatch) -> None:  # noqa: ANN001
    """Without Ray the Ray variants are skipped with the reason and the in-process ones still run; fe_ray's TF
    replica variants are left out on request."""
    monkeypatch.setattr(variants, "ray_unavailable", lambda: "ModuleNotFoundError: No module named 'ray'")
    cfg = {"model": "lenet", "device": "cpu", "threads": 1, "batch_size": 4, "steps": 1, "tf_distributed": False}
    built, skipped = variants.build_variants(cfg, "torch", {"a", "b", "c", "e"})
    assert set(built) == {"a", "b"}
    assert skipped == {"c": "ModuleNotFoundError: No module named 'ray'",
                       "e": "ModuleNotFoundError: No module named 'ray'"}
    monkeypatch.setattr(variants, "ray_unavailable", lambda: "")
    built, skipped = variants.build_variants(cfg, "tf", {"a", "c", "e"})
    assert set(built) == {"a_tf", "e_tf"}
    assert skipped == {"c_tf": "left out (--no-tf-distributed)"}


def test_gpu_wheels_slim_drops_the_java_jars_and_their_record_lines(tmp_path) -> None:  # noqa: ANN001
    import zipfile

    from benchmarks import gpu_wheels

    wheel = tmp_path / "ray-0-cp312-cp312-manylinux2014_x86_64.whl"
    raylet = zipfile.ZipInfo("ray/core/raylet")
    raylet.external_attr = 0o755 << 16  # an executable: must stay one
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("ray/__init__.py", "x = 1\n")
        zf.writestr(raylet, b"\x7fELF")
        zf.writestr("ray/jars/ray_dist.jar", b"j" * 1000)
        zf.writestr("ray-0.dist-info/RECORD", "ray/__init__.py,sha256=a,6\nray/core/raylet,sha256=b,4\n"
                                               "ray/jars/ray_dist.jar,sha256=c,1000\nray-0.dist-info/RECORD,,\n")
    gpu_wheels.slim(wheel)
    with zipfile.ZipFile(wheel) as zf:
        assert zf.namelist() == ["ray/__init__.py", "ray/core/raylet", "ray-0.dist-info/RECORD"]
        assert zf.read("ray/__init__.py") == b"x = 1\n"
        assert zf.getinfo("ray/core/raylet").external_attr >> 16 == 0o755
        assert "jars" not in zf.read("ray-0.dist-info/RECORD").decode()
        assert zf.testzip() is None


def test_every_variant_has_a_label_and_the_priority_variants_set_rays_niceness(monkeypatch) -> None:  # noqa: ANN001
    """Each variant the factory can build is named in the tables (a missing label ended a long run at its first
    print), and the priority variants put Ray's worker niceness into their actors' environment."""
    monkeypatch.setattr(variants, "ray_unavailable", lambda: "")
    cfg = {"model": "lenet", "device": "cpu", "threads": 1, "batch_size": 4, "steps": 1, "tf_distributed": True}
    built = {**variants.build_variants(cfg, "torch", None)[0], **variants.build_variants(cfg, "tf", None)[0]}
    assert set(built) - set(throughput.LABELS) == set()
    for key in ("c_nice15", "d_nice15", "c_nice15_tf", "d_nice15_tf"):
        assert built[key].env_vars == {"RAY_worker_niceness": "15"}, key
    for key in ("e_nice0", "e_nice0_tf"):
        assert built[key].env_vars == {"RAY_worker_niceness": "0"}, key
    for key in ("c_spin", "d_spin"):  # the replicas' stream polling; the driver's is set while they start
        assert built[key].spin_env == {"FE_RAY_STREAM_SPIN_US": str(variants.SPIN_US)}, key


def test_idle_gap_quick_times_steps_after_sleeping_after_polling_and_on_a_second_thread(
        tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert idle_gap.main(["--quick", "--model", "mlp", "--device", "cpu", "--gaps", "200"]) == 0
    payload = json.loads((tmp_path / "idle_gap_quick.json").read_text())
    assert set(payload["results"]) == {"none", "thread", "slept_200", "polled_200"}
    assert all(series["median"] > 0 and series["repeats"] == 2 for series in payload["results"].values())
    assert set(payload["ratios"]) == {"thread/none", "slept_200/none", "polled_200/none"}
    assert payload["ratios"]["thread/none"] > 0
    with pytest.raises(SystemExit):
        idle_gap.main(["--quick", "--gaps", "0"])


def test_step_gap_quick_times_both_loops_and_puts_torch_back(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import torch

    from fe_ray.backend import torch_step

    before = torch.autograd._engine_run_backward, torch_step._to_host
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert step_gap.main(["--quick", "--model", "mlp", "--device", "cpu", "--profile", "3"]) == 0
    assert (torch.autograd._engine_run_backward, torch_step._to_host) == before
    payload = json.loads((tmp_path / "step_gap_quick.json").read_text())
    for loop in ("a_sync", "b0"):
        assert len(payload["results"][loop]["model"]) == 2, loop
        # The model is called after the wait and the backward pass starts after the model call.
        assert all(0 < m < b for m, b in zip(payload["results"][loop]["model"], payload["results"][loop]["backward"]))
    assert set(payload["b0_over_a_sync_us"]) == {"model", "backward"}
    # The profile lists the Network's own functions (the step executor among them), and none of torch's.
    profile = payload["profile_b0_us_per_step"]
    assert any(key.startswith("backend/torch_step.py:") and key.endswith(" run_step") for key in profile), profile
    assert all(value >= 0 for value in profile.values()) and not any("torch/" in key for key in profile)


def test_step_gap_pairs_each_wait_with_the_first_model_call_and_backward_after_it() -> None:
    marks = [("model", 0), ("waited", 1000), ("model", 3000), ("backward", 7000), ("backward", 9000),
             ("waited", 10_000), ("waited", 11_000), ("model", 12_000), ("backward", 15_000)]
    assert step_gap.gaps(marks) == {"model": 1.5, "backward": 5.0}  # medians of (2, 1) and (6, 4) us
    assert all(value != value for value in step_gap.gaps([("model", 1)]).values())  # NaN without a wait


def test_idle_gap_waits_sleep_or_poll_for_the_gap() -> None:
    import socket
    import time

    idle, other = socket.socketpair()
    try:
        for wait in (idle_gap.sleep_for, idle_gap.poll_for):
            start = time.perf_counter()
            wait(idle, 0.02)
            assert time.perf_counter() - start >= 0.019, wait.__name__
    finally:
        idle.close()
        other.close()
