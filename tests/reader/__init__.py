"""Tests of DatasetReader and MindPage: access, errors, processes, ragged columns, names."""
