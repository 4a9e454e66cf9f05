"""Tests of `mrecord serve` and RemoteDataset: API, wire format, transports, page."""
