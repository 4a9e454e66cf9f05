"""What columns mean: class names and image columns, in a dataset's description.

A dataset's description (``FileWriter.add_schema(schema, desc)``, stored in every shard's
metadata) is free text. When it is a JSON object, its key ``"features"`` is the one place
where mrecord's converters, :func:`mrecord.from_hf` and the writers of other tools put
what a column *means*, and where :func:`mrecord.to_hf`, ``mrecord head`` and the
``mrecord serve`` page look for it (docs/FORMAT.md, "Column features")::

    {"features": {"label": {"class_names": ["airplane", "automobile", ...]},
                  "image": {"image": true}},
     ...any other keys, kept as they are}

- ``class_names``: the names of an integer column's values ``0, 1, ...`` (a class label);
- ``image: true``: a ``bytes`` column holds encoded images (PNG, JPEG, ...).

Pure functions of the description string: no file I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["FEATURES_KEY", "class_names", "describe", "image_columns"]

FEATURES_KEY = "features"


def _features(desc: str | None) -> dict[str, dict[str, Any]]:
    if not desc:
        return {}
    try:
        data = json.loads(desc)
    except ValueError:
        return {}  # free text: no features
    features = data.get(FEATURES_KEY) if isinstance(data, dict) else None
    if not isinstance(features, dict):
        return {}
    return {str(k): v for k, v in features.items() if isinstance(v, dict)}


def class_names(desc: str | None) -> dict[str, list[str]]:
    """``{column: [name of 0, name of 1, ...]}`` from a description (empty when none)."""
    out: dict[str, list[str]] = {}
    for column, feature in _features(desc).items():
        names = feature.get("class_names")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            out[column] = list(names)
    return out


def image_columns(desc: str | None) -> list[str]:
    """The bytes columns a description marks as encoded images."""
    return [c for c, feature in _features(desc).items() if feature.get("image") is True]


def describe(
    desc: Mapping[str, Any],
    *,
    class_names: Mapping[str, Sequence[str]] | None = None,
    images: Iterable[str] = (),
) -> str:
    """``desc`` as JSON with its ``"features"`` set from ``class_names`` and ``images``."""
    features: dict[str, dict[str, Any]] = {}
    for column, names in (class_names or {}).items():
        features.setdefault(column, {})["class_names"] = [str(n) for n in names]
    for column in images:
        features.setdefault(column, {})["image"] = True
    out = dict(desc)
    if features:
        out[FEATURES_KEY] = features
    return json.dumps(out)
