"""Tests of mrecord.transforms and mrecord.vision."""
