"""Tests of datasets on object stores (mrecord.remote, fsspec): S3 (moto) and HTTP."""
