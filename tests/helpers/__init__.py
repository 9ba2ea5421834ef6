"""Shared test helpers (tiny models built without fe_ray.build)."""
