"""Tests of the `mrecord` command line."""
