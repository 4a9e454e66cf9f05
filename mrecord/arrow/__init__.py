"""Arrow, Parquet and Hugging Face interoperability (``pip install 'mrecord[arrow]'``).

- :mod:`mrecord.arrow.types`: Arrow types ⇄ mrecord field specs (docs/ARROW.md);
- :mod:`mrecord.arrow.columns`: Arrow arrays ⇄ block columns, vectorized;
- :mod:`mrecord.arrow.tables`: ``Block.to_arrow`` / ``Block.from_arrow``;
- :mod:`mrecord.arrow.hf`: ``mrecord.to_hf`` / ``mrecord.from_hf``.

Importing this package does not import pyarrow; each function does, and a
missing pyarrow raises an ImportError naming the extra.
"""

from __future__ import annotations

from mrecord.arrow.hf import from_hf, to_hf

__all__ = ["from_hf", "to_hf"]
