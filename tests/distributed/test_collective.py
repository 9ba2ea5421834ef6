"""The framework-neutral TCP all-reduce and the TF gradient reducer, without Ray."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from fe_ray.distributed.collective import TcpCollective
from fe_ray.distributed.errors import CollectiveError
from fe_ray.distributed.reducers import StepWeights, make_grad_reducer


def run_ranks(world: int, body: Any, timeout_s: float = 10.0, ranks: list[TcpCollective] | None = None) -> list[Any]:
    """Run ``body(collective)`` on ``world`` connected TCP ranks (threads); return results or exceptions."""
    ranks = ranks or [TcpCollective(rank, world, timeout_s=timeout_s) for rank in range(world)]
    address = ranks[0].listen("127.0.0.1")
    results: list[Any] = [None] * world

    def main(rank: int) -> None:
        try:
            ranks[rank].connect(address)
            results[rank] = body(ranks[rank])
        except Exception as err:  # noqa: BLE001 - returned to the test
            results[rank] = err
        finally:
            ranks[rank].close()

    threads = [threading.Thread(target=main, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.mark.timeout(30)
def test_tcp_allreduce_sums_identically_on_every_rank() -> None:
    def body(coll: TcpCollective) -> list[np.ndarray]:
        first = coll.allreduce_sum([np.full((2, 3), coll.rank + 1, np.float32), np.arange(4, dtype=np.float32)])
        second = coll.allreduce_sum([np.array([0.1 * coll.rank], np.float32)])  # sequence numbers advance
        return first + second

    results = run_ranks(3, body)
    for result in results:
        np.testing.assert_array_equal(result[0], np.full((2, 3), 6.0))
        np.testing.assert_array_equal(result[1], np.arange(4) * 3.0)
        np.testing.assert_array_equal(result[2], results[0][2])  # bit-identical on all ranks
    np.testing.assert_allclose(results[0][2], [0.3], rtol=1e-6)


@pytest.mark.timeout(60)
def test_tcp_allreduce_pipelines_large_buffers_chunk_by_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Buffers over one chunk stream through the hub chunk by chunk (last chunk partial): same sums, same bits."""
    from fe_ray.distributed import collective

    monkeypatch.setattr(collective, "CHUNK_BYTES", 4 * 1000)
    monkeypatch.setattr(collective, "PIPELINE_MIN_BYTES", 4 * 2000)  # the first call pipelines, the second not
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(10_250).astype(np.float32) for _ in range(3)]  # 10.25 chunks of 1000 floats
    expected = (values[0] + values[1]) + values[2]  # the hub's rank order

    def body(coll: TcpCollective) -> list[np.ndarray]:
        first = coll.allreduce_sum([values[coll.rank][:250].reshape(50, 5), values[coll.rank][250:]])
        second = coll.allreduce_sum([np.full(3, coll.rank, np.float32)])  # small again: the one-chunk path
        return [*first, *second]

    results = run_ranks(3, body)
    for result in results:
        assert not isinstance(result, Exception), result
        np.testing.assert_array_equal(result[0].ravel(), expected[:250])
        np.testing.assert_array_equal(result[1], expected[250:])
        np.testing.assert_array_equal(result[2], [3.0, 3.0, 3.0])


@pytest.mark.timeout(30)
def test_tcp_allreduce_reports_a_vanished_or_silent_peer() -> None:
    def body(coll: TcpCollective) -> Any:
        if coll.rank == 1:
            return "left"  # closes its socket without taking part
        return coll.allreduce_sum([np.ones(3, np.float32)])

    start = time.monotonic()
    results = run_ranks(2, body)
    assert isinstance(results[0], CollectiveError) and "rank 1" in str(results[0])
    assert time.monotonic() - start < 5

    def silent(coll: TcpCollective) -> Any:
        if coll.rank == 1:
            time.sleep(2.0)  # alive but never sends
            return "slept"
        return coll.allreduce_sum([np.ones(3, np.float32)])

    results = run_ranks(2, silent, timeout_s=0.5)
    assert isinstance(results[0], CollectiveError) and "within" in str(results[0])


@pytest.mark.timeout(30)
def test_abort_wakes_an_allreduce_blocked_on_a_live_peer() -> None:
    """A replica told that its peer's step failed leaves an all-reduce the peer will never join, at once."""
    ranks = [TcpCollective(rank, 2, timeout_s=20.0) for rank in range(2)]
    entered = threading.Event()

    def body(coll: TcpCollective) -> Any:
        if coll.rank == 1:
            entered.wait(5)
            time.sleep(0.3)  # rank 0 is blocked inside allreduce_sum by now
            ranks[0].abort()  # what Replica.abort_collective does on rank 0's main thread
            time.sleep(2.0)  # alive and connected, but never joins
            return "failed its step"
        entered.set()
        return coll.allreduce_sum([np.ones(3, np.float32)])

    start = time.monotonic()
    results = run_ranks(2, body, ranks=ranks)
    assert isinstance(results[0], CollectiveError) and "peer replica failed" in str(results[0])
    assert time.monotonic() - start < 5  # not the 20 s collective timeout


@pytest.mark.timeout(30)
def test_abort_wakes_a_spoke_while_its_sender_thread_is_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spoke streaming a buffer larger than the socket buffers to a hub that never reads: abort ends both the
    receiving call and its sender thread at once."""
    from fe_ray.distributed import collective

    monkeypatch.setattr(collective, "CHUNK_BYTES", 64 * 1024)
    monkeypatch.setattr(collective, "PIPELINE_MIN_BYTES", 64 * 1024)
    ranks = [TcpCollective(rank, 2, timeout_s=20.0) for rank in range(2)]
    entered = threading.Event()

    def body(coll: TcpCollective) -> Any:
        if coll.rank == 0:
            entered.wait(5)
            time.sleep(0.5)  # rank 1's sender is blocked in sendall by now: nobody reads its 32 MB
            ranks[1].abort()
            time.sleep(2.0)
            return "never joined"
        entered.set()
        return coll.allreduce_sum([np.ones(8 << 20, np.float32)])

    before = {thread.name for thread in threading.enumerate()}
    start = time.monotonic()
    results = run_ranks(2, body, ranks=ranks)
    assert isinstance(results[1], CollectiveError) and "peer replica failed" in str(results[1])
    assert time.monotonic() - start < 5  # not the 20 s collective timeout
    assert not [t for t in threading.enumerate() if t.name == "fe_ray-tcp-send" and t.name not in before]


@pytest.mark.timeout(60)
def test_tf_reducer_weights_gradients_in_a_static_graph() -> None:
    tf = pytest.importorskip("tensorflow")
    weights = StepWeights(n_local=3, n_total=4)
    reduce = make_grad_reducer("tf", TcpCollective(0, 1), weights)

    @tf.function
    def step(gradient: Any) -> Any:
        return reduce(None, [gradient, None])

    out = step(tf.constant([[1.0, 2.0]]))
    np.testing.assert_allclose(out[0].numpy(), [[0.75, 1.5]])
    assert out[1] is None
    weights.n_local = 1  # read at run time, not frozen into the traced graph
    np.testing.assert_allclose(step(tf.constant([[1.0, 2.0]]))[0].numpy(), [[0.25, 0.5]])
    assert step.experimental_get_tracing_count() == 1


@pytest.mark.timeout(60)
def test_torch_reducer_weights_gradients_and_keeps_a_weight_no_rank_reached_none() -> None:
    """A weight the step did not reach has no gradient (None); with one rank, nobody reached it, so it stays None
    (UpdateOp leaves it alone) while the others are weighted as usual."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(2, 1)  # weight (1, 2), bias (1,)
    reduce = make_grad_reducer("torch", TcpCollective(0, 1), StepWeights(n_local=3, n_total=4))
    out = reduce(model, [torch.tensor([[1.0, 2.0]]), None])
    np.testing.assert_allclose(out[0].numpy(), [[0.75, 1.5]])
    assert out[1] is None
    out = reduce(model, [torch.tensor([[4.0, 8.0]]), torch.tensor([2.0])])
    np.testing.assert_allclose(out[0].numpy(), [[3.0, 6.0]])
    np.testing.assert_allclose(out[1].numpy(), [1.5])
    with pytest.raises(ValueError, match=r"count \(1\) is not its weight count \(2\)"):
        reduce(model, [None])


@pytest.mark.timeout(60)
def test_torch_reducer_reads_nothing_back_when_this_rank_reached_every_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the summed reached-flags back (``tolist``) makes the host wait for the GPU mid-step; with every local
    gradient present every weight is reached anyway, so the reducer must not read them. With a None gradient it must
    (the flags decide whether the weight stays None)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(2, 1)  # weight (1, 2), bias (1,)
    reduce = make_grad_reducer("torch", TcpCollective(0, 1), StepWeights(n_local=1, n_total=2))
    reads: list[int] = []
    tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda tensor: reads.append(tensor.numel()) or tolist(tensor))
    out = reduce(model, [torch.tensor([[2.0, 4.0]]), torch.tensor([6.0])])
    np.testing.assert_allclose(out[0].numpy(), [[1.0, 2.0]])
    np.testing.assert_allclose(out[1].numpy(), [3.0])
    assert reads == []
    out = reduce(model, [torch.tensor([[2.0, 4.0]]), None])
    assert reads == [2] and out[1] is None  # the two flags, read once


@pytest.mark.timeout(60)
def test_torch_reducer_a_weight_one_rank_reached_is_reduced_on_every_rank() -> None:
    """Data-dependent paths (an expert no sample of one slice was routed to): rank 0's step misses the bias, rank
    1's reaches it. Both must get the same reduced gradient, so both update it; a weight no rank reached stays None
    on both."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(2, 1)  # weight (1, 2), bias (1,)
    local = {0: [torch.tensor([[1.0, 2.0]]), None], 1: [torch.tensor([[5.0, 6.0]]), torch.tensor([4.0])]}

    def body(coll: TcpCollective) -> Any:
        reduce = make_grad_reducer("torch", coll, StepWeights(n_local=2, n_total=4))
        reached = reduce(model, local[coll.rank])
        missed = reduce(model, [local[coll.rank][0], None])
        return [g if g is None else g.numpy() for g in reached], missed[1]

    for reached, missed in run_ranks(2, body):
        np.testing.assert_allclose(reached[0], [[3.0, 4.0]])
        np.testing.assert_allclose(reached[1], [2.0])  # (0 * 2 + 4 * 2) / 4: rank 0 counts as a zero gradient
        assert missed is None


@pytest.mark.timeout(60)
def test_tf_reducer_offers_the_loss_share_and_sums_prescaled_gradients_in_a_static_graph() -> None:
    """The loss-scaling path: UpdateOp weights the loss by loss_share() (a graph op reading this step's weights)
    and the reducer then only sums; graph_safe_reducer carries both into a traced step."""
    tf = pytest.importorskip("tensorflow")
    from fe_ray.backend.tf_step import graph_safe_reducer

    weights = StepWeights(n_local=3, n_total=4)
    reduce = graph_safe_reducer(make_grad_reducer("tf", TcpCollective(0, 1), weights))

    @tf.function
    def step(gradient: Any) -> Any:
        return reduce.loss_share(), reduce(None, [gradient], prescaled=True)[0], reduce(None, [gradient])[0]

    share, summed, weighted = step(tf.constant([[1.0, 2.0]]))
    assert float(share) == 0.75
    np.testing.assert_allclose(summed.numpy(), [[1.0, 2.0]])  # one rank: the sum is the gradient itself
    np.testing.assert_allclose(weighted.numpy(), [[0.75, 1.5]])
    weights.n_local = 1
    assert float(step(tf.constant([[1.0, 2.0]]))[0]) == 0.25
    assert step.experimental_get_tracing_count() == 1


@pytest.mark.timeout(60)
def test_torch_reducer_prescaled_sum_equals_the_weighted_mean_on_two_ranks() -> None:
    """Rank 0 holds 1 of 4 samples, rank 1 the other 3: the gradients of the share-weighted losses, summed, are the
    slice-weighted mean of the plain ones (the global batch gradient)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(2, 1, bias=False)
    local = {0: [1.0, 2.0], 1: [5.0, 6.0]}  # gradients of each rank's slice-mean loss
    n_local = {0: 1, 1: 3}

    def body(coll: TcpCollective) -> Any:
        reduce = make_grad_reducer("torch", coll, StepWeights(n_local=n_local[coll.rank], n_total=4))
        share = reduce.loss_share()
        weighted = reduce(model, [torch.tensor([local[coll.rank]])])[0]
        summed = reduce(model, [share * torch.tensor([local[coll.rank]])], prescaled=True)[0]
        return share, weighted.numpy(), summed.numpy()

    results = run_ranks(2, body)
    expected = [[(1.0 * 1 + 5.0 * 3) / 4, (2.0 * 1 + 6.0 * 3) / 4]]
    assert [r[0] for r in results] == [0.25, 0.75]
    for _, weighted, summed in results:
        np.testing.assert_allclose(weighted, expected)
        np.testing.assert_allclose(summed, expected)
