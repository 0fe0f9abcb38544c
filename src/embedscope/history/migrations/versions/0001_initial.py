"""The first schema: runs, results, files, tags.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("content_key", sa.String(64), nullable=False, unique=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("revision", sa.Text, nullable=False),
        sa.Column("experiment", sa.Text, nullable=True),
        sa.Column("fingerprint", sa.Text, nullable=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evaluated_at", sa.Text, nullable=True),
        sa.Column("embedscope_version", sa.Text, nullable=True),
        sa.Column("system", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=True),
    )
    op.create_index("ix_runs_model_recorded", "runs", ["model", "recorded_at"])
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("task", sa.Text, nullable=False),
        sa.Column("task_type", sa.Text, nullable=True),
        sa.Column("metric", sa.Text, nullable=True),
        sa.Column("main_score", sa.Float, nullable=True),
        sa.Column("evaluation", sa.Text, nullable=False),
        sa.Column("seconds", sa.Float, nullable=True),
        sa.Column("cost", sa.Text, nullable=True),
        sa.Column("items", sa.Integer, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
    )
    op.create_index("ix_results_run", "results", ["run_id"])
    op.create_index("ix_results_task", "results", ["task"])
    op.create_table(
        "files",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("content", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "tags",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tagged_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for table in ("tags", "files", "results", "runs"):
        op.drop_table(table)
