"""Crash, power-loss, corruption, fuzz, concurrency and recovery tests (docs/RELIABILITY.md)."""
