"""Tests of FileWriter: round trips, errors, a stateful model of write/commit/append."""
