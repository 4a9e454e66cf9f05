"""``Model.train``: the training-loop driver, with or without data sinking.

Mirrors MindSpore's ``Model.train(epoch, train_dataset, callbacks, dataset_sink_mode,
sink_size)`` for any Python step function (numpy, PyTorch, JAX): the step gets a
batch's columns as arguments (``step(image, label)``) and returns the loss.

- ``dataset_sink_mode=False``: each step fetches its batch, then runs: data and step
  in series (time ≈ data + step). Callbacks run every step. ``sink_size`` is ignored.
- ``dataset_sink_mode=True``: a :class:`~mrecord.train.device_queue.DeviceQueue`
  produces batches in a thread while the step runs (time ≈ max(data, step)).
  Step callbacks run once per sink, i.e. once per epoch. ``sink_size=-1`` trains the
  whole dataset each epoch; ``sink_size > 0`` trains exactly ``sink_size`` batches per
  epoch, traversing the dataset endlessly, each epoch continuing where the last
  stopped: ``epoch * sink_size`` steps in all.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mrecord.arguments import check_int_at_least
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.train.callbacks import Callback, CallbackList, CallbackParams, RunContext
from mrecord.train.delivery import Delivery, NumpyDelivery, TorchDelivery
from mrecord.train.device_queue import DeviceQueue
from mrecord.train.source import BatchSource
from mrecord.train.summary import TrainSummary

__all__ = ["Model", "call_step"]

_runs = itertools.count()


def call_step(step: Callable[..., Any], batch: Any) -> Any:
    """Call ``step`` on a batch: a tuple or list is unpacked into arguments, else one argument."""
    if isinstance(batch, (tuple, list)):
        return step(*batch)
    return step(batch)


_WHERE = "For 'Model.train', "  # MindSpore's prefix for these messages


class Model:
    """Drive a step function over a dataset, MindSpore's ``Model`` for any framework.

    Args:
        network: the train step: called with a batch's columns, returns the loss.
        device: sink mode delivers torch tensors on this device (needs torch);
            default: numpy arrays.
        pin_memory: with ``device``: copy through pinned memory (default: on CUDA).
        delivery: your own delivery (exclusive with ``device``), e.g. for JAX.
        queue_capacity: batches the sink's queue holds (default: the prefetch size).

    Example::

        model = Model(train_step)
        model.train(10, dataset, callbacks=[LossMonitor()], dataset_sink_mode=True,
                    sink_size=1000)
        print(model.summary)          # is data the bottleneck?
    """

    def __init__(
        self,
        network: Callable[..., Any],
        *,
        device: Any = None,
        pin_memory: bool | None = None,
        delivery: Delivery | None = None,
        queue_capacity: int | None = None,
    ) -> None:
        if not callable(network):
            raise WrongTypeError(f"network must be a callable train step, got {network!r}")
        if delivery is not None and device is not None:
            raise ArgumentError(f"give either device={device!r} or delivery={delivery!r}, not both")
        self.network = network
        self._device = device
        self._pin_memory = pin_memory
        self._delivery = delivery
        self._capacity = queue_capacity
        self._start = 0
        self.summary: TrainSummary | None = None
        """The :class:`TrainSummary` of the last ``train`` call."""

    def _make_delivery(self) -> Delivery:
        if self._delivery is not None:
            return self._delivery
        if self._device is not None:
            return TorchDelivery(self._device, pin_memory=self._pin_memory)
        return NumpyDelivery()

    def train(
        self,
        epoch: int,
        train_dataset: object,
        callbacks: Callback | Sequence[Callback] | None = None,
        dataset_sink_mode: bool = False,
        sink_size: int = -1,
        initial_epoch: int = 0,
        initial_step: int = 0,
    ) -> TrainSummary:
        """Train for epochs ``initial_epoch + 1 .. epoch``; return where the time went.

        Resume: ``initial_epoch`` epochs and then ``initial_step`` steps of the next one
        are taken as done. With an mrecord pipeline (MindDataset -> map / batch /
        repeat) the data continues exactly where that run was, shuffles and random ops
        included; other datasets only renumber epochs and refuse ``initial_step > 0``.

        Raises ``ArgumentError`` for a bad ``epoch``, ``sink_size``, ``initial_epoch`` or
        ``initial_step``,
        re-raises what the step, a callback or the data pipeline raised (after shutting
        the producer down), and ``SinkTimeoutError`` when a batch does not arrive within
        ``op_timeout``.
        """
        check_int_at_least(epoch, "'epoch'", 1, where=_WHERE)
        check_int_at_least(initial_epoch, "'initial_epoch'", 0, where=_WHERE)
        if initial_epoch >= epoch:
            raise ArgumentError(
                f"For 'Model.train', 'initial_epoch' ({initial_epoch}) must be less than "
                f"'epoch' ({epoch})"
            )
        if (
            isinstance(sink_size, bool)
            or not isinstance(sink_size, int)
            or (sink_size != -1 and sink_size < 1)
        ):
            raise ArgumentError(
                f"For 'Model.train', 'sink_size' must be -1 or positive, but got {sink_size!r}"
            )
        if not isinstance(dataset_sink_mode, bool):
            raise WrongTypeError(f"dataset_sink_mode must be a bool, got {dataset_sink_mode!r}")
        check_int_at_least(initial_step, "'initial_step'", 0, where=_WHERE)
        source = BatchSource(train_dataset, name="train_dataset")
        cbs = CallbackList(callbacks)
        if dataset_sink_mode and sink_size > 0:
            per_epoch = sink_size
        else:
            why = "sink_size=-1 needs" if dataset_sink_mode else "dataset_sink_mode=False needs"
            per_epoch = source.require_size(f"{why} to know the batches per epoch")
        if initial_step >= per_epoch:
            raise ArgumentError(
                f"For 'Model.train', 'initial_step' ({initial_step}) must be less than the "
                f"steps per epoch ({per_epoch})"
            )
        done = initial_epoch * per_epoch + initial_step
        self._start = done if (initial_step or source.can_resume) else 0
        params = CallbackParams(
            train_network=self.network,
            train_dataset=train_dataset,
            epoch_num=epoch,
            batch_num=per_epoch,
            dataset_sink_mode=dataset_sink_mode,
            sink_size=sink_size,
            cur_step_num=done,
        )
        ctx = RunContext(params)
        epochs = range(initial_epoch + 1, epoch + 1)
        start = time.perf_counter()
        cbs.on_train_begin(ctx)
        if dataset_sink_mode:
            preprocess_s, push_s = self._train_sink(source, epochs, per_epoch, cbs, ctx)
        else:
            self._train_series(source, epochs, per_epoch, cbs, ctx)
            preprocess_s, push_s = params.data_wait_s, 0.0
        cbs.on_train_end(ctx)
        self.summary = TrainSummary(
            sink=dataset_sink_mode,
            epochs=max(params.cur_epoch_num - initial_epoch, 0),
            steps=params.cur_step_num - done,
            total_s=time.perf_counter() - start,
            data_wait_s=params.data_wait_s,
            step_s=params.step_s,
            preprocess_s=preprocess_s,
            push_s=push_s,
        )
        return self.summary

    def _train_series(
        self,
        source: BatchSource,
        epochs: range,
        per_epoch: int,
        cbs: CallbackList,
        ctx: RunContext,
    ) -> None:
        p = ctx.original_args()
        delivery = self._make_delivery()
        skip = p.cur_step_num % per_epoch  # steps of the first epoch already done
        stream: Iterator[Any] = source.stream(per_epoch * len(epochs) - skip, self._start)
        step = self.network
        try:
            for e in epochs:
                p.cur_epoch_num = e
                cbs.on_train_epoch_begin(ctx)
                for _ in range(per_epoch - skip):
                    cbs.on_train_step_begin(ctx)
                    t0 = time.perf_counter()
                    batch = next(stream, _MISSING)
                    if batch is _MISSING:
                        raise PipelineError(
                            f"train_dataset ended before step {p.cur_step_num + 1}; it reported "
                            f"{per_epoch} batches per epoch"
                        )
                    batch = delivery.receive(delivery.send(batch))
                    t1 = time.perf_counter()
                    p.net_outputs = call_step(step, batch)
                    p.data_wait_s += t1 - t0
                    p.step_s += time.perf_counter() - t1
                    p.cur_step_num += 1
                    cbs.on_train_step_end(ctx)
                    if ctx.get_stop_requested():
                        break
                skip = 0
                cbs.on_train_epoch_end(ctx)
                if ctx.get_stop_requested():
                    return
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                close()

    def _train_sink(
        self,
        source: BatchSource,
        epochs: range,
        per_epoch: int,
        cbs: CallbackList,
        ctx: RunContext,
    ) -> tuple[float, float]:
        p = ctx.original_args()
        skip = p.cur_step_num % per_epoch  # steps of the first epoch already done
        queue = DeviceQueue(
            source,
            queue_name=f"train_{next(_runs)}",
            num_batches=per_epoch * len(epochs) - skip,
            start=self._start,
            capacity=self._capacity,
            delivery=self._make_delivery(),
        )
        step = self.network
        get_next = queue.get_next
        with queue:
            for e in epochs:
                p.cur_epoch_num = e
                cbs.on_train_epoch_begin(ctx)
                cbs.on_train_step_begin(ctx)
                wait = busy = 0.0
                outputs = None
                steps = per_epoch - skip
                skip = 0
                for _ in range(steps):
                    t0 = time.perf_counter()
                    batch = get_next()
                    t1 = time.perf_counter()
                    outputs = call_step(step, batch)
                    wait += t1 - t0
                    busy += time.perf_counter() - t1
                p.net_outputs = outputs
                p.data_wait_s += wait
                p.step_s += busy
                p.cur_step_num += steps
                cbs.on_train_step_end(ctx)
                cbs.on_train_epoch_end(ctx)
                if ctx.get_stop_requested():
                    break
            stats = queue.stats()
        return stats.preprocess_s, stats.push_s


_MISSING = object()
