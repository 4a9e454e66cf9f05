"""mrecord: a MindRecord-style storage format and reader for machine-learning training data.

MindSpore users switch by changing imports::

    from mrecord import FileWriter, MindDataset
"""

from __future__ import annotations

from mrecord import config, errors

__version__ = "0.1.0"

__all__ = ["__version__", "config", "errors"]
