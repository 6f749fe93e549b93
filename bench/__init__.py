"""Benchmarks that print numbers (`make bench`); never part of the test suite."""
