"""The two per-step walks over a torch model's module tree (its train/eval flags and its trainable parameters), read
from an index built once per Network context.

Every training step asks which parameters the optimizer updates and puts the model in train mode, as FastEstimator
does. Both walk ``model.modules()`` recursively: together 6 us a step for a two-layer MLP, 12 us for LeNet and 61 us
for ResNet-8's 35 modules on the 2-core CPU VM (0.9, 1.4 and 3.9 us with the index), a measurable share of a
launch-bound GPU step. The tree itself only changes when user code changes it, so the torch backend's
``enter_context`` indexes each model of the context here and ``exit_context`` drops the index; the steps in between
read the flat tuples instead. The per-step facts stay per step: which parameters ``requires_grad`` and which modules
are in which mode are read from the parameters and modules every time, so freezing weights or switching a
submodule's mode inside an epoch still takes effect.

Without an index (no context, or a model no op of the context names) both functions walk the tree as before.
Modules added to or removed from a model in the middle of a context are seen from the next context on.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import torch

_MODULE_TRAIN = torch.nn.Module.train


class _ModelTree:
    """A model's submodules (the model itself left out, so that the index never keeps it alive) and parameters as
    they were when the context started."""

    __slots__ = ("submodules", "parameters", "plain_train")

    def __init__(self, model: torch.nn.Module) -> None:
        modules = list(model.modules())
        self.submodules = tuple(module for module in modules if module is not model)
        self.parameters = tuple(model.parameters())  # deduplicated (shared weights once), as model.parameters()
        # A module that overrides train (e.g. to keep its BatchNorm frozen) must get the call every step.
        self.plain_train = all(type(module).train is _MODULE_TRAIN for module in modules)


# Weak keys: a context that never ended (it failed to start) leaves an entry that goes away with its model. Modules
# hash by identity (torch's own module walks need them hashable).
_TREES: weakref.WeakKeyDictionary[torch.nn.Module, _ModelTree] = weakref.WeakKeyDictionary()


def index_models(models: Iterable[torch.nn.Module]) -> None:
    """Index the module trees of ``models`` for the steps of the context that starts now."""
    for model in models:
        _TREES[model] = _ModelTree(model)


def forget_models(models: Iterable[torch.nn.Module]) -> None:
    """Drop the indexes :func:`index_models` made (at the end of the context)."""
    for model in models:
        _TREES.pop(model, None)


def trainable_variables(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """Parameters the optimizer updates, in the order gradients are exchanged."""
    tree = _TREES.get(model)
    return [p for p in (model.parameters() if tree is None else tree.parameters) if p.requires_grad]


def set_training(model: torch.nn.Module, training: bool) -> None:
    """``model.train(training)``, skipped when it could change nothing: every submodule already is in that mode and
    none overrides ``train``.

    ``Module.train`` sets the flag of every submodule through ``nn.Module.__setattr__`` (78 us a call for
    ResNet-8's 35 modules, 14 us for LeNet's 6 on the CPU VM), and each step of a context asks for the mode the
    previous step set. A model with its own ``train`` (e.g. one keeping its BatchNorm frozen) gets the call every
    step, as FastEstimator makes it.
    """
    tree = _TREES.get(model)
    if tree is None:
        for module in model.modules():
            if module.training != training or type(module).train is not _MODULE_TRAIN:
                model.train(mode=training)
                return
        return
    if not tree.plain_train or model.training != training:
        model.train(mode=training)
        return
    for module in tree.submodules:
        if module.training != training:
            model.train(mode=training)
            return
