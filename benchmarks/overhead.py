"""Per-step overhead breakdown of fe_ray's distributed path (RayNetwork), phase by phase.

fe_ray's coordinator exposes no per-phase timers, so each phase is timed from outside by calling the
coordinator's own pieces (``split_for_replicas``, its step stream, ``ReplicaGroup.call``, ``merge_outputs``, the
Estimator's trace events) or, where a phase happens inside a replica, the equivalent primitive on hand-written
actors with the same resources (a step stream that answers at once, a gloo ``all_reduce`` of the gradient size,
the plain compute of one slice). All phases alternate in one run; medians of per-op means are reported:

    full_step       RayNetwork.run_step on one batch (inside a train context): everything below together
    slice           split_for_replicas(batch, keys, N)           (driver)
    stream_rtt      an empty round trip over fe_ray's own step streams to its N replicas (the default transport)
    stream_slices   the slices sent over fe_ray's step stream (``StepStream`` / ``StepServer``) to plain actors
                    that answer each with outputs of the real size at once: pickling, the TCP transfer both ways,
                    the wake-ups and unpickling of a step, without its work
    stream_busy     the same, with actors that answer after sleeping as long as ``compute``, minus that sleep: the
                    round trip of a step that lasts a training step (on VMs idle CPUs wake up slowly)
    compute         plain torch step (fwd+bwd+Adam) on one slice in an actor with threads // N threads
    compute_lockstep  the same steps started together on all ranks (a barrier before each), as a synchronous
                    data-parallel loop's are: the mean over steps of the slowest rank's time; less ``compute``, the
                    wait for the straggler that a step pays before its all-reduce can finish
    compute_split   (TF only) the plain step split as a data-parallel TF step must be: gradients out of the graph
                    as one host bucket, applied by a second ``tf.function`` (no all-reduce)
    replica_local   fe_ray's own ``Replica.run_step`` on one read-only slice, run in the driver process (no Ray)
                    with threads // N threads: compute plus fe_ray's replica-side Python (ops, ``writable``
                    copy, outputs to numpy); replica_local - compute is that Python's cost. (TF: with the
                    driver's thread budget, as TF's thread pools cannot change once started; same as a
                    replica's for --replicas 1)
    allreduce       gloo all_reduce of the gradient's element count, timed inside the actors (TF: fe_ray's
                    TCP collective, which TF replicas use)
    merge           merge_outputs of N replicas' outputs          (driver)
    traces          an Estimator's per-step driver work around run_step: step counters, on_batch_begin and
                    on_batch_end of its default traces (TrainEssential, Logger every 100 steps, printed into a
                    buffer) on the batch and the merged outputs (the network has no pops; a pop runs on the
                    driver after merge at its own in-process cost)
    pipeline        one batch from fe.Pipeline's loader           (driver; in fit the replicas' step overlaps it)

The other transports' phases (``step_transport="calls"``, and what the stream replaced):

    put             ray.put of every slice                        (driver -> object store)
    rtt_fe          ReplicaGroup.call("ping"): submit + wait loop to all N replicas, empty payload
    rtt_raw         ray.get([actor.noop.remote() ...]) on plain actors
    call_busy       the slices sent as the calls transport sends them (inline up to Ray's inline size, else put)
                    to plain actors whose method sleeps as long as ``compute``, minus that sleep
    call_slices     ray.put of the slices + ray.get([actor.noop.remote(slice_ref) ...]): put, round trip and
                    resolving the slice in the actor

``unaccounted`` = full_step - (slice + stream_busy + compute_lockstep + allreduce + merge): replica-side Python
(context, ``writable`` copies, to_numpy of outputs, the UpdateOp's gradient copies), the reducer's extra tensor ops,
and scheduling noise.

``--framework tf`` times the same phases for fe_ray's TF path (plain ``tf.function`` step as the compute).

Run: ``python -m benchmarks.overhead [--framework torch|tf] [--model lenet|resnet] [--replicas 2] [--quick]``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from typing import Any

import numpy as np

from benchmarks import harness
from benchmarks.harness import per_op
from benchmarks.models import MODELS, synthetic_data

DEFAULT_BATCH = {"lenet": 32, "resnet": 64}


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="lenet")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--iters", type=int, default=0, help="ops per phase per repeat")
    parser.add_argument("--framework", choices=("torch", "tf"), default="torch")
    args = parser.parse_args(argv)
    harness.set_process_malloc(args.glibc_defaults)
    tf_mode = args.framework == "tf"
    if tf_mode:
        import tensorflow  # noqa: F401 - set_thread_budget configures TF only once it is imported
    threads = args.threads or harness.available_cores()
    harness.set_thread_budget(threads)
    device, note = harness.resolve_device(args.device)
    if note:
        print(note)
    n = args.replicas
    batch_size = args.batch_size or DEFAULT_BATCH[args.model]
    iters = args.iters or (5 if args.quick else (40 if args.model == "lenet" else 5))
    repeats = args.repeats or (2 if args.quick else 5)
    per_threads = max(1, threads // n)

    ray = harness.init_ray(max(8, 4 * threads))
    import fe_ray as fe
    from benchmarks.baselines import DPWorker, TFDPWorker, batches_of
    from benchmarks.variants import fe_network, gpu_share
    from fe_ray.distributed.batching import merge_outputs, slice_nbytes, split_for_replicas
    from fe_ray.distributed.coordinator import INLINE_SLICE_BYTES
    from fe_ray.distributed.step_stream import StepStream

    cfg = {"model": args.model, "device": device, "threads": threads}
    data = synthetic_data(args.model, batch_size * 8, channels_last=tf_mode)
    batches = batches_of(data, batch_size)
    batch = batches[0]

    # fe_ray RayNetwork, started and warmed up.
    network, _ = fe_network(cfg, args.framework, n)
    network.start()
    group = network._group()  # noqa: SLF001 - benchmark instrumentation from outside
    fe_stream = group._threaded  # noqa: SLF001 - its step stream (None if it fell back to actor calls)
    if not isinstance(fe_stream, StepStream):
        raise RuntimeError(f"fe_ray's replicas run without a step stream ({type(fe_stream).__name__}): the default "
                           "transport's phases cannot be timed")
    # Hand-written actors with the same resources, for the in-replica primitives.
    port = harness.free_port()
    gpus = gpu_share(device)
    if tf_mode:
        remote = ray.remote(num_cpus=per_threads)(TFDPWorker)
        workers = [remote.remote(r, n, port, args.model, per_threads) for r in range(n)]
    else:
        remote = ray.remote(num_cpus=per_threads, num_gpus=gpus)(DPWorker)
        workers = [remote.remote(r, n, port, args.model, per_threads, device) for r in range(n)]
    ray.get([w.setup.remote() for w in workers], timeout=harness.REMOTE_TIMEOUT_S)
    if tf_mode:  # the all-reduce phase times what a TF replica uses: fe_ray's TCP collective (not the baseline's gloo)
        address = ray.get(workers[0].open_fe_collective.remote(), timeout=60)
        ray.get([w.join_fe_collective.remote(address) for w in workers], timeout=60)
    grad_numel = ray.get(workers[0].num_grad_params.remote(), timeout=60)
    node_ip = ray.util.get_node_ip_address()
    echo = StepStream(ray.get([w.open_echo_stream.remote(node_ip, 60.0) for w in workers], timeout=60), 60.0)
    per = batch_size // n

    keys: set[str] = set()
    with network(mode="train", epoch=1, desired_output_keys={"ce"}):
        keys = set(network.ctx_gpu_inputs)
        for b in batches[:3]:
            network.run_step(b)
    slices, n_local, _ = split_for_replicas(batch, keys, n)
    local_replica = _local_replica(cfg, args.framework)
    frozen = {key: _read_only(value) for key, value in slices[0].items()}
    results = [{"y_pred": np.random.rand(k, 10).astype(np.float32), "ce": np.float32(2.3)} for k in n_local]
    pipeline = fe.Pipeline(train_data=_dataset(data), batch_size=batch_size)
    estimator = fe.Estimator(pipeline=pipeline, network=network, epochs=1)
    estimator._prepare_traces(["train"])  # noqa: SLF001 - as fit does before its first epoch
    system = estimator.system
    system.mode, system.epoch_idx = "train", 1
    batch_traces = estimator._traces("train", 1, "")  # noqa: SLF001
    step_result = {**batch, **merge_outputs(results, n_local)[0]}  # what run_step hands the traces

    def full_step() -> float:
        with network(mode="train", epoch=1, desired_output_keys={"ce"}):
            network.run_step(batch)  # warm (first step of a context may do extra work)
            return per_op(lambda: network.run_step(batch), iters)

    def slice_() -> float:
        return per_op(lambda: split_for_replicas(batch, keys, n), iters)

    def stream_rtt() -> float:
        return per_op(lambda: fe_stream.run([None] * n, 60.0), iters)

    def stream_slices() -> float:
        return per_op(lambda: echo.run(slices, 60.0), iters)

    def stream_busy() -> float:
        return per_op(lambda: echo.run([("hold", hold_s, p) for p in slices], 60.0), iters) - hold_s

    def traces() -> float:
        def once() -> None:
            system.update_global_step()
            system.update_batch_idx()
            estimator._run_event("on_batch_begin", batch_traces, batch)  # noqa: SLF001
            estimator._run_event("on_batch_end", batch_traces, step_result)  # noqa: SLF001

        with contextlib.redirect_stdout(io.StringIO()):  # the Logger's line every 100 steps
            return per_op(once, iters)

    def put() -> float:
        return per_op(lambda: [ray.put(p) for p in slices], iters)

    def rtt_fe() -> float:
        return per_op(lambda: group.call("ping", timeout_s=60), iters)

    def rtt_raw() -> float:
        return per_op(lambda: ray.get([w.noop.remote() for w in workers], timeout=60), iters)

    def call_busy() -> float:
        def once() -> None:
            sent = [p if slice_nbytes(p) <= INLINE_SLICE_BYTES else ray.put(p) for p in slices]
            ray.get([w.hold.remote(hold_s, p) for w, p in zip(workers, sent)], timeout=60)
        return per_op(once, iters) - hold_s

    def call_slices() -> float:
        def once() -> None:
            refs = [ray.put(p) for p in slices]
            ray.get([w.noop.remote(ref) for w, ref in zip(workers, refs)], timeout=60)
        return per_op(once, iters)

    def compute() -> float:
        return max(ray.get([w.compute_time.remote(per, iters) for w in workers], timeout=harness.REMOTE_TIMEOUT_S))

    def replica_local() -> float:
        def once() -> None:
            _checked(local_replica.run_step(frozen, n_local[0], n_local[0]))

        if tf_mode:  # TF's thread pools are fixed per process: the driver's budget (= the replica's when n=1)
            return per_op(once, iters)
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(per_threads)
        try:
            return per_op(once, iters)
        finally:
            torch.set_num_threads(before)

    def compute_lockstep() -> float:
        per_rank = ray.get([w.lockstep_times.remote(per, iters) for w in workers],
                           timeout=harness.REMOTE_TIMEOUT_S)
        return float(np.mean([max(step) for step in zip(*per_rank)]))

    def compute_split() -> float:
        return max(ray.get([w.split_compute_time.remote(per, iters) for w in workers],
                           timeout=harness.REMOTE_TIMEOUT_S))

    def allreduce() -> float:
        return max(ray.get([w.allreduce_time.remote(grad_numel, iters) for w in workers],
                           timeout=harness.REMOTE_TIMEOUT_S))

    def merge() -> float:
        return per_op(lambda: merge_outputs(results, n_local), iters)

    def pipe() -> float:
        with pipeline(mode="train", epoch=1, track=False) as loader:
            it = iter(loader)
            next(it)
            start = time.perf_counter()
            count = 0
            for _ in range(min(iters, 6)):
                next(it)
                count += 1
            return (time.perf_counter() - start) / count

    phases = {"full_step": full_step, "slice": slice_, "stream_rtt": stream_rtt, "stream_slices": stream_slices,
              "stream_busy": stream_busy, "compute": compute, "compute_lockstep": compute_lockstep,
              "replica_local": replica_local,
              "allreduce": allreduce, "merge": merge, "traces": traces, "pipeline": pipe,
              "put": put, "rtt_fe": rtt_fe, "rtt_raw": rtt_raw, "call_busy": call_busy, "call_slices": call_slices}
    if tf_mode:
        phases["compute_split"] = compute_split
    print(f"== overhead: {args.framework} {args.model} batch={batch_size} replicas={n} threads/replica={per_threads} "
          f"grad elements={grad_numel:,} iters/phase={iters} repeats={repeats}")
    hold_s = compute()  # how long stream_busy's and call_busy's steps last
    for fn in phases.values():  # warm-up
        fn()
    series = harness.alternate(phases, repeats, "s", higher_is_better=False, quiet_wait_s=args.wait_quiet)
    med = {k: s.median for k, s in series.items()}
    accounted = ["slice", "stream_busy", "compute_lockstep", "allreduce", "merge"]
    unaccounted = med["full_step"] - sum(med[k] for k in accounted)
    rows = []
    for key in phases:
        rows.append([key, med[key] * 1e6, 100 * med[key] / med["full_step"], len(series[key].values),
                     f"{100 * series[key].spread():.0f}%"])
    rows.append(["unaccounted", unaccounted * 1e6, 100 * unaccounted / med["full_step"], "-", "-"])
    skew = med["compute_lockstep"] - med["compute"]
    rows.append(["straggler wait (compute_lockstep - compute)", skew * 1e6, 100 * skew / med["full_step"], "-", "-"])
    print(harness.format_table(rows, ["phase", "median us/step", "% of full_step", "n", "spread"]))
    print("unaccounted = full_step - (" + " + ".join(accounted) + "); put, rtt_*, call_* are the calls transport's "
          "(step_transport='calls'); traces and pipeline run on the driver outside run_step.")
    if med["full_step"] > med["compute"]:
        beyond = med["full_step"] - med["compute"]
        print(f"full_step - compute = {beyond * 1e6:,.0f} us, of which stream_busy (fe_ray's step stream for a step "
              f"of that length) = {med['stream_busy'] * 1e6:,.0f} us ({100 * med['stream_busy'] / beyond:.0f}%); a "
              f"plain Ray actor call lasting one step (call_busy) would be {med['call_busy'] * 1e6:,.0f} us.")
    echo.close()
    for w in workers:
        ray.kill(w)
    network.shutdown()
    payload = {"benchmark": "overhead", "environment": harness.environment(threads, device), "args": vars(args),
               "config": {"model": args.model, "batch_size": batch_size, "replicas": n,
                          "threads_per_replica": per_threads, "grad_elements": grad_numel, "iters": iters},
               "series": {k: s.to_json() for k, s in series.items()},
               "median_us": {k: v * 1e6 for k, v in med.items()}, "unaccounted_us": unaccounted * 1e6}
    name = "overhead" + ("_tf" if tf_mode else "") + ("" if args.model == "lenet" else f"_{args.model}")
    name += ("_cuda" if device == "cuda" else "") + ("_quick" if args.quick else "")
    harness.save_results(name, payload, args)
    return 0


def _local_replica(cfg: dict[str, Any], framework: str) -> Any:
    """A configured single-rank fe_ray Replica (the plain class, not an actor) of the benchmark network."""
    from benchmarks.variants import fe_network
    from fe_ray.distributed.replica import Replica
    from fe_ray.distributed.serialization import check_picklable

    network, _ = fe_network(cfg, framework, None)
    replica = Replica(0, 1, framework, check_picklable(list(network.ops), network.models))
    _checked(replica.setup())
    _checked(replica.configure("train", 1, "", {"ce"}, False, False, None))
    return replica


def _checked(result: Any) -> Any:
    """A Replica method's result, raising the failure it returns instead of raising."""
    from fe_ray.distributed.errors import RemoteFailure

    if isinstance(result, RemoteFailure):
        raise result.to_exception()
    return result


def _read_only(value: Any) -> Any:
    """A read-only copy of an array, as a replica receives slices from Ray."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
    return value


def _dataset(data: dict[str, np.ndarray]) -> Any:
    from fe_ray.dataset import NumpyDataset

    return NumpyDataset(data)


if __name__ == "__main__":
    sys.exit(main())
