"""A plain Replica object (no Ray) configured for training, for tests of the replica's own code."""

from __future__ import annotations

import fe_ray as fe
from fe_ray.distributed.errors import RemoteFailure
from fe_ray.distributed.replica import Replica
from fe_ray.distributed.serialization import check_picklable
from fe_ray.op.tensorop.loss import CrossEntropy
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from tests.estimator_helpers import torch_mlp


def configured_replica(update: type[UpdateOp] = UpdateOp) -> Replica:
    """A one-rank torch replica (digits MLP, cross entropy, ``update`` of Adam) set up and configured to train."""
    model = torch_mlp()
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"), CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
           update(model=model, loss_name="ce")]
    network = fe.Network(ops)
    replica = Replica(0, 1, "torch", check_picklable(list(network.ops), network.models))
    for result in (replica.setup(), replica.configure("train", 1, "", {"ce"}, False, False, None)):
        assert not isinstance(result, RemoteFailure), result
    return replica
