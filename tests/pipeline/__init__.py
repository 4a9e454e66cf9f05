"""Tests of mrecord.pipeline: the dataset graph, ops, workers, resume, sources."""
