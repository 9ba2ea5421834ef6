"""SuperLoss: confidence-aware (automatic curriculum) wrapping of another loss, with checkpointable state."""

from __future__ import annotations

import math
import numbers
from typing import Any

from fe_ray.backend import clip_by_value, exp, get_framework, lambertw, reduce_mean
from fe_ray.op.tensorop.loss.loss import LossOp

#: The modes whose running threshold is tracked separately (evaluation must not move the training one).
MODES = ("train", "eval", "test", "infer")
#: The weight of the newest batch in the running (exponential moving average) threshold.
EMA_RATE = 0.1
#: Just above -2/e: where Lambert W's argument (half of it) sits at its branch point -1/e, W's slope is infinite.
BETA_FLOOR = -1.9999998 / math.e


class SuperLoss(LossOp):
    """Turn a per-sample loss ``l`` into SuperLoss (Castells et al., NeurIPS 2020): samples whose loss lies above a
    threshold ``tau`` get a confidence ``sigma < 1`` and count less, which helps with noisy labels.

    With ``beta = (l - tau) / lam``: ``sigma = exp(-W(max(beta, -2/e) / 2))`` (W: the Lambert W function) and the
    loss is ``(l - tau) * sigma + lam * log(sigma)**2``.

    State: with ``threshold='exp'``, ``tau`` is a running average of the batch mean loss, kept per mode (the first
    non-warm-up batch of a mode sets it, every later one moves it 10% of the way to its own mean). It lives in
    framework variables, so it updates inside compiled TF steps, and :meth:`state_dict` / :meth:`load_state_dict`
    carry it through checkpoints. With Ray replicas each replica averages the losses of its own slices of the
    batches, and a checkpoint records replica 0's values.

    Args:
        loss: The LossOp computing the underlying loss (e.g. CrossEntropy). Its ``average_loss`` is set to False,
            since SuperLoss needs one loss per sample; its inputs, output key, mode and ds_id become this op's.
        threshold: 'exp' for the running average above, or a fixed number (e.g. ``log(n_classes)`` for cross
            entropy).
        regularization: ``lam`` > 0; the larger it is, the closer SuperLoss stays to the plain loss.
        average_loss: Return the batch mean; False returns one loss per sample.
        output_confidence: A key to also write each sample's confidence ``sigma`` to (e.g. to find mislabeled
            samples); None writes none.

    Raises:
        TypeError: If ``loss`` is not a LossOp.
        ValueError: If ``loss`` writes more than one key, ``threshold`` is neither 'exp' nor a number, or
            ``regularization`` is not positive.
    """

    def __init__(self, loss: LossOp, threshold: float | str = "exp", regularization: float = 1.0,
                 average_loss: bool = True, output_confidence: str | None = None) -> None:
        if not isinstance(loss, LossOp):
            raise TypeError(f"SuperLoss wraps a LossOp (e.g. CrossEntropy), got {type(loss).__name__}.")
        if len(loss.outputs) != 1 or loss.out_list:
            raise ValueError(f"SuperLoss wraps a loss with a single output key (outputs='name'), got "
                             f"{type(loss).__name__} with outputs {loss.outputs}.")
        if threshold != "exp":
            if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
                raise ValueError(f"SuperLoss threshold must be 'exp' (a running average) or a number, got "
                                 f"{threshold!r}.")
            threshold = float(threshold)
        if isinstance(regularization, bool) or not isinstance(regularization, numbers.Real) or \
                not regularization > 0:
            raise ValueError(f"SuperLoss regularization must be a number > 0, got {regularization!r}; larger values "
                             "keep it closer to the plain loss (1.0 by default).")
        outputs = loss.outputs[0] if output_confidence is None else [loss.outputs[0], output_confidence]
        super().__init__(inputs=loss.inputs, outputs=outputs, mode=None, ds_id=None, average_loss=average_loss)
        self.mode, self.ds_id = loss.mode, loss.ds_id  # already parsed by the wrapped op
        self.in_list = loss.in_list
        loss.average_loss = False
        self.loss = loss
        self.threshold = threshold
        self.regularization = float(regularization)
        self._framework: str | None = None
        self._tau: dict[str, Any] = {}
        self._initialized: dict[str, Any] = {}
        self._pending_state: dict[str, Any] | None = None

    def build(self, framework: str, device: Any = None) -> None:
        super().build(framework, device)
        self.loss.build(framework, device)
        if self.threshold != "exp" or (self._framework == framework and self._tau):
            return  # a fixed threshold has no state; a rebuilt op keeps its running values
        if framework == "torch":
            import torch

            self._tau = {mode: torch.zeros((), dtype=torch.float32, device=device) for mode in MODES}
            self._initialized = {mode: torch.zeros((), dtype=torch.bool, device=device) for mode in MODES}
        elif framework == "tf":
            import tensorflow as tf

            # Variables, created here (eagerly), so that traced steps can update them.
            self._tau = {mode: tf.Variable(0.0, dtype=tf.float32, trainable=False) for mode in MODES}
            self._initialized = {mode: tf.Variable(False, trainable=False) for mode in MODES}
        else:
            raise ValueError(f"SuperLoss supports frameworks 'torch' and 'tf', got {framework!r}.")
        self._framework = framework
        if self._pending_state is not None:
            self.load_state_dict(self._pending_state)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        base = self.loss.forward(data, state)  # one float32 loss per sample
        tau = self._threshold(base, state)
        shifted = base - tau
        ln_sigma = -lambertw(0.5 * clip_by_value(shifted / self.regularization, BETA_FLOOR, None))
        confidence = exp(ln_sigma)
        loss = shifted * confidence + self.regularization * ln_sigma * ln_sigma
        if self.average_loss:
            loss = reduce_mean(loss)
        return [loss, confidence] if len(self.outputs) == 2 else loss

    def _threshold(self, base: Any, state: dict[str, Any]) -> Any:
        """The threshold for this batch; with 'exp', also update the running average of ``state['mode']``."""
        if self.threshold != "exp":
            return self.threshold
        mode = state.get("mode", "train")
        if mode not in self._tau:
            if not self._tau:
                raise ValueError("SuperLoss.build(framework) must run before forward; the Network does this for you.")
            raise ValueError(f"SuperLoss got an unknown mode {mode!r}; valid modes are {list(MODES)}.")
        tau_var, init_var = self._tau[mode], self._initialized[mode]
        if get_framework(base) == "torch":
            import torch

            with torch.no_grad():
                batch_mean = base.detach().mean()
                # Branch-free, so the same code runs on an accelerator without a host sync.
                tau = torch.where(init_var, tau_var - EMA_RATE * (tau_var - batch_mean), batch_mean)
                tau_var.copy_(tau)
                if not state.get("warmup", False):
                    init_var.fill_(True)
            return tau
        import tensorflow as tf

        batch_mean = tf.stop_gradient(tf.reduce_mean(base))
        tau = tf.where(init_var.read_value(), tau_var - EMA_RATE * (tau_var - batch_mean), batch_mean)
        tau_var.assign(tau)
        if not state.get("warmup", False):
            init_var.assign(True)
        return tau

    def state_dict(self) -> dict[str, Any]:
        """The running thresholds per mode (``{'tau': {mode: float}, 'initialized': {mode: bool}}`` with
        threshold='exp'), plus the wrapped loss's state under 'loss' if it has any."""
        state: dict[str, Any] = {}
        if self.threshold == "exp":
            if self._tau:
                state["tau"] = {mode: float(_value(var)) for mode, var in self._tau.items()}
                state["initialized"] = {mode: bool(_value(var)) for mode, var in self._initialized.items()}
            elif self._pending_state is not None:
                state.update({key: dict(self._pending_state[key]) for key in ("tau", "initialized")})
            else:  # not built yet: the values a fresh build starts from
                state["tau"] = {mode: 0.0 for mode in MODES}
                state["initialized"] = {mode: False for mode in MODES}
        loss_state = self.loss.state_dict()
        if loss_state:
            state["loss"] = loss_state
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; before :meth:`build` the values are kept and applied when building.

        Raises:
            ValueError: If the state does not fit this op's threshold setting.
        """
        expected = {"tau", "initialized"} if self.threshold == "exp" else set()
        if set(state) - {"loss"} != expected or (expected and (set(state["tau"]) != set(MODES) or set(
                state["initialized"]) != set(MODES))):
            raise ValueError(f"SuperLoss(threshold={self.threshold!r}) state needs keys {sorted(expected)} (each "
                             f"with modes {list(MODES)}), got {sorted(state)}; the checkpoint belongs to a "
                             "different configuration.")
        self.loss.load_state_dict(state.get("loss", {}))
        if not expected:
            return
        if not self._tau:
            self._pending_state = {key: dict(state[key]) for key in ("tau", "initialized")}
            return
        for mode in MODES:
            _set(self._tau[mode], float(state["tau"][mode]))
            _set(self._initialized[mode], bool(state["initialized"][mode]))
        self._pending_state = None

    def __getstate__(self) -> dict[str, Any]:
        # Framework variables do not travel (to Ray replicas, in copies): their values do, and build() re-creates
        # the variables from them in the receiving process.
        values = self.state_dict() if self.threshold == "exp" else None
        pending = {key: values[key] for key in ("tau", "initialized")} if values else None
        return {**self.__dict__, "_tau": {}, "_initialized": {}, "_framework": None, "_pending_state": pending}


def _value(var: Any) -> Any:
    """A torch tensor's or TF variable's value as a Python number."""
    return var.item() if hasattr(var, "item") and not hasattr(var, "assign") else var.numpy().item()


def _set(var: Any, value: float | bool) -> None:
    """Assign a Python number to a torch tensor or TF variable in place."""
    if hasattr(var, "assign"):
        var.assign(value)
    else:
        var.fill_(value)
