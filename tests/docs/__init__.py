"""Tests of the project as a whole: docs and examples run, layering, packaging, public API."""
