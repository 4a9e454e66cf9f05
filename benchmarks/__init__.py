"""Benchmarks for mrecord, measured side by side with MindSpore when it is available.

Run everything with ``python -m benchmarks.run`` (or a subset, e.g.
``python -m benchmarks.run format pipeline --scale 0.1``); see ``docs/BENCHMARKS.md``.

Modules here that the MindSpore side imports (``workloads``, ``measure``, ``pipelines``,
``mindspore_side``) need only numpy (and Pillow for the JPEG workload), never mrecord,
so that they also run in MindSpore's separate virtual environment.
"""
