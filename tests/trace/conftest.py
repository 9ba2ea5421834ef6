"""The trace tests that run replicas share the distributed tests' module-scoped local Ray session (4 CPUs)."""

from tests.distributed.conftest import ray_session  # noqa: F401 - the fixture, re-exported for this folder
