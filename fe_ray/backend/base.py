"""The interface every framework backend module implements (documentation only; nothing subclasses it).

:mod:`fe_ray.backend.torch` and :mod:`fe_ray.backend.tf` are plain modules exposing these functions;
:func:`fe_ray.backend.get_backend` returns one of them. Ops and Networks call them instead of branching on the
framework. "Model" below means a model built by :func:`fe_ray.build` (it has ``model_name``, ``optimizer``,
``current_optimizer``, ``mixed_precision`` and ``fe_compiled``).

Optional hooks, looked up with ``getattr`` by the Network: ``enter_context(models, mode, device)`` and
``exit_context(models, mode, device)`` (torch: move models and optimizer state to the accelerator and back).
The TF backend also exposes ``new_step_fn()``; its ``run_step`` keeps one traced step function per Network context.
The torch backend also exposes ``start_step(..., tail=n)``, which returns a step's outputs before its last ``n`` ops
(the trailing UpdateOps) have run, together with a function that runs them (see
:meth:`fe_ray.network.BaseNetwork.start_step`); a backend without it always runs whole steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Backend(Protocol):
    """Functions of a framework backend module."""

    # -- tensors
    def to_tensor(self, data: Any) -> Any:
        """Convert (nested dict/list/tuple of) arrays or other frameworks' tensors to this framework's tensors."""

    def to_numpy(self, data: Any) -> Any:
        """Convert (nested) tensors to numpy arrays on the CPU."""

    def reduce_mean(self, x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        """Mean over ``axis`` (all elements when None); ``keepdims`` keeps the reduced axes with size 1."""

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        """Concatenate along an existing axis."""

    def stack(self, xs: Sequence[Any], axis: int) -> Any:
        """Stack along a new axis."""

    def stop_gradient(self, data: Any) -> Any:
        """Block gradient flow through (nested) tensors."""

    def no_grad(self) -> AbstractContextManager[Any]:
        """A context in which no gradients are recorded (a no-op in TF, which records only on tapes)."""

    # -- models and gradients
    def trainable_variables(self, model: Any) -> list[Any]:
        """The weights the optimizer updates, in gradient order."""

    def feed_forward(self, model: Any, x: Any, training: bool = True, spread: bool = ...) -> Any:
        """Run the model on ``x`` (a list means several inputs: positional arguments when ``spread``, whose default
        is each framework's usual way, torch True, TF False)."""

    def build_model_fn(self, model: Any, layers: Sequence[str | int]) -> Callable[[Any, bool], list[Any]]:
        """Return ``fn(x, training) -> [model output, *outputs of the chosen layers]`` (layers by name or index;
        several inputs spread into positional arguments only when the model takes several), as ModelOp runs it."""

    def add_model_losses(self, model: Any, loss: Any) -> Any:
        """Add losses the model registers itself (Keras ``model.losses``) to ``loss``."""

    def get_gradient(self, target: Any, sources: Any, tape: Any = None, retain_graph: bool = True,
                     higher_order: bool = False) -> Any:
        """Gradients of ``target`` w.r.t. ``sources`` (a list: zeros for unused sources; a single source: its
        gradient). TF needs the recording tape; ``higher_order`` keeps the gradients differentiable."""

    def scale_loss(self, model: Any, loss: Any) -> Any:
        """Apply mixed-precision loss scaling (identity without it)."""

    def uses_loss_scaling(self, model: Any) -> bool:
        """Whether :meth:`scale_loss` scales this model's loss (then reducers weight the loss, not the gradients)."""

    def unscale_gradients(self, model: Any, gradients: list[Any]) -> list[Any]:
        """Undo loss scaling where the optimizer does not do it at apply time."""

    def update_model(self, model: Any, gradients: Sequence[Any], defer: bool = False,
                     deferred: dict[str, list[Callable[[], None]]] | None = None,
                     variables: Sequence[Any] | None = None) -> None:
        """Apply gradients with ``model.current_optimizer``; with ``defer``, store a closure in
        ``deferred[model.model_name]`` to run at the end of the step instead. ``variables`` are the model's
        ``trainable_variables`` when the caller already has them (None looks them up). A None gradient leaves its
        weight alone (torch; the TF UpdateOp leaves such weights out)."""

    # -- merge_grad accumulation (used by UpdateOp)
    def init_accumulator(self, model: Any, device: Any = None) -> tuple[Any, list[Any]]:
        """Create a (step counter, zeroed gradient sums) pair."""

    def merge_grad_update(self, model: Any, step: Any, grad_sum: list[Any], gradients: Sequence[Any],
                          merge_grad: int, defer: bool = False,
                          deferred: dict[str, list[Callable[[], None]]] | None = None,
                          variables: Sequence[Any] | None = None) -> None:
        """Accumulate; on every ``merge_grad``-th call apply the mean gradient and reset the sums. ``variables``
        as in :meth:`update_model`."""

    def accumulator_to_numpy(self, step: Any, grad_sum: Sequence[Any]) -> dict[str, Any]:
        """Snapshot ``{"step": int, "grad_sum": [np.ndarray]}``."""

    def accumulator_from_numpy(self, step: Any, grad_sum: Sequence[Any], state: dict[str, Any]) -> None:
        """Restore a snapshot in place."""

    # -- optimizers
    def make_optimizer(self, model: Any, optimizer_def: Any, mixed_precision: bool = False) -> Any:
        """Create an optimizer from a name ("adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax"), a
        framework callable, or None (returns None). Unknown names raise ValueError listing the valid ones."""

    def set_mixed_precision_policy(self, enabled: bool) -> None:
        """Switch a global mixed-precision policy (Keras), or do nothing (torch)."""

    def mixed_precision_policy(self, enabled: bool) -> AbstractContextManager[None]:
        """The global mixed-precision policy set for the models created inside the block, then put back (Keras),
        or nothing (torch)."""

    def set_lr(self, model: Any, lr: float, weight_decay: float | None = None) -> None:
        """Set the current optimizer's learning rate (and weight decay, see ``fe_ray.backend.set_lr``)."""

    def get_lr(self, model: Any) -> Any:
        """Read the current optimizer's learning rate (torch: a float; TF: a numpy scalar of the variable's dtype)."""

    def known_lr(self, model: Any) -> float:
        """The learning rate as last set or read through this backend, where reading it costs device work (TF);
        otherwise the same as ``get_lr``."""

    # -- persistence
    def load_weights(self, model: Any, path: str) -> None:
        """Load a weights file (build's ``weights_path``)."""

    def save_model(self, model: Any, save_dir: str, model_name: str | None = None, save_optimizer: bool = False,
                   save_architecture: bool = False) -> str:
        """Save weights (optionally optimizer state, and with TF the whole model) into ``save_dir``; return the
        weights path."""

    def load_model(self, model: Any, weights_path: str, load_optimizer: bool = False) -> None:
        """Load what :meth:`save_model` wrote; optimizer state is restored exactly."""

    def get_state(self, model: Any, copy: bool = True, deferred: bool = False,
                  weights_only: bool = False) -> dict[str, Any]:
        """A picklable numpy snapshot of weights and current optimizer state, with every scheduled optimizer's for a
        model built with a Scheduler of them (:mod:`fe_ray.backend.optimizers`) (``copy=False``: views allowed;
        ``deferred``: accelerator tensors as :class:`~fe_ray.io.snapshot.DeferredCopy` leaves, for a caller that
        copies the snapshot into its own host buffers at once; ``weights_only``: the optimizer's entry is None, as
        for a model without one, so :meth:`set_state` of it changes only the weights)."""

    def get_buffers(self, model: Any) -> Any:
        """Copies of the model's state outside gradients (BatchNorm running statistics: torch buffers, Keras
        non-trainable weights), for :meth:`set_buffers` on another copy of the model."""

    def set_buffers(self, model: Any, buffers: Any) -> None:
        """Load :meth:`get_buffers` of another copy of the same architecture into ``model``."""

    def state_is_view(self, model: Any) -> bool:
        """Whether ``get_state(model, copy=False)`` returns views of live memory (which training changes) rather
        than arrays of its own: a caller that copies the snapshot itself (into reused buffers) needs to know."""

    def weight_layout(self, model: Any) -> list[list[Any]]:
        """The model's weights as JSON-ready lists (their shapes, in order; torch: each led by its state name):
        checkpoints record it, so one is refused by a model it would not load into."""

    def weights_fingerprint(self, model: Any) -> Any:
        """A value that changes when any of the model's weights or buffers is written (torch: version counters,
        read for free; TF: a checksum of the values), so a caller can tell whether the model changed since."""

    def set_state(self, model: Any, state: dict[str, Any], copy: bool = True) -> None:
        """Restore a :meth:`get_state` snapshot exactly.

        ``copy=False`` lets the optimizer keep the snapshot's writable arrays as its own state instead of copying
        them: only for a caller that owns the snapshot and drops it afterwards (one read from disk or received
        from another process).
        """

    # -- devices and execution
    def get_device(self) -> Any:
        """The device models run on (torch: cuda if available else cpu; TF: None)."""

    def move_model(self, model: Any, device: Any) -> None:
        """Move a model and its optimizer state to ``device`` (no-op in TF)."""

    def run_step(self, ops: Sequence[Any], batch: dict[str, Any], state: dict[str, Any], gpu_input_keys: set[str],
                 output_keys: set[str], device: Any = None, mixed_precision: bool = False) -> dict[str, Any]:
        """Run one step of ``ops`` on the batch's ``gpu_input_keys`` and return the ``output_keys`` it holds."""

    # -- losses
    def cross_entropy(self, y_pred: Any, y_true: Any, form: str, from_logits: bool = False,
                      class_weights: dict[int, float] | None = None, average: bool = True) -> Any:
        """Binary / sparse / categorical cross entropy in float32 (class axis 1 for torch, last for TF)."""

    def mean_squared_error(self, y_pred: Any, y_true: Any, average: bool = True) -> Any:
        """Squared error averaged over the last axis, then over samples when ``average``."""
