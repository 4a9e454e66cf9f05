"""Tests of mrecord.convert: sources, parallel and resumed conversion, Arrow/Parquet/HF."""
