"""Hypothesis strategies for input that must be refused: bad field specs and bad values.

Each strategy yields something a correct writer rejects with a typed error that
names the culprit: :func:`bad_fields` gives ``(name, spec)`` pairs ``add_schema``
refuses with ``SchemaError``; :func:`bad_value_for` gives values
``write_raw_data`` refuses with ``RowValidationError`` for a field of that spec.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from mrecord.format.schema import NUMERIC_TYPES
from mrecord.testing.strategies import ALL_TYPES, field_names, field_specs

__all__ = ["bad_fields", "bad_value_for"]

_INT_RANGES = {
    name: (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
    for name, dt in NUMERIC_TYPES.items()
    if dt.kind in "iu"
}
_FLOAT_MAX = {"float16": 65504.0, "float32": float(np.finfo(np.float32).max)}


def _bad_names() -> st.SearchStrategy[Any]:
    """Names outside ``^[0-9A-Za-z_]+$``: empty, punctuation, spaces, non-ASCII, non-str."""
    with_bad_char = st.tuples(
        st.from_regex(r"[0-9A-Za-z_]{0,5}", fullmatch=True),
        st.sampled_from(["-", " ", ".", "/", '"', "'", ";", "é", "\x00", "\n", "名"]),
        st.from_regex(r"[0-9A-Za-z_]{0,5}", fullmatch=True),
    ).map("".join)
    return st.one_of(with_bad_char, st.just(""))


@st.composite
def _bad_spec(draw: st.DrawFn) -> dict[str, Any]:
    numeric = sorted(NUMERIC_TYPES)
    kind = draw(
        st.sampled_from(
            ["type", "no_type", "shape_on_blob", "neg_dim", "non_int_dim", "shape_len", "codec"]
        )
    )
    if kind == "type":
        ftype = draw(st.text(max_size=8).filter(lambda t: t not in ALL_TYPES))
        return {"type": ftype}
    if kind == "no_type":
        return {"shape": [1]}
    if kind == "shape_on_blob":
        blob = draw(st.sampled_from(["string", "bytes"]))
        return {"type": blob, "shape": [draw(st.integers(-1, 4))]}
    ftype = draw(st.sampled_from(numeric))
    if kind == "neg_dim":
        dims = draw(st.lists(st.integers(0, 3), max_size=2))
        dims.insert(draw(st.integers(0, len(dims))), draw(st.integers(-(2**40), -2)))
        return {"type": ftype, "shape": dims}
    if kind == "non_int_dim":
        bad = draw(st.sampled_from([1.5, "3", None, True, [2]]))
        return {"type": ftype, "shape": [2, bad]}
    if kind == "shape_len":
        return {"type": ftype, "shape": draw(st.sampled_from([[], "22", 3, [1] * 33]))}
    return {"type": ftype, "compression": draw(st.sampled_from(["lz4", "gzip", "", 1]))}


def bad_fields() -> st.SearchStrategy[tuple[Any, Any]]:
    """``(name, spec)`` pairs that are invalid: a bad name with a good spec, or a bad spec."""
    return st.one_of(
        st.tuples(_bad_names(), field_specs()),
        st.tuples(field_names(), _bad_spec()),
        st.tuples(field_names(), st.sampled_from(["int32", 3, None, ["int32"]])),
    )


def _other_dtype(ftype: str) -> st.SearchStrategy[np.dtype[Any]]:
    return st.sampled_from([dt for name, dt in sorted(NUMERIC_TYPES.items()) if name != ftype])


def _junk() -> st.SearchStrategy[Any]:
    return st.sampled_from([None, [1, 2], {"a": 1}, object(), (1,)])


def bad_value_for(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value that does not fit ``spec``: wrong type, dtype, shape, or out of range."""
    ftype = spec["type"]
    if ftype == "string":
        return st.one_of(st.binary(), st.integers(), st.floats(), _junk(), st.just("ok\ud800"))
    if ftype == "bytes":
        return st.one_of(st.text(), st.integers(), _junk())
    shape = spec.get("shape")
    if shape is not None:
        concrete = tuple(1 if d == -1 else d for d in shape)
        return st.one_of(
            _other_dtype(ftype).map(lambda dt: np.zeros(concrete, dtype=dt)),
            st.just(np.zeros((*concrete, 2), dtype=NUMERIC_TYPES[ftype])),
            st.just(np.zeros(concrete, dtype=NUMERIC_TYPES[ftype]).tolist()),
            st.text(max_size=3),
            st.just(None),
        )
    wrong_kind: list[st.SearchStrategy[Any]] = [st.text(max_size=3), st.binary(max_size=3), _junk()]
    if ftype == "bool":
        return st.one_of(st.integers(), st.floats(), *wrong_kind)
    if ftype in _INT_RANGES:
        low, high = _INT_RANGES[ftype]
        return st.one_of(
            st.integers(max_value=low - 1),
            st.integers(min_value=high + 1),
            st.floats(),
            st.booleans(),
            *wrong_kind,
        )
    limit = _FLOAT_MAX.get(ftype)
    out_of_range = [] if limit is None else [st.floats(min_value=limit * 2, allow_infinity=False)]
    return st.one_of(st.booleans(), st.integers(min_value=2**1100), *out_of_range, *wrong_kind)
