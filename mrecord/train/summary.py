"""What a training run spent its time on: "is data the bottleneck?" as a number."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrainSummary"]


@dataclass(frozen=True)
class TrainSummary:
    """Times of one run, in seconds (``Model.train`` returns it; ``str()`` explains it).

    ``data_wait_s`` is the time the training loop was blocked waiting for a batch;
    ``preprocess_s`` is the time spent producing batches. In series mode (sink off)
    the two are the same thing. In sink mode preprocessing runs in the producer
    thread, overlapped with the step, and only what it could not hide shows up as
    waiting.
    """

    sink: bool
    """True when the data was sunk (pipelined), False when fetched in series."""
    epochs: int
    steps: int
    total_s: float
    data_wait_s: float
    step_s: float
    preprocess_s: float
    push_s: float = 0.0
    """Sink mode: the producer's time delivering batches and waiting for room in the queue."""

    def _per_step_ms(self, seconds: float) -> float:
        return 1000.0 * seconds / self.steps if self.steps else 0.0

    @property
    def data_fraction(self) -> float:
        """Share of the run's time spent waiting for data (0..1)."""
        return self.data_wait_s / self.total_s if self.total_s > 0 else 0.0

    @property
    def data_bound(self) -> bool:
        """True when producing a batch takes longer than the step on it."""
        return self.preprocess_s > self.step_s

    def verdict(self) -> str:
        """One sentence answering "is data the bottleneck?"."""
        data_ms = self._per_step_ms(self.preprocess_s)
        step_ms = self._per_step_ms(self.step_s)
        waited = f"the step waited for data {100 * self.data_fraction:.0f}% of the time"
        if not self.sink:
            slower = "data" if self.data_bound else "the step"
            return (
                f"in series: each step costs data {data_ms:.3f} ms + step {step_ms:.3f} ms; "
                f"{slower} is the larger part; {waited}. Sink mode would overlap them "
                f"(about {max(data_ms, step_ms):.3f} ms per step)."
            )
        if self.data_bound:
            return (
                f"data is the bottleneck: producing a batch takes {data_ms:.3f} ms, the step "
                f"{step_ms:.3f} ms; {waited}. Speed up the pipeline (workers, offload)."
            )
        return (
            f"the step is the bottleneck: it takes {step_ms:.3f} ms, producing a batch "
            f"{data_ms:.3f} ms, which the sink hides; {waited}."
        )

    def __str__(self) -> str:
        mode = "sink (pipelined)" if self.sink else "series (no sink)"
        table = [("waiting for data", self.data_wait_s), ("in the step", self.step_s)]
        if self.sink:
            table += [
                ("preprocessing (thread)", self.preprocess_s),
                ("delivery + queue full", self.push_s),
            ]
        rows = [
            f"mode: {mode}; {self.epochs} epochs, {self.steps} steps in {self.total_s:.3f} s",
            f"{'':24}{'total s':>10}{'ms/step':>10}",
        ]
        rows += [f"{name:24}{s:10.3f}{self._per_step_ms(s):10.3f}" for name, s in table]
        rows.append(self.verdict())
        return "\n".join(rows)
