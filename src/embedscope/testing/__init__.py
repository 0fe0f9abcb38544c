"""Deterministic fakes and tiny in-memory tasks for doctests, tests and benchmarks (no model downloads).

Test-only helpers (mteb reference runs, tiny on-disk checkpoints) live in the repository's ``tests/support/``.
"""
