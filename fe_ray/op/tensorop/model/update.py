"""UpdateOp: turn a loss (or given gradients) into a weight update of one model."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.op.tensorop.gradient.gradient import ReducedGradients
from fe_ray.op.tensorop.tensorop import TensorOp

# The start of torch's autograd error when a tensor saved for backward was later modified in place.
_INPLACE_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"


class UpdateOp(TensorOp):
    """Compute gradients of a loss w.r.t. a model's trainable weights and apply them with its optimizer.

    Args:
        model: A model built with :func:`fe_ray.build`.
        loss_name: The key of the loss to minimise: a scalar mean over the samples, or one value per sample (this op
            takes their mean). On replicas the update averages the replicas' gradients weighted by slice size, which
            is the whole batch's gradient for a mean; a loss summed over the samples steps about N times shorter on N
            replicas. None only with ``gradients`` (nothing is differentiated then, and no loss is logged).
        gradients: Optional key holding ready-made gradients (one per trainable weight) to apply instead of
            differentiating ``loss_name``. Not allowed for mixed-precision models, whose loss scaling must happen here.
        mode: Mode(s) in which to run ("train" by default).
        ds_id: Dataset id(s) in which to run; None for all.
        merge_grad: Apply an update every ``merge_grad`` calls, using the mean of the gradients accumulated since
            the last update; the weights do not change on the calls in between.
        defer: Apply the update at the end of the step instead of immediately. Needed in torch when a later
            gradient computation goes through this model (e.g. GANs); the torch Network defers the trailing
            UpdateOps automatically.

    Distributed training: after the gradients are computed (and before accumulation or update), a callable in
    ``state["grad_reducer"]`` is applied as ``gradients = reducer(model, gradients)``; the distributed layer uses it
    to all-reduce gradients across replicas (not the gradients a GradientOp wrote, which it already reduced). For a
    loss-scaled (mixed-precision) model and a reducer with a ``loss_share()`` method, the loss is first multiplied by
    that share and the reducer called with ``prescaled=True``, so each process's float16 backward pass keeps the
    magnitudes of a whole-batch one. This op never imports a distribution library itself.

    Raises:
        TypeError: If ``model`` was not built with :func:`fe_ray.build`, or ``loss_name`` / ``gradients`` is not a
            key (str).
        ValueError: If ``gradients`` is given for a mixed-precision model, or ``merge_grad`` is not a positive int;
            when the op runs, if the model has no optimizer in that epoch, or if its loss reaches none of the model's
            trainable weights. Weights the loss does not reach are left unchanged (no momentum or weight-decay step),
            as FastEstimator's optimizers skip them (TF warns, as Keras does); with replicas, a weight is left alone
            only if no replica's slice reached it.
        RuntimeError: In torch, if a gradient needs weights that an earlier, non-deferred UpdateOp already changed.
    """

    def __init__(self, model: Any, loss_name: str | None, gradients: str | None = None,
                 mode: None | str | Iterable[str] = "train", ds_id: None | str | Iterable[str] = None,
                 merge_grad: int = 1, defer: bool = False) -> None:
        if not getattr(model, "fe_compiled", False):
            raise TypeError(f"UpdateOp needs a model built with fe_ray.build, got an unbuilt {type(model).__name__}.")
        if not isinstance(loss_name, str) and not (loss_name is None and isinstance(gradients, str)):
            raise TypeError("UpdateOp loss_name must be one key (a str) naming the loss to minimise (None only with "
                            "gradients=), got "
                            f"{loss_name!r}. For several losses, add them up in an earlier op or use one UpdateOp "
                            "per loss.")
        if gradients is not None and not isinstance(gradients, str):
            raise TypeError("UpdateOp gradients must be one key (a str) holding the gradients, or None, got "
                            f"{gradients!r}.")
        if gradients is not None and getattr(model, "mixed_precision", False):
            raise ValueError(f"UpdateOp for mixed-precision model {model.model_name!r} cannot take gradients from key "
                             f"{gradients!r}: loss scaling requires computing them here. Pass only loss_name, or build "
                             "the model with mixed_precision=False.")
        if not isinstance(merge_grad, numbers.Integral) or isinstance(merge_grad, bool) or merge_grad < 1:
            raise ValueError(f"merge_grad must be a positive int (1 updates every step), got {merge_grad!r}.")
        merge_grad = int(merge_grad)  # numpy integers too (a sweep's np.arange)
        super().__init__(inputs=loss_name if gradients is None else gradients, outputs=None, mode=mode, ds_id=ds_id)
        if not hasattr(model, "loss_name"):
            model.loss_name = set()
        if loss_name is not None:
            model.loss_name.add(loss_name)
        self.model = model
        self.loss_name = loss_name
        self.gradients = gradients
        self.merge_grad = merge_grad
        self.defer = defer
        self.retain_graph = False
        self.framework: str | None = None
        self._backend: Any = None
        self._step: Any = None
        self._grad_sum: list[Any] | None = None
        self._pending_state: dict[str, Any] | None = None

    def build(self, framework: str, device: Any = None) -> None:
        if framework not in ("tf", "torch"):
            raise ValueError(f"UpdateOp supports frameworks 'tf' and 'torch', got {framework!r}.")
        self.framework = framework
        self._backend = get_backend(framework)
        if self.gradients is not None and framework == "tf" and getattr(self.model, "losses", None):
            warnings.warn(f"Model {self.model.model_name!r} has extra losses (model.losses); they are ignored because "
                          f"UpdateOp applies the given gradients {self.gradients!r}.", stacklevel=2)
        if self.merge_grad > 1:
            # Afresh for every Network built from this op, as in FastEstimator: a second Network does not inherit
            # the first one's half-accumulated gradients (a state loaded before building is applied).
            self._step, self._grad_sum = self._backend.init_accumulator(self.model, device)
            if self._pending_state is not None:
                self.load_state_dict(self._pending_state)

    def get_fe_models(self) -> set[Any]:
        return {self.model}

    def get_fe_loss_keys(self) -> set[str]:
        return set() if self.loss_name is None else {self.loss_name}

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        if retain is not None:
            self.retain_graph = retain
        return self.retain_graph

    def forward(self, data: Any, state: dict[str, Any]) -> None:
        if state["warmup"]:
            return
        if self._backend is None:
            raise ValueError("UpdateOp.build(framework) must run before forward; the Network does this for you.")
        if getattr(self.model, "current_optimizer", None) is None:
            raise ValueError(f"UpdateOp cannot update model {self.model.model_name!r}: it has no optimizer in this "
                             "epoch. Give fe_ray.build an optimizer_fn for it (a name such as "
                             "'adam', a callable, or a scheduler with an optimizer for every epoch this op runs in), "
                             "or remove the UpdateOp.")
        variables = None
        reducer = state.get("grad_reducer")
        share = None
        if self.gradients is None:
            if reducer is not None and self._backend.uses_loss_scaling(self.model):
                share = getattr(reducer, "loss_share", None)
            variables = self._backend.trainable_variables(self.model)  # listed once, for both uses below
            gradients = self._compute_gradients(data, state.get("tape"), variables, share)
        else:
            if isinstance(data, ReducedGradients):  # a GradientOp's, already averaged over the replicas
                reducer = None
            gradients = list(data)
        if variables is None:
            variables = self._backend.trainable_variables(self.model)
        connected = None
        if self.framework == "tf":
            # In a TF graph which weights the loss reaches is fixed when it is traced: the same on every replica.
            gradients, connected = self._check_connected(gradients, variables)
        gradients = self._backend.unscale_gradients(self.model, gradients)
        if share is not None:
            gradients = reducer(self.model, gradients, prescaled=True)
        elif reducer is not None:
            gradients = reducer(self.model, gradients)
        if self.framework != "tf":
            # torch decides per step (data-dependent paths), so only after the reducer, which keeps a weight None
            # only where no replica reached it: every replica then updates the same weights.
            gradients, connected = self._check_connected(gradients, variables)
        deferred = state.setdefault("deferred", {})
        if self.merge_grad > 1:
            self._backend.merge_grad_update(self.model, self._step, self._grad_sum, gradients, self.merge_grad,
                                            defer=self.defer, deferred=deferred, variables=variables)
        else:
            if connected is not None:
                # Weights the loss does not reach are left alone (no momentum or weight-decay step), as Keras'
                # optimizers skip a None gradient; the reducer above still needed a full list.
                gradients = [g for g, keep in zip(gradients, connected) if keep]
                variables = [v for v, keep in zip(variables, connected) if keep]
            self._backend.update_model(self.model, gradients, defer=self.defer, deferred=deferred,
                                       variables=variables)

    def _check_connected(self, gradients: list[Any], variables: list[Any]) -> tuple[list[Any], list[bool] | None]:
        """Refuse a loss that reaches none of the model's weights; zero-fill the gradients of weights it misses.

        Returns:
            The gradients without None, and which of them were real (None if all were).

        Raises:
            ValueError: If no gradient reaches any trainable weight of the model.
        """
        connected = [g is not None for g in gradients]
        if all(connected):
            return gradients, None
        source = f"gradients {self.gradients!r}" if self.gradients is not None else f"loss {self.loss_name!r}"
        if not any(connected):
            raise ValueError(f"UpdateOp got no gradient for any trainable weight of model {self.model.model_name!r}: "
                             f"{source} does not depend on them. Compute it from this model's output in the same "
                             "step, through a ModelOp with gradients=True.")
        if self.framework == "tf":  # as Keras' optimizers do; torch's skip such weights silently (and paths vary)
            missing = [getattr(v, "path", getattr(v, "name", "?")) for v, keep in zip(variables, connected) if not keep]
            warnings.warn(f"UpdateOp for model {self.model.model_name!r}: {source} does not depend on weights "
                          f"{missing}; they are not updated.", stacklevel=2)
        return self._backend.fill_unconnected(gradients, variables), connected

    def _compute_gradients(self, loss: Any, tape: Any, variables: list[Any],
                           share: Callable[[], Any] | None = None) -> list[Any]:
        backend = self._backend
        loss = backend.reduce_mean(backend.add_model_losses(self.model, loss))
        loss = backend.scale_loss(self.model, loss)
        if share is not None:  # this process's share of the batch (see the class docstring)
            loss = loss * share()
        try:
            # Weights the loss does not reach come back as None (see _check_connected).
            return backend.get_gradient(loss, variables, tape=tape, retain_graph=self.retain_graph, keep_none=True)
        except RuntimeError as err:
            if err.args and isinstance(err.args[0], str) and err.args[0].startswith(_INPLACE_ERROR):
                raise RuntimeError(
                    f"Computing gradients for model {self.model.model_name!r} failed because weights it used in the "
                    "forward pass were already updated in place by an earlier UpdateOp. Consider setting defer=True "
                    "in the earlier UpdateOps of models that interact with this one.") from err
            raise

    def state_dict(self) -> dict[str, Any]:
        """The merge_grad accumulator (step count and gradient sums as numpy); empty when merge_grad == 1."""
        if self.merge_grad == 1:
            return {}
        if self._grad_sum is None:
            return dict(self._pending_state or {})
        return self._backend.accumulator_to_numpy(self._step, self._grad_sum)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; before :meth:`build` the state is kept and applied when building.

        Raises:
            ValueError: If the state does not match this op's merge_grad configuration.
        """
        if self.merge_grad == 1:
            super().load_state_dict(state)
            return
        if set(state) != {"step", "grad_sum"}:
            raise ValueError(f"UpdateOp(merge_grad={self.merge_grad}) state needs keys ['grad_sum', 'step'], got "
                             f"{sorted(state)}; the checkpoint belongs to a different configuration.")
        if self._grad_sum is None:
            self._pending_state = dict(state)
            return
        if len(state["grad_sum"]) != len(self._grad_sum):
            raise ValueError(f"Checkpoint holds {len(state['grad_sum'])} accumulated gradients but model "
                             f"{self.model.model_name!r} has {len(self._grad_sum)} trainable weights.")
        self._backend.accumulator_from_numpy(self._step, self._grad_sum, state)
        self._pending_state = None
