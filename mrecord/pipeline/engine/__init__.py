"""The pipeline's engine: what runs a dataset definition.

Building a run (``graph.py``: tree check, node positions, offload plan), its shared state
(``context.py``: settings snapshot, resume positions, stop event, worker pools), the
iterators (``iterator.py``), the offload step (``offload.py``, ``op_chain.py``), worker
processes (``workers.py``), per-row seeds (``seeds.py``), and the pieces every op and
source shares: column helpers (``columns.py``), declared column effects (``effects.py``),
``Tensor`` (``tensor.py``). It imports no op and no source (docs/ARCHITECTURE.md).
"""
