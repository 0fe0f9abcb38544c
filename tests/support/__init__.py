"""Test-only helpers, not shipped in the wheel: mteb reference runs, mteb result loading, tiny on-disk checkpoints.

Tests import them as ``support.<module>`` (pyproject's ``[tool.pytest.ini_options] pythonpath`` puts ``tests/`` on
``sys.path``); benchmark scripts that need them add ``tests/`` to ``sys.path`` themselves
(``bench/bench_end_to_end.py``).
Deterministic fakes and tiny in-memory tasks that doctests use stay in :mod:`embedscope.testing`.
"""
