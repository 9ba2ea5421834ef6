"""The names of fe.Network's distributed options: a misspelled one is named, with the closest valid name."""

from __future__ import annotations

import inspect

import pytest

from fe_ray.distributed.options import OPTION_NAMES, check_option_names


def test_the_option_names_are_ray_networks_parameters() -> None:
    from fe_ray.distributed.coordinator import RayNetwork

    parameters = list(inspect.signature(RayNetwork.__init__).parameters)
    assert tuple(parameters[6:]) == OPTION_NAMES  # after self, ops, pops, slicers, num_replicas, framework


@pytest.mark.parametrize("given, named", [({"num_replics": 2}, r"'num_replics' \(did you mean 'num_replicas'\?\)"),
                                          ({"max_failure": 1}, r"'max_failure' \(did you mean 'max_failures'\?\)"),
                                          ({"zzz": 1}, r"'zzz'; its options are num_replicas and")])
def test_a_misspelled_option_is_named_with_the_closest_valid_one(given: dict, named: str) -> None:
    """It read "Options ['num_replics'] need num_replicas=N" without num_replicas, and was Python's bare
    "unexpected keyword argument" with it."""
    import fe_ray as fe
    from fe_ray.op.tensorop import LambdaOp

    with pytest.raises(TypeError, match=rf"fe.Network got unknown option\(s\) {named}"):
        fe.Network([LambdaOp(lambda x: x, inputs="x", outputs="y")], **given)
    with pytest.raises(TypeError, match=named):
        check_option_names({**given, "num_replicas": 2, "max_failures": 1})
