"""General tensor transforms, MindSpore's ``mindspore.dataset.transforms`` names.

``TypeCast`` is offloadable (it has ``apply_batch``); ``Compose`` runs a list of ops as one.
See docs/TRANSFORMS.md.
"""

from __future__ import annotations

from mrecord.transforms.array_ops import Concatenate, Mask, PadEnd, Relational, Slice, Unique
from mrecord.transforms.base import BatchOperation, TensorOperation
from mrecord.transforms.compose import Compose
from mrecord.transforms.random_select import RandomApply, RandomChoice
from mrecord.transforms.tensor_ops import Duplicate, Fill, OneHot
from mrecord.transforms.type_cast import TypeCast

__all__ = [
    "BatchOperation",
    "Compose",
    "Concatenate",
    "Duplicate",
    "Fill",
    "Mask",
    "OneHot",
    "PadEnd",
    "RandomApply",
    "RandomChoice",
    "Relational",
    "Slice",
    "TensorOperation",
    "TypeCast",
    "Unique",
]
