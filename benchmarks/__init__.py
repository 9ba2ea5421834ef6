"""fe_ray benchmark suite: plain scripts run as ``python -m benchmarks.<name>`` (see benchmarks/README.md)."""
