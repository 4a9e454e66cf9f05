"""Offload planning: move the tail offloadable ops of a column out of the per-row maps.

An op is offloadable when it has ``offloadable = True`` and
``apply_batch(batch, seeds) -> batch`` (same result as calling it per row with
those seeds). A map is offloaded when ``map(..., offload=True)``, or when its
``offload`` is None and ``config.set_auto_offload(True)`` (the map's own argument
wins). Its trailing offloadable ops then run once per output block at the end of
the pipeline (after ``batch``: once per batch), vectorized; the map emits a hidden
column of per-row seed keys so the ops see the seeds they would have had in the map.

The constraints of MindSpore's offload doc, checked when a pipeline is built:

1. not with ``concat`` or ``zip``;
2. only the last map ops of a column: no later map, filter or per_batch_map may
   read the column (several maps can be offloaded if every later one on the column
   is offloaded entirely);
3. not with user ``output_columns`` (nor several input columns).

The offload step runs on its own pool of threads (as many as the offloaded maps'
``num_parallel_workers``, else the config default), several output blocks at a time,
results kept in order: numpy releases the GIL in the vectorized ops, so it scales.

A map that asked for offload (``offload=True``) and breaks a constraint raises
:class:`~mrecord.errors.OffloadError`; under ``set_auto_offload(True)`` the map
simply keeps its ops, and the plan says why. A map with no offloadable op at its
end keeps its ops either way (MindSpore does the same), also noted in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from mrecord.block import Block
from mrecord.errors import OffloadError
from mrecord.pipeline.engine.columns import HIDDEN_PREFIX, is_hidden
from mrecord.pipeline.engine.op_chain import is_offloadable, run_fused
from mrecord.pipeline.engine.seeds import op_seeds

if TYPE_CHECKING:
    from mrecord.pipeline.dataset import Dataset

__all__ = ["MapOffload", "OffloadPlan", "OffloadSite", "OffloadedOp", "plan_offload", "seed_column"]


class OffloadSite(Protocol):
    """What the planner reads of a node that declares ``offload_site`` (a ``map``): the
    engine plans from this, never from the op's class (ops sit above the engine)."""

    operations: list[Any]
    output_columns: list[str] | None
    num_parallel_workers: int | None
    offload: bool | None

    def resolved_input_columns(self) -> list[str]:
        """The columns the node's operations read."""
        ...


def seed_column(map_position: int) -> str:
    """Name of the hidden column carrying a map's per-row seed keys."""
    return f"{HIDDEN_PREFIX}{map_position}"


@dataclass(frozen=True)
class OffloadedOp:
    """One op moved to the offload step."""

    op: Any
    op_index: int  # index in its map's operation list (picks its seeds)
    seed_column: str
    depth: int  # batch nodes between its map and the end of the pipeline


@dataclass(frozen=True)
class MapOffload:
    """What one map keeps and what it hands to the offload step."""

    keep: tuple[Any, ...]
    offloaded: tuple[Any, ...]
    seed_column: str


@dataclass
class OffloadPlan:
    """Offloaded ops per final column, per-map splits, and explanations."""

    columns: dict[str, list[OffloadedOp]] = field(default_factory=dict)
    maps: dict[int, MapOffload] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    workers: int | None = None  # the largest num_parallel_workers of the offloaded maps

    def __bool__(self) -> bool:
        return bool(self.columns)

    def apply(self, block: Block) -> Block:
        """Run the offloaded ops on an output block; drop the hidden seed columns."""
        cols = dict(block.columns)
        for name, ops in self.columns.items():
            if name not in cols:
                continue
            values: Any = cols[name]
            i = 0
            while i < len(ops):
                off = ops[i]
                keys = cols[off.seed_column]
                group = _same_map_run(ops, i)
                fused = _apply_fused(group, values, keys, off.depth)
                if fused is not None:
                    done, values = fused
                    i += done
                    continue
                values = _apply_nested(off.op, off.op_index, values, keys, off.depth)
                i += 1
            cols[name] = values
        visible = {k: v for k, v in cols.items() if not is_hidden(k)}
        return Block(visible, block.row_ids)


def _same_map_run(ops: list[OffloadedOp], start: int) -> list[OffloadedOp]:
    """``ops[start]`` and the ops after it that come from the same map (consecutive)."""
    first = ops[start]
    end = start + 1
    while (
        end < len(ops)
        and ops[end].seed_column == first.seed_column
        and ops[end].depth == first.depth
        and ops[end].op_index == ops[end - 1].op_index + 1
    ):
        end += 1
    return ops[start:end]


def _apply_fused(
    group: list[OffloadedOp], values: Any, keys: Any, depth: int
) -> tuple[int, Any] | None:
    """A fused run at the start of ``group`` applied to stacked ``values`` (see
    :mod:`mrecord.transforms.fusion`): ``(ops done, result)``, or None to go one by one."""
    if len(group) < 2 or not isinstance(values, np.ndarray):
        return None
    if depth > 0 and not isinstance(keys, np.ndarray):
        return None
    # flatten the ``depth`` batch levels: axis ``depth`` indexes the ops' rows
    lead = values.shape[: depth + 1]
    rows = values.reshape(-1, *values.shape[depth + 1 :]) if depth else values
    flat_keys = np.asarray(keys).reshape(-1)
    if rows.shape[0] != flat_keys.shape[0]:
        return None
    ops = [off.op for off in group]
    first_index = group[0].op_index
    fused = run_fused(ops, 0, rows, flat_keys, first_index)
    if fused is None:
        return None
    done, result = fused
    return done, result.reshape(*lead, *result.shape[1:]) if depth else result


def _apply_nested(op: Any, op_index: int, values: Any, keys: Any, depth: int) -> Any:
    """Apply at ``depth`` levels of batching: depth 0 = rows of ``values`` are the op's rows."""
    if depth == 0:
        if isinstance(values, np.ndarray):
            return np.asarray(op.apply_batch(values, op_seeds(np.asarray(keys), op_index)))
        seeds = op_seeds(np.asarray(keys), op_index)
        return [
            np.asarray(op.apply_batch(np.asarray(v)[None], seeds[i : i + 1]))[0]
            for i, v in enumerate(values)
        ]
    parts = [_apply_nested(op, op_index, values[i], keys[i], depth - 1) for i in range(len(values))]
    if (
        parts
        and all(isinstance(p, np.ndarray) for p in parts)
        and len({(p.shape, p.dtype) for p in parts}) == 1
    ):
        if len(parts) == 1:  # a batch node's output: one row holding the batch, no copy
            return parts[0][np.newaxis]
        return np.stack(parts)
    return parts


@dataclass
class _Track:
    final: str
    depth: int


def plan_offload(root: Dataset, auto: bool, positions: dict[int, int]) -> OffloadPlan:
    """Decide which ops move to the offload step (see the module docstring).

    Every node is asked for its :class:`~mrecord.pipeline.engine.effects.ColumnEffects`; no
    node class is special here. A node that does not declare which columns it reads
    stops every column below it from being offloaded, with a note (or an
    :class:`OffloadError` naming it for a map that asked for ``offload=True``).
    """
    plan = OffloadPlan()
    nodes = [(n, n._column_effects()) for n in _walk(root)]
    wanting = [n for n, e in nodes if e.offload_site and _effective(_as_map(n), auto)]
    if not wanting:
        return plan
    joins = [n for n, e in nodes if e.joins or len(n.children) > 1]
    if joins:
        explicit = [m for m in wanting if _as_map(m).offload is True]
        reason = (
            f"offload is not supported on a pipeline with concat or zip ({joins[0]!r}); "
            "MindSpore's offload has the same limit"
        )
        if explicit:
            raise OffloadError(f"cannot offload {explicit[0]!r}: {reason}; remove offload=True")
        plan.notes.append(f"auto offload off: {reason}")
        return plan

    open_cols = {name: _Track(name, 0) for name in root._column_names()}
    closed: dict[str, str] = {}
    node: Dataset | None = root
    while node is not None and node.children:
        child = node.children[0]
        below = child._column_names()
        effects = node._column_effects()
        if effects.reads is None:
            why = (
                f"the later {node!r} does not declare which columns it reads or changes "
                "(Dataset._column_effects), so nothing below it can be moved past it"
            )
            closed.update({n: why for n in below})
            open_cols = {}
        elif effects.offload_site:
            mapped = _as_map(node)
            ins = mapped.resolved_input_columns()
            passing = {n: open_cols[n] for n in below if n not in ins and n in open_cols}
            new_closed = {n: closed[n] for n in below if n not in ins and n in closed}
            for n in ins:
                new_closed[n] = f"it is read by the later {node!r}"
            if _effective(mapped, auto):
                kept = _plan_map(mapped, ins, open_cols, closed, plan, positions[id(node)])
                if kept is not None:
                    passing[ins[0]] = kept
                    new_closed.pop(ins[0], None)
            open_cols, closed = passing, new_closed
        else:
            for n in effects.reads:
                open_cols.pop(n, None)
                closed[n] = f"it is read by {effects.read_by} {node!r}"
            if effects.batch_level:
                open_cols = {n: _Track(t.final, t.depth + 1) for n, t in open_cols.items()}
            if effects.renames:
                back = {new: old for old, new in effects.renames}
                open_cols = {back.get(n, n): t for n, t in open_cols.items()}
                closed = {back.get(n, n): r for n, r in closed.items()}
            if effects.drops:
                for n in below:
                    if n not in open_cols and n not in closed:
                        closed[n] = f"it is dropped by the later {node!r}"
        node = child
    return plan


def _as_map(node: Dataset) -> OffloadSite:
    """A node that declared ``offload_site``: it has a map's attributes."""
    return cast("OffloadSite", node)


def _plan_map(
    node: OffloadSite,
    ins: list[str],
    open_cols: dict[str, _Track],
    closed: dict[str, str],
    plan: OffloadPlan,
    position: int,
) -> _Track | None:
    """Offload the tail of one map; return the column's track if the map is fully offloaded."""
    problem = None
    if node.output_columns is not None:
        problem = "it has user output_columns (offload does not support them)"
    elif len(ins) != 1:
        problem = f"it has several input columns {ins!r} (offload works on one column per map)"
    elif ins[0] not in open_cols:
        why = closed.get(ins[0], "the column does not reach the end of the pipeline")
        problem = (
            f"column {ins[0]!r} is not at the end of the pipeline: {why}; only the last map "
            "operations of a column can be offloaded"
        )
    if problem is not None:
        if node.offload is True:
            raise OffloadError(f"cannot offload {node!r}: {problem}; or set offload=False")
        plan.notes.append(f"not offloaded {node!r}: {problem}")
        return None
    ops = node.operations
    k = 0
    while k < len(ops) and is_offloadable(ops[len(ops) - 1 - k]):
        k += 1
    if k == 0:
        plan.notes.append(f"not offloaded {node!r}: its last operation is not offloadable")
        return None
    track = open_cols[ins[0]]
    column = seed_column(position)
    moved = [
        OffloadedOp(op, len(ops) - k + i, column, track.depth)
        for i, op in enumerate(ops[len(ops) - k :])
    ]
    plan.columns[track.final] = moved + plan.columns.get(track.final, [])
    if node.num_parallel_workers is not None:
        plan.workers = max(plan.workers or 0, node.num_parallel_workers)
    plan.maps[id(node)] = MapOffload(tuple(ops[: len(ops) - k]), tuple(ops[len(ops) - k :]), column)
    if k < len(ops):
        plan.notes.append(
            f"partly offloaded {node!r}: {ops[len(ops) - k - 1]!r} and the ops before it are "
            "not offloadable and stay in the map"
        )
        return None
    return track


def _effective(node: OffloadSite, auto: bool) -> bool:
    return node.offload if node.offload is not None else auto


def _walk(node: Dataset) -> list[Dataset]:
    out = [node]
    for child in node.children:
        out.extend(_walk(child))
    return out
