"""Long reliability campaigns whose figures are published in docs/RELIABILITY.md."""
