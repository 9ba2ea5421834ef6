"""RUA (RandAugment) and its helpers, under FastEstimator's path ``fe.op.numpyop.univariate.rua``.

RUA runs, per sample, a few augmentations chosen at random from a list, all at one strength ``level``. The module
also offers the RUA-specific ops FastEstimator defines here (Rotate, Identity, Equalize, Posterize, Solarize, from
:mod:`~fe_ray.op.numpyop.univariate.affine` and :mod:`~fe_ray.op.numpyop.univariate.rua_ops`) and OneOfMultiVar.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from fe_ray.op.numpyop.meta.meta import OpChain, check_shared, check_wrapped, set_rua_levels
from fe_ray.op.numpyop.meta.one_of import OneOf
from fe_ray.op.numpyop.meta.sometimes import Sometimes
from fe_ray.op.numpyop.numpyop import NumpyOp
from fe_ray.op.numpyop.univariate.affine import Rotate, ShearX, ShearY, TranslateX, TranslateY
from fe_ray.op.numpyop.univariate.enhance import Brightness, Color, Contrast, Sharpness
from fe_ray.op.numpyop.univariate.histogram import AutoContrast
from fe_ray.op.numpyop.univariate.rua_ops import Equalize, Identity, Posterize, Solarize
from fe_ray.util import to_list

__all__ = ["RUA", "Equalize", "Identity", "OneOfMultiVar", "Posterize", "Rotate", "Solarize"]

# RUA runs at most this many augmentations per sample (at level 30).
_MAX_AUGMENTS = 5


def _ordered_union(*key_lists: Iterable[str]) -> list[str]:
    keys: list[str] = []
    for key_list in key_lists:
        keys += [key for key in key_list if key not in keys]
    return keys


class OneOfMultiVar(OpChain, OneOf):
    """Run one of ``numpy_ops``, each with the same probability, where the ops may read and write different keys.

    The op reads every key any of the ops reads or writes (outputs the chosen op does not write pass through
    unchanged, so they must already exist: create defaults with a LambdaOp first) and writes every key any of them
    writes. The ops must share mode and how they take inputs and give outputs (one key or a list); the first op's
    ``mode`` and ``ds_id`` become this op's.

    Random: in a Pipeline the choice comes from the sample's generator and the chosen op continues drawing from it
    (exact across resumes and worker threads). As a Network pop one choice is made for the whole batch.

    Args:
        *numpy_ops: The ops to choose from.

    Raises:
        TypeError: If an entry is not a NumpyOp, or is a Delete.
        ValueError: If no op is given, or the ops differ in mode or input/output form.
    """

    def __init__(self, *numpy_ops: NumpyOp) -> None:
        if not numpy_ops:
            raise ValueError("OneOfMultiVar needs at least one NumpyOp to choose from, got none.")
        ops = [check_wrapped(op, "OneOfMultiVar") for op in numpy_ops]
        check_shared(ops, ("in_list", "out_list", "mode"), "OneOfMultiVar")
        outputs = _ordered_union(*(op.outputs for op in ops))
        inputs = _ordered_union(*(op.inputs for op in ops), outputs)
        NumpyOp.__init__(self, inputs=inputs, outputs=outputs)  # OneOf's own checks need shared keys
        self.in_list = self.out_list = True
        self.mode, self.ds_id = ops[0].mode, ops[0].ds_id
        self.ops = ops

    def _selected(self, state: dict[str, Any]) -> list[NumpyOp]:
        return [self._choose(state)]


def _default_augmentations(inputs: str | Iterable[str], outputs: str | Iterable[str],
                           mode: None | str | Iterable[str], ds_id: None | str | Iterable[str]) -> dict[str, NumpyOp]:
    """RUA's default augmentations by name, with FastEstimator's ranges (before ``set_rua_level`` scales them)."""
    keys: dict[str, Any] = {"inputs": inputs, "outputs": outputs, "mode": mode, "ds_id": ds_id}
    return {
        "Rotate": Rotate(**keys, limit=90),
        "Identity": Identity(**keys),
        "AutoContrast": AutoContrast(**keys),
        "Equalize": Equalize(**keys),
        "Posterize": Posterize(**keys, num_bits=7),
        "Solarize": Solarize(**keys, threshold=256),
        "Sharpness": Sharpness(**keys, limit=0.9),
        "Contrast": Contrast(**keys, limit=0.9),
        "Color": Color(**keys, limit=0.9),
        "Brightness": Brightness(**keys, limit=0.9),
        "ShearX": ShearX(**keys, shear_coef=0.5),
        "ShearY": ShearY(**keys, shear_coef=0.5),
        "TranslateX": TranslateX(**keys, shift_limit=0.33),
        "TranslateY": TranslateY(**keys, shift_limit=0.33),
    }


def _parse_choices(choices: list[Any], defaults: dict[str, NumpyOp]) -> list[NumpyOp]:
    """The augmentations ``choices`` selects: 'defaults', default names to add, '!name's to remove, custom ops.

    Raises:
        ValueError: If names to add and to remove are mixed, 'defaults' comes with names, or a name is unknown.
        TypeError: If an entry is neither a string nor a NumpyOp.
    """
    names = list(defaults)
    for choice in choices:
        if not isinstance(choice, (str, NumpyOp)):
            raise TypeError(f"RUA choices must be augmentation names or NumpyOps, got {type(choice).__name__}.")
    custom = [choice for choice in choices if isinstance(choice, NumpyOp)]
    removed = [choice[1:] for choice in choices if isinstance(choice, str) and choice.startswith("!")]
    added = [choice for choice in choices if isinstance(choice, str) and not choice.startswith("!")
             and choice != "defaults"]
    use_defaults = "defaults" in choices
    if removed and added:
        raise ValueError(f"RUA choices may add default augmentations or remove them ('!Name'), not both; got "
                         f"{added} and {['!' + name for name in removed]}.")
    if use_defaults and (removed or added):
        raise ValueError(f"RUA choices 'defaults' already holds every default augmentation: drop {added} (removals "
                         f"{['!' + name for name in removed]} imply the defaults, so drop 'defaults' instead).")
    unknown = [name for name in removed + added if name not in defaults]
    if unknown:
        raise ValueError(f"RUA has no default augmentation(s) {unknown}; the names are {names}.")
    if removed:
        selected = [op for name, op in defaults.items() if name not in removed]
    elif use_defaults:
        selected = list(defaults.values())
    else:
        selected = [defaults[name] for name in added]
    return selected + custom


class RUA(OpChain):
    """RandAugment: per sample, apply a few augmentations chosen at random, all at one strength ``level``.

    ``level`` (in [0, 30]) sets both how strong every augmentation is (each op's ``set_rua_level(level / 30)``
    narrows its range: see the ops) and how many run: ``n = 1 + level * (min(len(augmentations), 5) - 1) / 30``;
    ``int(n)`` picks each run one augmentation uniformly at random (the same one may come twice), and with
    probability ``n % 1`` one more does, as FastEstimator's RUA (in ``fe.op.numpyop.univariate.rua``) does.

    The default augmentations (FastEstimator's, at its ranges) are Rotate (``limit=90``), Identity, AutoContrast,
    Equalize (Pillow's), Posterize (``num_bits=7``), Solarize (``threshold=256``), Sharpness, Contrast, Color and
    Brightness (``limit=0.9``), ShearX and ShearY (``shear_coef=0.5``), TranslateX and TranslateY
    (``shift_limit=0.33``). ``choices`` selects among them: ``'defaults'`` for all, names to use only those, names
    negated with ``'!'`` for all but those (adding and removing cannot be mixed, nor names with ``'defaults'``); any
    NumpyOp with a ``set_rua_level(magnitude_coef)`` method may be added to either. Ops writing keys they do not
    read need those keys to exist already (create defaults with a LambdaOp first).

    Random: in a Pipeline every choice and every augmentation's parameters come from the sample's generator (exact
    across resumes and worker threads; FastEstimator draws from Python's ``random``). As a Network pop the choices
    are made once for the whole batch.

    Args:
        inputs: Key(s) of the uint8 images.
        outputs: Key(s) to write the augmented images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        choices: The augmentations: a name, a NumpyOp, or a list of them (see above).
        level: The strength, in [0, 30].

    Raises:
        ValueError: If ``level`` is outside [0, 30], ``choices`` is malformed (see above) or selects nothing, or
            the selected ops differ in mode or input/output form.
        TypeError: If a choice is neither a name nor a NumpyOp, or an op has no ``set_rua_level`` method
            (FastEstimator raises AttributeError there).
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 choices: str | NumpyOp | list[str | NumpyOp] = "defaults", level: float = 18) -> None:
        if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 <= level <= 30:
            raise ValueError(f"RUA level must be a number in [0, 30], got {level!r}.")
        augmentations = _parse_choices(to_list(choices), _default_augmentations(inputs, outputs, mode, ds_id))
        if not augmentations:
            raise ValueError(f"RUA choices {choices!r} select no augmentation; pass 'defaults', names of default "
                             "augmentations or NumpyOps.")
        set_rua_levels(augmentations, level / 30.0, "RUA")
        keys_out = _ordered_union(to_list(outputs), *(op.outputs for op in augmentations))
        keys_in = _ordered_union(to_list(inputs), *(op.inputs for op in augmentations), keys_out)
        super().__init__(inputs=keys_in, outputs=keys_out, mode=mode, ds_id=ds_id)
        self.in_list = self.out_list = True
        self.level = float(level)
        count = level * (min(len(augmentations), _MAX_AUGMENTS) - 1) / 30 + 1
        self.ops: list[NumpyOp] = [OneOfMultiVar(*augmentations) for _ in range(int(count))]
        if count % 1 > 0:
            self.ops.append(Sometimes(OneOfMultiVar(*augmentations), prob=count % 1))
