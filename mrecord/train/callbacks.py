"""Training callbacks, MindSpore style: ``Callback``, ``RunContext``, ``LossMonitor``, ...

The driver calls, in order::

    on_train_begin
      on_train_epoch_begin
        on_train_step_begin / on_train_step_end   every step (sink off), once per sink (sink on)
      on_train_epoch_end
    on_train_end

Each gets a :class:`RunContext`; ``run_context.original_args()`` is the
:class:`CallbackParams` (``cur_epoch_num``, ``cur_step_num``, ``net_outputs``, ...),
and ``run_context.request_stop()`` ends training after the current step (or sink).

Write your own by subclassing :class:`Callback` and overriding the hooks you need,
or with :class:`LambdaCallback`. MindSpore 1.x names (``step_end``, ``epoch_end``,
``begin``, ``end``, ...) work too: the ``on_train_*`` hooks call them by default.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mrecord.arguments import check_int_at_least
from mrecord.errors import TrainingError, WrongTypeError

__all__ = [
    "Callback",
    "CallbackList",
    "CallbackParams",
    "LambdaCallback",
    "LossMonitor",
    "RunContext",
    "TimeMonitor",
    "loss_value",
]


@dataclass
class CallbackParams:
    """What callbacks can read about the run (MindSpore's ``cb_params``)."""

    train_network: Any
    """The step function."""
    train_dataset: Any
    epoch_num: int
    """The last epoch number (``epoch`` given to ``train``)."""
    batch_num: int
    """Steps per epoch: ``sink_size`` when sinking with ``sink_size > 0``, else the dataset size."""
    dataset_sink_mode: bool
    sink_size: int
    mode: str = "train"
    cur_epoch_num: int = 0
    """The current epoch, from 1."""
    cur_step_num: int = 0
    """Steps done since training began (over all epochs)."""
    net_outputs: Any = None
    """What the step function returned last (the loss)."""
    data_wait_s: float = 0.0
    """Seconds spent waiting for data so far."""
    step_s: float = 0.0
    """Seconds spent in the step function so far."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free room for callbacks to share values."""

    def get(self, name: str, default: Any = None) -> Any:
        """Attribute ``name``, or ``default`` (as MindSpore's ``cb_params.get``)."""
        return getattr(self, name, default)


class RunContext:
    """Handed to every hook: the run's parameters and a way to stop it."""

    def __init__(self, params: CallbackParams) -> None:
        self._params = params
        self._stop = False

    def original_args(self) -> CallbackParams:
        """The run's :class:`CallbackParams`."""
        return self._params

    def request_stop(self) -> None:
        """Stop training after the current step (sink off) or sink (sink on)."""
        self._stop = True

    def get_stop_requested(self) -> bool:
        """Whether a stop was requested."""
        return self._stop


class Callback:
    """Base class: override any hook; each default calls its MindSpore 1.x alias."""

    def on_train_begin(self, run_context: RunContext) -> None:
        """Before the first epoch."""
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        """Before each epoch."""
        self.epoch_begin(run_context)

    def on_train_epoch_end(self, run_context: RunContext) -> None:
        """After each epoch."""
        self.epoch_end(run_context)

    def on_train_step_begin(self, run_context: RunContext) -> None:
        """Before each step (sink off) or each sink (sink on)."""
        self.step_begin(run_context)

    def on_train_step_end(self, run_context: RunContext) -> None:
        """After each step (sink off) or each sink (sink on)."""
        self.step_end(run_context)

    def on_train_end(self, run_context: RunContext) -> None:
        """After the last epoch (also when training stopped early)."""
        self.end(run_context)

    def begin(self, run_context: RunContext) -> None:
        """MindSpore 1.x alias of :meth:`on_train_begin`."""

    def epoch_begin(self, run_context: RunContext) -> None:
        """MindSpore 1.x alias of :meth:`on_train_epoch_begin`."""

    def epoch_end(self, run_context: RunContext) -> None:
        """MindSpore 1.x alias of :meth:`on_train_epoch_end`."""

    def step_begin(self, run_context: RunContext) -> None:
        """MindSpore 1.x alias of :meth:`on_train_step_begin`."""

    def step_end(self, run_context: RunContext) -> None:
        """MindSpore 1.x alias of :meth:`on_train_step_end`."""

    def end(self, run_context: RunContext) -> None:
        """MindSpore 1.x alias of :meth:`on_train_end`."""


_Hook = Callable[[RunContext], None]


class LambdaCallback(Callback):
    """A callback from plain functions: ``LambdaCallback(on_train_epoch_end=fn)``."""

    def __init__(
        self,
        *,
        on_train_begin: _Hook | None = None,
        on_train_epoch_begin: _Hook | None = None,
        on_train_epoch_end: _Hook | None = None,
        on_train_step_begin: _Hook | None = None,
        on_train_step_end: _Hook | None = None,
        on_train_end: _Hook | None = None,
    ) -> None:
        hooks = {
            "on_train_begin": on_train_begin,
            "on_train_epoch_begin": on_train_epoch_begin,
            "on_train_epoch_end": on_train_epoch_end,
            "on_train_step_begin": on_train_step_begin,
            "on_train_step_end": on_train_step_end,
            "on_train_end": on_train_end,
        }
        for name, fn in hooks.items():
            if fn is not None:
                setattr(self, name, fn)


class CallbackList(Callback):
    """Several callbacks called in order."""

    def __init__(self, callbacks: Callback | Sequence[Callback] | None) -> None:
        if callbacks is None:
            items: list[Callback] = []
        elif isinstance(callbacks, Callback):
            items = [callbacks]
        elif isinstance(callbacks, (list, tuple)):
            items = list(callbacks)
        else:
            raise WrongTypeError(
                f"callbacks must be a Callback or a list of Callbacks, got {callbacks!r}"
            )
        for i, cb in enumerate(items):
            if not isinstance(cb, Callback):
                raise WrongTypeError(
                    f"callbacks[{i}] must be a Callback (subclass mrecord.train.Callback), "
                    f"got {cb!r} ({type(cb).__name__})"
                )
        self.callbacks = items

    def on_train_begin(self, run_context: RunContext) -> None:
        """Call every callback's hook."""
        for cb in self.callbacks:
            cb.on_train_begin(run_context)

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        """Call every callback's hook."""
        for cb in self.callbacks:
            cb.on_train_epoch_begin(run_context)

    def on_train_epoch_end(self, run_context: RunContext) -> None:
        """Call every callback's hook."""
        for cb in self.callbacks:
            cb.on_train_epoch_end(run_context)

    def on_train_step_begin(self, run_context: RunContext) -> None:
        """Call every callback's hook."""
        for cb in self.callbacks:
            cb.on_train_step_begin(run_context)

    def on_train_step_end(self, run_context: RunContext) -> None:
        """Call every callback's hook."""
        for cb in self.callbacks:
            cb.on_train_step_end(run_context)

    def on_train_end(self, run_context: RunContext) -> None:
        """Call every callback's hook."""
        for cb in self.callbacks:
            cb.on_train_end(run_context)


def loss_value(outputs: Any) -> Any:
    """The loss in what a step returned, as a number to print.

    A tuple or list gives its first element; a tensor (torch, JAX, anything with
    ``__array__``/``numpy()``) or array gives the mean of its values as a numpy scalar
    (so a float32 loss prints as ``0.110185064``); a Python number stays as it is.
    """
    if isinstance(outputs, (tuple, list)) and outputs:
        outputs = outputs[0]
    if isinstance(outputs, (int, float)) and not isinstance(outputs, bool):
        return outputs
    if hasattr(outputs, "detach") and hasattr(outputs, "cpu"):  # a torch tensor
        outputs = outputs.detach().cpu().numpy()
    try:
        array = np.asarray(outputs)
    except Exception:  # not numeric: print it as it is
        return outputs
    if array.dtype.kind not in "biuf" or array.size == 0:
        return outputs
    return array.mean(dtype=array.dtype if array.dtype.kind == "f" else None)


class LossMonitor(Callback):
    """Print ``epoch: E step: S, loss is L`` every ``per_print_times`` steps.

    With sinking on, ``on_train_step_end`` runs once per sink, so the loss is printed
    once per epoch (the loss of the sink's last step); ``S`` is the step within the
    epoch. A NaN or infinite loss raises ``ValueError`` and ends training.
    """

    def __init__(self, per_print_times: int = 1) -> None:
        self._per_print_times = check_int_at_least(per_print_times, "per_print_times", 0)
        self._last_print_step = 0

    def on_train_begin(self, run_context: RunContext) -> None:
        """Start counting from the run's first step."""
        self._last_print_step = run_context.original_args().cur_step_num

    def on_train_step_end(self, run_context: RunContext) -> None:
        """Print the loss if ``per_print_times`` steps passed since the last print."""
        p = run_context.original_args()
        loss = loss_value(p.net_outputs)
        step_in_epoch = (p.cur_step_num - 1) % max(p.batch_num, 1) + 1
        if isinstance(loss, (float, np.floating)) and not np.isfinite(loss):
            raise TrainingError(
                f"epoch: {p.cur_epoch_num} step: {step_in_epoch}. Invalid loss {loss!r}, "
                "terminating training."
            )
        if self._per_print_times and (
            p.cur_step_num - self._last_print_step >= self._per_print_times
        ):
            self._last_print_step = p.cur_step_num
            print(f"epoch: {p.cur_epoch_num} step: {step_in_epoch}, loss is {loss!s}", flush=True)


class TimeMonitor(Callback):
    """Print ``Train epoch time: T ms, per step time: S ms`` after each epoch.

    Args:
        data_size: steps per epoch to divide by (default: the run's ``batch_num``).
        data_time: also print the average time per step spent waiting for data.
    """

    def __init__(self, data_size: int | None = None, data_time: bool = False) -> None:
        self._data_size = (
            None if data_size is None else check_int_at_least(data_size, "data_size", 1)
        )
        self._data_time = bool(data_time)
        self._epoch_start = 0.0
        self._wait_start = 0.0

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        """Remember when the epoch began."""
        self._epoch_start = time.perf_counter()
        self._wait_start = run_context.original_args().data_wait_s

    def on_train_epoch_end(self, run_context: RunContext) -> None:
        """Print the epoch's time and the time per step."""
        p = run_context.original_args()
        epoch_ms = (time.perf_counter() - self._epoch_start) * 1000
        steps = self._data_size or max(p.batch_num, 1)
        line = (
            f"{p.mode.title()} epoch time: {epoch_ms:5.3f} ms, "
            f"per step time: {epoch_ms / steps:5.3f} ms"
        )
        if self._data_time:
            data_ms = (p.data_wait_s - self._wait_start) * 1000
            line += f", avg data time: {data_ms / steps:5.3f} ms"
        print(line, flush=True)
