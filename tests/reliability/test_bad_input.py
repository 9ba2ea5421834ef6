"""Bad input gets a clear error naming the problem and the fix: in-process, and on a distributed network."""

from __future__ import annotations

import io
import json
import os
import threading
import timeit
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.distributed import PlacementError
from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.state_files import CheckpointError, read_checkpoint
from fe_ray.op.tensorop import LambdaOp
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.slicer import ChunkSlicer
from fe_ray.trace import Accuracy, RestoreWizard
from tests.helpers.models import linear
from tests.reliability.helpers import build_run, wait_for, weights_of


def linear_network(**kwargs: Any) -> Any:
    model = linear("torch", lr=0.05)
    return fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                       MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                       UpdateOp(model=model, loss_name="mse")], **kwargs)


def batch(size: int = 4, y_size: int | None = None) -> dict[str, np.ndarray]:
    return {"x": np.ones((size, 3), np.float32), "y": np.ones((y_size or size, 1), np.float32)}


def run_step(network: Any, data: dict[str, Any], mode: str = "train") -> dict[str, Any]:
    with network(mode=mode, epoch=1):
        return network.run_step(data)


# ------------------------------------------------------------------------------------------- modes
@pytest.mark.parametrize("distributed", [False, True])
def test_unknown_mode_names_valid_modes(distributed: bool) -> None:
    network = linear_network(num_replicas=2) if distributed else linear_network()  # nothing starts: fails first
    with pytest.raises(ValueError, match=r"Unknown mode 'training'; valid modes are \['train', 'eval', 'test', "
                                         r"'infer'\]"):
        network(mode="training", epoch=1)
    with pytest.raises(ValueError, match=r"Unknown mode\(s\) \['trian'\]; valid modes are .*'!'"):
        Accuracy("y", "y_pred", mode="trian")


# ------------------------------------------------------------------------------------------- missing keys
def test_missing_key_of_a_network_op_is_named_at_warmup() -> None:
    estimator, _ = build_run()
    estimator.network.ops[0].inputs = ["image"]  # the ModelOp now reads a key no dataset produces
    estimator.network.ops[0].in_list = True
    with pytest.raises(KeyError, match=r"Key 'image' needed by ModelOp is missing from the batch in mode 'train'; "
                                       r"available keys: \['x', 'y'\]"):
        estimator.fit()


@pytest.mark.parametrize("distributed", [False, True])
def test_missing_key_of_a_trace_is_named_at_warmup(ray_session: None, distributed: bool) -> None:
    kwargs = {"num_replicas": 2} if distributed else {}
    estimator, _ = build_run(traces=[Accuracy("y", "y_predicted", mode="train")], **kwargs)
    try:
        with pytest.raises(ValueError, match=r"Warmup found missing keys: Accuracy needs key 'y_predicted' \(mode "
                                             r"'train', epoch 1\).*Produce them in the Pipeline ops, the Network ops"):
            estimator.fit()
    finally:
        getattr(estimator.network, "shutdown", lambda: None)()


# ------------------------------------------------------------------------------------------- batches and slicers
@pytest.mark.parametrize("distributed", [False, True])
def test_ragged_batch_and_disagreeing_slicers(ray_session: None, distributed: bool) -> None:
    kwargs = {"num_replicas": 2} if distributed else {}
    network = linear_network(**kwargs)
    sliced = linear_network(slicers=[ChunkSlicer(n_chunks=2, slice="x", unslice="y_pred"),
                                     ChunkSlicer(n_chunks=3, slice="y", unslice="mse")], **kwargs)
    try:
        # With replicas fe_ray cannot tell which key to slice; in process it runs as FastEstimator does, and the
        # loss meets the mismatch.
        with pytest.raises(ValueError if distributed else RuntimeError,
                           match=r"Ragged batch: .*\{'x': 4, 'y': 5\}.*same leading" if distributed else "size"):
            run_step(network, batch(4, y_size=5))
        with pytest.raises(KeyError, match=r"Key 'y' needed by MeanSquaredError is missing"):
            run_step(network, {"x": batch()["x"]})
        with pytest.raises(ValueError, match="Slicers disagree on the number of slices: ChunkSlicer made 3, an "
                                             "earlier slicer made 2"):
            run_step(sliced, batch(6))
        assert np.isfinite(run_step(network, batch())["mse"])  # still usable after the errors
    finally:
        for net in (network, sliced):
            getattr(net, "shutdown", lambda: None)()
    if distributed:  # shut down: no placement group keeps holding the cluster's CPUs
        from ray.util import placement_group_table

        wait_for(lambda: not [pg for pg in placement_group_table().values() if pg["state"] == "CREATED"], 15,
                 "the placement groups to be removed")


# ------------------------------------------------------------------------------------------- replicas
@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_bad_num_replicas(bad: Any) -> None:
    with pytest.raises(ValueError, match=rf"num_replicas must be a positive int .*got {bad!r}"):
        linear_network(num_replicas=bad)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("replicas, bundle", [(5, {"CPU": 1}), (2, {"CPU": 3})])
def test_more_replicas_than_the_cluster_holds_fails_fast(ray_session: None, replicas: int,
                                                         bundle: dict[str, float]) -> None:
    network = linear_network(num_replicas=replicas, resources_per_replica=bundle, placement_timeout_s=30)
    start = timeit.default_timer()
    with pytest.raises(PlacementError, match=rf"Cannot place {replicas} replica\(s\) with resources_per_replica="
                                             rf".*'CPU': {bundle['CPU']}.*the cluster has only 4 CPU in total.*"
                                             r"Available now: \{.*'CPU'.*Lower num_replicas"):
        run_step(network, batch())
    assert timeit.default_timer() - start < 5  # not the 30 s placement timeout
    assert not network.started


class Holder:
    def __init__(self) -> None:
        self.client = threading.Lock()


def test_unpicklable_nested_op_attribute_is_named() -> None:
    op = LambdaOp(lambda x: x, inputs="x", outputs="x")
    op.helper = Holder()
    model = linear("torch")
    with pytest.raises(TypeError, match=r"Network op #0 \(LambdaOp\) .*attribute 'helper.client' is not picklable.*"
                                        r"create locks, open files"):
        fe.Network([op, ModelOp(model=model, inputs="x", outputs="y_pred")], num_replicas=2)


# ------------------------------------------------------------------------------------------- checkpoints
@pytest.fixture()
def checkpoint(tmp_path: Path) -> str:
    """A directory with one committed checkpoint (after epoch 1 of the in-process reference run)."""
    directory = str(tmp_path / "ckpt")
    estimator, _ = build_run(traces=[RestoreWizard(directory)])
    estimator.system.total_epochs = 1
    estimator.fit()
    return directory


def test_checkpoint_of_another_configuration_is_refused_untouched(checkpoint: str) -> None:
    estimator, model = build_run(traces=[RestoreWizard(checkpoint)], first_op=lambda x: x)  # one more op
    before = weights_of(model)
    with pytest.raises(ValueError, match=r"Cannot restore checkpoint .*ckpt-000001: it was written by a different "
                                         r"configuration\. network: checkpoint has \{'ops': \['ModelOp', "
                                         r".*this run has \{'ops': \['LambdaOp', 'ModelOp'.*use a new directory"):
        estimator.fit()
    for a, b in zip(weights_of(model), before):
        np.testing.assert_array_equal(a, b)  # nothing was loaded


def _latest(directory: str) -> Path:
    latest = CheckpointStore(directory).latest()
    assert latest is not None
    return Path(latest)


def _flip_bytes(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    offset = len(data) // 2 if offset is None else offset
    data[offset:offset + 16] = bytes(b ^ 0xFF for b in data[offset:offset + 16])
    path.write_bytes(bytes(data))  # same size: the manifest check passes, reading must catch it


@pytest.mark.parametrize("target", ["models/mlp.npz", "models/mlp.json", "objects.pkl", "system.json"])
def test_corrupted_checkpoint_file_is_named(checkpoint: str, target: str) -> None:
    path = _latest(checkpoint) / target
    # npz members carry a CRC, so a flip anywhere in the data is caught; JSON and pickle have no checksum, so only
    # damage that breaks their syntax is (a flip at the start here; see the limits in docs/reliability.md).
    _flip_bytes(path, offset=None if target.endswith(".npz") else 0)
    estimator, _ = build_run(traces=[RestoreWizard(checkpoint)])
    with pytest.raises(CheckpointError, match=rf"Checkpoint file .*ckpt-000001/{target} is corrupt"):
        estimator.fit()


def test_truncated_or_uncommitted_checkpoint_is_skipped_for_the_previous_one(checkpoint: str) -> None:
    estimator, _ = build_run(traces=[RestoreWizard(checkpoint)])
    estimator.fit()  # epochs 1 and 2: ckpt-000001 and ckpt-000002
    store = CheckpointStore(checkpoint)
    first, second = store.committed()
    npz = Path(second) / "models" / "mlp.npz"
    npz.write_bytes(npz.read_bytes()[:100])  # a torn file: the manifest's size no longer matches
    with pytest.warns(UserWarning, match=r"Skipping damaged checkpoint .*ckpt-000002: file models/mlp.npz has 100 "
                                         r"bytes, the manifest says"):
        assert store.latest() == first
    (Path(second) / "MANIFEST.json").unlink()  # never committed: skipped silently
    assert store.latest() == first and store.committed() == [first]


class Payload:
    """Pickles to a call that creates ``marker``: what a tampered file would run when unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def _commit_as_is(directory: Path) -> None:
    """Rewrite the manifest's sizes, as someone tampering with a checkpoint would."""
    manifest_path = directory / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"] = {rel: os.path.getsize(directory / rel) for rel in manifest["files"]}
    manifest_path.write_text(json.dumps(manifest))


def test_tampered_model_file_is_refused_without_unpickling(checkpoint: str, tmp_path: Path) -> None:
    latest = _latest(checkpoint)
    npz = latest / "models" / "mlp.npz"
    marker = tmp_path / "pwned"
    with zipfile.ZipFile(npz) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    buffer = io.BytesIO()  # replace the first array by an object array that would run code when unpickled
    np.save(buffer, np.array([Payload(str(marker))], dtype=object), allow_pickle=True)
    members["a0.npy"] = buffer.getvalue()
    with zipfile.ZipFile(npz, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    _commit_as_is(latest)
    assert CheckpointStore(checkpoint).latest() == str(latest)  # the manifest is satisfied ...
    with pytest.raises(CheckpointError, match=r"mlp.npz is corrupt: .*allow_pickle=False"):
        read_checkpoint(str(latest))  # ... but model files are loaded with allow_pickle=False
    assert not marker.exists()


def test_objects_pickle_is_the_documented_trust_boundary(checkpoint: str, tmp_path: Path) -> None:
    """objects.pkl IS unpickled (op / trace / pipeline states are arbitrary objects): a tampered one runs code.
    This test pins that documented boundary (docs/reliability.md): only load checkpoints you wrote."""
    import pickle

    latest = _latest(checkpoint)
    marker = tmp_path / "ran"
    objects = pickle.loads((latest / "objects.pkl").read_bytes())
    objects["rng"] = {"python": None, "payload": Payload(str(marker))}
    (latest / "objects.pkl").write_bytes(pickle.dumps(objects))
    _commit_as_is(latest)
    read_checkpoint(str(latest))
    assert marker.exists()
