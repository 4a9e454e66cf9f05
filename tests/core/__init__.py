"""Tests of the top-level helpers: mrecord.background, mrecord.pool, mrecord.config."""
