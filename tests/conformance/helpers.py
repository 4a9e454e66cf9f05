"""The recorded MindSpore cases and small inputs shared by the conformance tests.

Every expected value comes from ``tests/cases/conformance_cases.json``, written by
``tools/gen_conformance_cases.py`` running real MindSpore 2.10.
"""


from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

_DATA = json.loads((Path(__file__).parents[1] / "cases" / "conformance_cases.json").read_text())
CASES: list[dict[str, Any]] = _DATA["cases"]


def cases(name: str) -> list[dict[str, Any]]:
    found = [c for c in CASES if c["name"] == name]
    assert found, f"no case {name!r} in conformance_cases.json"
    return found


def one(name: str, **args: Any) -> dict[str, Any]:
    (found,) = [c for c in cases(name) if all(c["args"].get(k) == v for k, v in args.items())]
    return found


def expected_array(enc: dict[str, Any]) -> np.ndarray:
    array: np.ndarray = np.array(enc["data"], dtype=enc["dtype"]).reshape(enc["shape"])
    return array


def image(shape: list[int]) -> np.ndarray:
    return (np.arange(int(np.prod(shape))) % 256).astype(np.uint8).reshape(shape)


def gen_rows(n: int) -> Callable[[], Iterator[tuple[np.ndarray]]]:
    def rows() -> Iterator[tuple[np.ndarray]]:
        for i in range(n):
            yield (np.array([i], dtype=np.int64),)

    return rows


def first(iterator: Any) -> Any:
    """The first row; the iterator is stopped (no pipeline threads left for later tests)."""
    with iterator:
        return next(iterator)
