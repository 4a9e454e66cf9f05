"""The pipeline's ops: one node class per module (``map.py``, ``batch.py``, ...).

Each op subclasses :class:`~mrecord.pipeline.dataset.Dataset` and uses the engine
(``mrecord.pipeline.engine``); ops do not import each other (docs/ARCHITECTURE.md).
:class:`~mrecord.pipeline.dataset.Dataset`'s methods (``ds.map(...)``) build them.
"""
