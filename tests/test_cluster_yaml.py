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
