"""The benchmark variants' resource requests (no Ray started)."""

from __future__ import annotations

from benchmarks import variants


def test_cuda_variants_of_one_run_fit_one_gpu_together() -> None:
    # Every variant is prepared before any is measured, so the GPU shares of c (1 replica), d (2) and e (2 ranks),
    # plus the plain loop in an actor, must fit one GPU at once; with 1/N per replica they asked for 3 GPUs and the
    # first H200 run could not place d.
    cfg = {"device": "cuda", "threads": 16}
    shares = [variants.distributed_kwargs(cfg, n)["resources_per_replica"]["GPU"] * n for n in (1, 2)]
    shares += [2 * variants.gpu_share("cuda"), variants.gpu_share("cuda")]  # e's two ranks, a_malloc's actor
    assert 0 < sum(shares) <= 1.0
    # A fraction below one GPU per replica is what makes fe_ray pick gloo, as the hand-written ranks use.
    assert variants.distributed_kwargs(cfg, 1)["resources_per_replica"]["GPU"] < 1


def test_cpu_variants_ask_for_no_gpu() -> None:
    kwargs = variants.distributed_kwargs({"device": "cpu", "threads": 4}, 2)
    assert kwargs["resources_per_replica"] == {"CPU": 2}
    assert variants.gpu_share("cpu") == 0
