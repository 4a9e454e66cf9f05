"""Tests of mrecord.ray: reading and writing through Ray Data."""
