"""MindSpore's dtype names (``mindspore.int32``, ``mstype.float32``, ...) as numpy types.

So lines such as ``TypeCast(ms.int32)`` or ``schema.add_column("x", de_type=mstype.int64)``
need only the import changed::

    import mrecord as ms                      # ms.int32 is numpy.int32
    from mrecord import dtype as mstype       # also mrecord.mstype

Each name is the numpy scalar type (``mrecord.int32 is numpy.int32``), so it is accepted
wherever mrecord takes a dtype and compares equal to ``np.dtype("int32")``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "bool_",
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "string",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

bool_ = np.bool_
int8 = np.int8
int16 = np.int16
int32 = np.int32
int64 = np.int64
uint8 = np.uint8
uint16 = np.uint16
uint32 = np.uint32
uint64 = np.uint64
float16 = np.float16
float32 = np.float32
float64 = np.float64
string = np.str_
