"""Tests of mrecord.train: the data sink, DeviceQueue and Model.train."""
