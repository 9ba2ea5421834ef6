"""Storage helpers: the atomic CheckpointStore and the on-disk format of System checkpoints."""

from fe_ray.io.checkpoint import CheckpointStore

__all__ = ["CheckpointStore"]
