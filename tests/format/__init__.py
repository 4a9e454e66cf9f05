"""Tests of the on-disk format: versions, the .db index, MindSpore's own files, features."""
