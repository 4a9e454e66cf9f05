"""mrecord's tests; tests/README.md maps each folder to what it tests."""
