"""cluster.yaml is a valid Ray cluster-launcher config with a head, GPU workers and an fe_ray install."""

import json
from pathlib import Path

import jsonschema
import ray.autoscaler
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_cluster_yaml_matches_ray_schema_and_installs_fe_ray() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)
    nodes = config["available_node_types"]
    assert config["head_node_type"] in nodes
    workers = [name for name in nodes if name != config["head_node_type"]]
    assert any(nodes[name]["node_config"]["InstanceType"].startswith(("g", "p")) for name in workers)  # GPU types
    assert any("-e ~/fe_ray" in cmd for cmd in config["setup_commands"])
    assert config["file_mounts"]["~/fe_ray"] == "."


def test_cluster_yaml_syncs_the_sources_only() -> None:
    # file_mounts rsyncs "." to every node: without a filter that is the whole checkout, a multi-GB .venv included.
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert ".gitignore" in config.get("rsync_filter", [])  # Ray passes it to rsync as --filter 'dir-merge,- .gitignore'
    ignored = {line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()}
    assert {".venv/", "*.egg-info/", "__pycache__/"} <= ignored
    assert "**/.git" in config.get("rsync_exclude", [])


def test_cluster_yaml_does_not_boot_ray_s_default_ami() -> None:
    # Ray 2.60 resolves an empty ImageId or `latest_dlami` to "Deep Learning AMI (Ubuntu 18.04) V71.0" (CUDA 11.2,
    # Python 3.6), where the pinned torch / TensorFlow / Ray wheels cannot be installed.
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    for name, node in config["available_node_types"].items():
        image = str(node["node_config"].get("ImageId", "")).lower()
        assert image not in ("", "latest_dlami"), name
        assert image.startswith(("ami-", "resolve:ssm:")), name


def test_workers_the_autoscaler_starts_are_waited_for() -> None:
    # GPU workers that start only on demand (min_workers 0) are up only after the job's replicas asked for them: the
    # documented job must wait for nodes, or fe_ray refuses the request against the head node's resources at once.
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    workers = [node for name, node in config["available_node_types"].items() if name != config["head_node_type"]]
    assert any(node["min_workers"] == 0 for node in workers)
    for text in ((ROOT / "cluster.yaml").read_text(), (ROOT / "README.md").read_text()):
        lines = text.replace("\\\n", " ").splitlines()
        jobs = [line for line in lines if "examples/mnist_torch.py --replicas 4" in line]
        assert jobs and all("--gpu" in job and "--wait-for-nodes" in job for job in jobs), jobs
