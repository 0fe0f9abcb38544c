"""Deterministic fakes and reference bridges for tests and benchmarks (no model downloads)."""
