"""The benchmark variants' resource requests (no Ray started)."""

from __future__ import annotations

import pytest

from benchmarks import plain_variants, variants


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


def test_every_torch_variant_of_one_cuda_run_fits_one_gpu_together() -> None:
    # The device suite's twelve LeNet variants held 10 actors at 1/8 GPU each; the ninth waited for a GPU share
    # until the suite stopped the whole part (H200, 2026-11-26). All torch variants at once must now fit.
    cfg = {"device": "cuda", "threads": 16, "replicas": 2}
    built, skipped = variants.build_variants(cfg, "torch", None)
    assert not skipped  # Ray is installed here: every variant is built (none is started)
    held = sum(v.ray_actors() for v in built.values())
    assert held > 8  # the run that hung held more than 1/8 of a GPU's worth
    plain_variants.check_gpu_shares(list(built.values()), "cuda")
    assert held * variants.GPU_SHARE <= 1


def test_variants_asking_for_more_than_one_gpu_are_refused_before_any_starts() -> None:
    cfg = {"device": "cuda", "threads": 16, "replicas": 2}
    many = [plain_variants.GlooDP(f"e{i}", cfg) for i in range(int(1 / variants.GPU_SHARE) // 2 + 1)]
    with pytest.raises(ValueError, match=r"GPU actors .* more than one GPU: e0 \(2\)"):
        plain_variants.check_gpu_shares(many, "cuda")
    plain_variants.check_gpu_shares(many, "cpu")  # no GPU shares on the CPU
