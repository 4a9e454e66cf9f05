"""The type of the ``make_dataset`` fixture (tests/conftest.py), for annotations in tests::

    def test_x(make_dataset: MakeDataset) -> None:
        first = make_dataset(100, shards=2)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class MakeDataset(Protocol):
    """The type of the ``make_dataset`` fixture (for annotations in tests)."""

    def __call__(
        self,
        rows: int = 40,
        *,
        shards: int = 3,
        folder: Path | None = None,
        name: str = "mixed.mrecord",
        **options: Any,
    ) -> Path: ...
