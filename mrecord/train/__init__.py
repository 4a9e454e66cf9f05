"""Training API, as ``mindspore.train``: the data sink and a training-loop driver.

``from mrecord.train import Model, LossMonitor`` (see ``docs/SINK.md``).

- :class:`DeviceQueue`: bounded, named queue; ``get_next(timeout)`` with MindSpore's
  GetNext timeout diagnostics (:class:`~mrecord.errors.SinkTimeoutError`).
- :class:`Model`: ``Model(step).train(epoch, dataset, callbacks, dataset_sink_mode,
  sink_size)``.
- Callbacks: :class:`Callback`, :class:`RunContext`, :class:`LossMonitor`,
  :class:`TimeMonitor`, :class:`LambdaCallback`.
- :func:`data_sink`: the manual sink.
- :class:`TrainSummary`: time waiting for data vs time in the step.

See ``docs/SINK.md``.
"""

from __future__ import annotations

from mrecord.train.callbacks import (
    Callback,
    CallbackList,
    CallbackParams,
    LambdaCallback,
    LossMonitor,
    RunContext,
    TimeMonitor,
)
from mrecord.train.data_sink import DataSink, data_sink
from mrecord.train.delivery import Delivery, NumpyDelivery, TorchDelivery
from mrecord.train.device_queue import DeviceQueue, QueueStats
from mrecord.train.model import Model
from mrecord.train.summary import TrainSummary
from mrecord.train.timeline import ProducerState, PushRecord, Situation, diagnose

__all__ = [
    "Callback",
    "CallbackList",
    "CallbackParams",
    "DataSink",
    "Delivery",
    "DeviceQueue",
    "LambdaCallback",
    "LossMonitor",
    "Model",
    "NumpyDelivery",
    "ProducerState",
    "PushRecord",
    "QueueStats",
    "RunContext",
    "Situation",
    "TimeMonitor",
    "TorchDelivery",
    "TrainSummary",
    "data_sink",
    "diagnose",
]
