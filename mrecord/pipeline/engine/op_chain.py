"""Running a map's operations over a chunk of rows (in a thread or a worker process).

Operations run one after the other over the whole chunk (column at a time):

- an op with ``batchable = True`` (or ``offloadable = True``) and a chunk that is
  one stacked array runs once, vectorized: ``op.apply_batch(batch, seeds)``;
- a run of ops that a registered fuser recognises (``mrecord.transforms.fusion``, e.g.
  flip + Normalize + HWC2CHW) runs as one pass over the stacked chunk, same result;
- any other op runs per row; random ops (``is_random = True``) get
  ``seed=<int>``, the row's seed for that op (:func:`mrecord.pipeline.engine.seeds.op_seeds`).

Results per row are a tuple (several columns) or one value. An exception in an op
becomes :class:`~mrecord.errors.OperationError` naming the op, the input columns
and the row, chained to the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrecord.block import ColumnValues
from mrecord.errors import OperationError, PipelineError
from mrecord.pipeline.engine.columns import column_from_values
from mrecord.pipeline.engine.seeds import op_seeds
from mrecord.transforms.fusion import fused_run

__all__ = ["ChainSpec", "is_batchable", "is_offloadable", "is_random", "run_fused"]


def is_random(op: object) -> bool:
    """Whether ``op`` wants a per-row ``seed=`` argument."""
    return getattr(op, "is_random", False) is True


def is_offloadable(op: object) -> bool:
    """Whether ``op`` has a vectorized ``apply_batch(batch, seeds)`` (the offload contract)."""
    return getattr(op, "offloadable", False) is True and callable(getattr(op, "apply_batch", None))


def is_batchable(op: object) -> bool:
    """Whether ``op`` can run once over a stacked chunk: ``apply_batch`` and ``batchable``
    (every offloadable op is batchable)."""
    flagged = getattr(op, "batchable", False) is True or getattr(op, "offloadable", False) is True
    return flagged and callable(getattr(op, "apply_batch", None))


def run_fused(
    ops: Sequence[Any], start: int, batch: np.ndarray, keys: np.ndarray, index_offset: int = 0
) -> tuple[int, np.ndarray] | None:
    """Run a fused run of ``ops`` from ``start`` (see :mod:`mrecord.transforms.fusion`) on a
    stacked ``batch`` whose rows have seed ``keys``; ``(end, result)``, or None when no
    fusion applies (then the ops run one by one, which also reports any error). ``ops[j]``
    is op ``index_offset + j`` of its map (which picks its seeds)."""
    found = fused_run(ops, start)
    if found is None:
        return None
    end, kernel = found
    try:
        result = kernel(batch, [op_seeds(keys, index_offset + j) for j in range(start, end)])
    except Exception:
        return None
    return None if result is None else (end, result)


def _outputs(result: Any, last: bool, num_outputs: int) -> list[Any]:
    if isinstance(result, tuple):
        return list(result)
    if last and num_outputs > 1 and isinstance(result, list) and len(result) == num_outputs:
        return result
    return [result]


@dataclass(frozen=True)
class ChainSpec:
    """The ops a map runs, and what to name in errors. Picklable when the ops are."""

    ops: tuple[Any, ...]
    label: str
    input_columns: tuple[str, ...]
    num_outputs: int

    def __call__(
        self, task: tuple[list[ColumnValues], np.ndarray, np.ndarray, np.ndarray]
    ) -> list[ColumnValues]:
        """Apply the ops to ``(columns, row keys, positions, row ids)``; return the outputs."""
        columns, keys, positions, row_ids = task
        state: list[ColumnValues] = list(columns)
        n = len(keys)
        j = 0
        while j < len(self.ops):
            op = self.ops[j]
            batch = state[0] if len(state) == 1 and n > 0 else None
            if isinstance(batch, np.ndarray):
                fused = run_fused(self.ops, j, batch, keys)
                if fused is not None:
                    j, result = fused
                    state = [result]
                    continue
                if is_batchable(op):
                    try:
                        state = [np.asarray(op.apply_batch(batch, op_seeds(keys, j)))]
                        j += 1
                        continue
                    except Exception:
                        pass  # per row below finds and names the bad row
            state = self._per_row(op, j, state, keys, positions, row_ids, j == len(self.ops) - 1)
            j += 1
        if len(state) != self.num_outputs:
            raise PipelineError(
                f"{self.label}: the number of columns returned in 'map' operations should match "
                f"the number of 'output_columns': the operations returned {len(state)} "
                f"column(s), output_columns has {self.num_outputs}"
            )
        return state

    def _per_row(
        self,
        op: Any,
        j: int,
        state: Sequence[ColumnValues],
        keys: np.ndarray,
        positions: np.ndarray,
        row_ids: np.ndarray,
        last: bool,
    ) -> list[ColumnValues]:
        seeds = op_seeds(keys, j).tolist() if is_random(op) else None
        results = self._call_rows(op, state, seeds, positions, row_ids)
        if not results:
            return [[] for _ in range(self.num_outputs if last else len(state))]
        if not any(isinstance(r, (tuple, list)) for r in results):  # one value per row
            return [column_from_values(results)]
        rows: list[list[Any]] = []
        width = -1
        for i, result in enumerate(results):
            values = _outputs(result, last, self.num_outputs)
            if width < 0:
                width = len(values)
            elif len(values) != width:
                raise PipelineError(
                    f"{self.label}: operation {op!r} returned {len(values)} value(s) at row "
                    f"{int(positions[i])} but {width} at earlier rows"
                )
            rows.append(values)
        return [column_from_values([row[k] for row in rows]) for k in range(width)]

    def _call_rows(
        self,
        op: Any,
        state: Sequence[ColumnValues],
        seeds: list[int] | None,
        positions: np.ndarray,
        row_ids: np.ndarray,
    ) -> list[Any]:
        """``op`` on every row (``seed=`` for random ops); an error names the row."""
        results: list[Any] = []
        append = results.append
        i = 0
        try:
            if len(state) == 1 and seeds is None:
                for value in state[0]:
                    append(op(value))
                    i += 1
            elif len(state) == 1 and seeds is not None:
                for value, seed in zip(state[0], seeds, strict=True):
                    append(op(value, seed=seed))
                    i += 1
            else:
                for i in range(len(positions)):
                    args = [col[i] for col in state]
                    append(op(*args, seed=seeds[i]) if seeds is not None else op(*args))
        except Exception as exc:
            raise OperationError(
                f"{self.label}: operation {op!r} raised {type(exc).__name__}: {exc} "
                f"(input column(s) {list(self.input_columns)!r}, row {int(positions[i])} "
                f"of this map's input, row id {int(row_ids[i])}); see the chained "
                "traceback above for where it failed"
            ) from exc
        return results
