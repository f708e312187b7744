"""Benchmarks that ship with drag-assistant (they print figures; no test times them)."""
