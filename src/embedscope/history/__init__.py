"""Results that outlive the run: a store of every result (SQLite or PostgreSQL), the gate CI trusts, the leaderboard.

- ``kinds.py``: store kinds, one record each (``sqlite``, ``postgresql``), URL parsing and the masked URL;
- ``tables.py``: the schema (SQLAlchemy Core tables); ``migrations/``: its Alembic revisions (a schema change is one);
- ``folders.py``: a result folder as a run to record (its files, byte for byte), and a run written back as one;
- ``store.py``: :class:`Store`: open (schema checked), record (one transaction: all or nothing), list, tag, export;
- ``sides.py``: a gate side (a result folder, ``run:ID`` or ``tag:NAME``) as one model's results;
- ``gate.py``: :func:`gate`: per task, the paired test ``compare`` uses, Holm across tasks; exit 0 / 1 / 3;
- ``web/``: ``embedscope serve``'s read-only leaderboard and its JSON API.

Data flows in from ``results/`` and ``compare/``; ``evaluation/`` records each run it writes when a store is set.
"""
