"""Training API, as ``mindspore.train``: ``from mrecord.train import Model, LossMonitor``.

A thin re-export of :mod:`mrecord.pipeline.sink` (see ``docs/SINK.md``).
"""

from __future__ import annotations

from mrecord.pipeline.sink import (
    Callback,
    DataSink,
    DeviceQueue,
    LambdaCallback,
    LossMonitor,
    Model,
    RunContext,
    TimeMonitor,
    TrainSummary,
    data_sink,
)

__all__ = [
    "Callback",
    "DataSink",
    "DeviceQueue",
    "LambdaCallback",
    "LossMonitor",
    "Model",
    "RunContext",
    "TimeMonitor",
    "TrainSummary",
    "data_sink",
]
