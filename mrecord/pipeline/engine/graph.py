"""Building a pipeline: the tree check, node positions, the offload plan, the printed plan.

:func:`build_graph` is called whenever a pipeline is about to run (iterators,
``get_dataset_size``, ``plan``). It raises MindSpore's "not a tree" error when a
node has two live consumers, validates every node against its children's columns
(children first), numbers the nodes in post-order (a node's number does not change
when ops are added above it; per-row seeds use it) and plans offload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mrecord import config
from mrecord.errors import PipelineError
from mrecord.pipeline.engine.offload import OffloadPlan, plan_offload

if TYPE_CHECKING:
    from mrecord.pipeline.dataset import Dataset

__all__ = ["Graph", "Plan", "build_graph"]


@dataclass(frozen=True)
class Plan:
    """A readable pipeline plan: ``str(plan)`` draws the tree, offloaded ops marked."""

    lines: list[str]
    offloaded: dict[str, list[str]]
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        out = list(self.lines)
        if self.offloaded:
            out.append("offload (vectorized, once per output block / batch, at the end):")
            for column, ops in self.offloaded.items():
                out.append(f"  {column}: {', '.join(ops)}")
        out.extend(f"note: {note}" for note in self.notes)
        return "\n".join(out)


@dataclass
class Graph:
    """A validated pipeline tree."""

    root: Dataset
    positions: dict[int, int]
    offload: OffloadPlan

    def plan(self) -> Plan:
        """Render the tree (root first) with the offload decisions."""
        lines: list[str] = []

        def draw(node: Dataset, prefix: str, last: bool, top: bool) -> None:
            label = node._describe()
            split = self.offload.maps.get(id(node))
            if split is not None:
                label += f"  [offloaded: {', '.join(repr(op) for op in split.offloaded)}]"
            lines.append(label if top else f"{prefix}{'└── ' if last else '├── '}{label}")
            inner = "" if top else prefix + ("    " if last else "│   ")
            for i, child in enumerate(node.children):
                draw(child, inner, i == len(node.children) - 1, False)

        draw(self.root, "", True, True)
        offloaded = {
            column: [repr(o.op) for o in ops] for column, ops in self.offload.columns.items()
        }
        return Plan(lines, offloaded, list(self.offload.notes))


def build_graph(root: Dataset) -> Graph:
    """Validate the tree under ``root`` and plan it (see the module docstring)."""
    positions: dict[int, int] = {}
    seen: set[int] = set()

    def visit(node: Dataset, is_root: bool) -> None:
        if not is_root:
            consumers = [c for c in (ref() for ref in node._consumers) if c is not None]
            if len(consumers) > 1 or id(node) in seen:
                first, second = (consumers + consumers)[:2]
                raise PipelineError(
                    "The data pipeline is not a tree (i.e., one node has 2 consumers): "
                    f"{node!r} is consumed by {first!r} and by {second!r}; build the second "
                    "branch on top of the first (or create the source twice)"
                )
        seen.add(id(node))
        for child in node.children:
            visit(child, False)
        node._validate()
        positions[id(node)] = len(positions)

    visit(root, True)
    return Graph(root, positions, plan_offload(root, config.get_auto_offload(), positions))
