"""The store's schema: SQLAlchemy Core tables. A change here is an Alembic revision in ``migrations/versions/``
(``tests/history/test_migrations.py`` fails when the two differ).

- ``runs``: one model's results recorded together (a ``run`` of one model, a sweep point, a confirmed screen
  candidate, or an imported result folder): the model's identity, the system's settings, versions, host, time;
  ``content_key`` (a hash of every file recorded) makes recording idempotent;
- ``results``: one task of a run: its main score, what defines the evaluation (data, revision, splits, protocol
  parameters), its cost columns, and the result JSON;
- ``files``: every file of the run's result folder, byte for byte (result JSON, per-item rows, stage results,
  ``model_meta.json``), so that an export gives back exactly what was written;
- ``tags``: a name for a run (``baseline``, ``v1.3``).
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

SCHEMA_REVISION = "0001"
"""The Alembic revision this embedscope writes and reads (``migrations/versions/``)."""

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("content_key", String(64), nullable=False, unique=True),
    Column("model", Text, nullable=False),
    Column("revision", Text, nullable=False),
    Column("experiment", Text, nullable=True),
    Column("fingerprint", Text, nullable=True),
    Column("source", Text, nullable=False),  # run | sweep | screen | import
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("evaluated_at", Text, nullable=True),  # the newest result's date
    Column("embedscope_version", Text, nullable=True),
    Column("system", Text, nullable=False),  # JSON: what the system under test is (model, options, pipeline …)
    Column("host", Text, nullable=True),  # JSON: versions and hardware of a run recorded live
    Index("ix_runs_model_recorded", "model", "recorded_at"),
)

results = Table(
    "results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task", Text, nullable=False),
    Column("task_type", Text, nullable=True),
    Column("metric", Text, nullable=True),
    Column("main_score", Float, nullable=True),
    Column("evaluation", Text, nullable=False),  # JSON: what must match for a like-for-like comparison
    Column("seconds", Float, nullable=True),
    Column("cost", Text, nullable=True),  # JSON: API use, phase timings, peak memory …
    Column("items", Integer, nullable=False),  # per-item rows recorded (0: none)
    Column("path", Text, nullable=False),  # the result file's path inside the run's folder
    Index("ix_results_run", "run_id"),
    Index("ix_results_task", "task"),
)

files = Table(
    "files",
    metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("path", Text, primary_key=True),
    Column("content", LargeBinary, nullable=False),
)

tags = Table(
    "tags",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("tagged_at", DateTime(timezone=True), nullable=False),
)
