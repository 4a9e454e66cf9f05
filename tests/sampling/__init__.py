"""Tests of mrecord.sampling: orders, shuffles, sharding, samplers, slicing."""
