"""Loading FastEstimator's saved weights into fe_ray's torch architectures, whose submodules are named otherwise.

fe_ray's ResNet9, UNet, AttentionUNet and WideResidualNetwork hold the same parameters and buffers as
FastEstimator 1.7's, in the same order and shapes, under other names (``prep.conv.weight`` for FastEstimator's
``conv0.weight``). A ``state_dict`` saved from FastEstimator's model (``.pt`` files of ``ModelSaver`` or
``torch.save``) loads into fe_ray's through :func:`accept_same_order_layout`'s hook, so ``fe.build(...,
weights_path=...)`` and ``load_state_dict`` take it as they take fe_ray's own files.
"""

from __future__ import annotations

import torch


def accept_same_order_layout(module: torch.nn.Module) -> None:
    """Let ``module.load_state_dict`` take a state dict whose keys are named otherwise but hold the module's own
    tensors in its order and shapes (FastEstimator's layout of the same architecture)."""
    module.register_load_state_dict_pre_hook(_rename_in_order)


def _rename_in_order(module: torch.nn.Module, state_dict: dict[str, object], prefix: str, *_: object) -> None:
    """The hook: rename ``state_dict``'s entries, in place, to the module's keys when only the names differ.

    Anything else (a dict of the module's own keys, another count, a shape that differs in order) is left for
    ``load_state_dict``'s usual checks and messages.
    """
    if prefix:  # the module loaded as a part of a bigger model: its keys carry the owner's prefix, left alone
        return
    own = module.state_dict(keep_vars=True)
    incoming = list(state_dict)
    if len(incoming) != len(own) or set(incoming) == set(own):
        return
    if any(tuple(getattr(state_dict[key], "shape", ())) != tuple(value.shape)
           for key, value in zip(incoming, own.values())):
        return
    renamed = {name: state_dict[key] for name, key in zip(own, incoming)}
    state_dict.clear()
    state_dict.update(renamed)


__all__ = ["accept_same_order_layout"]
