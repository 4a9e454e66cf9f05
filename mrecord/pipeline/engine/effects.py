"""How a pipeline node changes columns, declared by the node (``Dataset._column_effects``).

Planning passes (offload today) walk the graph and ask each node for its
:class:`ColumnEffects` instead of switching on node classes, so a new node type
is planned correctly as soon as it declares what it does, and one that declares
nothing is treated as "may read every column": a plan that would need to move
work past it is refused with a message naming it.

=================  ============================================================
field              meaning
=================  ============================================================
``reads``          columns whose values the node looks at (None: maybe all)
``read_by``        how it reads them, for messages ("the predicate of")
``renames``        ``(old, new)`` pairs: a column keeps its values, changes name
``drops``          columns of its child it does not output are dropped
``batch_level``    each output row holds a batch of input rows (adds a level)
``joins``          it merges several children (concat, zip)
``offload_site``   a map whose trailing ops the offload step may take over
=================  ============================================================
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PASS_THROUGH", "READS_EVERYTHING", "ColumnEffects"]


@dataclass(frozen=True)
class ColumnEffects:
    """What one node does to the columns flowing through it (see the module docstring)."""

    reads: frozenset[str] | None = None
    read_by: str = "the later"
    renames: tuple[tuple[str, str], ...] = ()
    drops: bool = False
    batch_level: bool = False
    joins: bool = False
    offload_site: bool = False

    @property
    def known(self) -> bool:
        """Whether the node said which columns it reads."""
        return self.reads is not None


READS_EVERYTHING = ColumnEffects()
"""The default: a node that declares nothing may read (and change) any column."""

PASS_THROUGH = ColumnEffects(reads=frozenset())
"""Rows are selected, repeated or reordered; no column is read or changed."""
