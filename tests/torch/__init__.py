"""Tests of mrecord.torch: splits, resume, transport, remote datasets, torchrun."""
