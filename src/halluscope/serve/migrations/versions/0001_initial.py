"""The first schema: api_keys, jobs, job_records, results, reviews.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False, index=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("scopes", sa.String(100), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("revoked_at", TZ, nullable=True),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", TZ, nullable=False, index=True),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("done", sa.Integer, nullable=False),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("key_name", sa.String(100), nullable=True),
    )
    op.create_table(
        "job_records",
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("record", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uid", sa.String(32), nullable=False, unique=True),
        sa.Column("created_at", TZ, nullable=False, index=True),
        sa.Column("job_id", sa.String(32), nullable=True, index=True),
        sa.Column("job_index", sa.Integer, nullable=True),
        sa.Column("record_id", sa.String(200), nullable=False),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("probability", sa.Float, nullable=True),
        sa.Column("flagged", sa.Boolean, nullable=False, index=True),
        sa.Column("n_sentences", sa.Integer, nullable=False),
        sa.Column("key_name", sa.String(100), nullable=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.UniqueConstraint("job_id", "job_index", name="uq_results_job_index"),
    )
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id"), nullable=False, index=True),
        sa.Column("sentence", sa.Integer, nullable=True),
        sa.Column("label", sa.String(16), nullable=False),
        sa.Column("reviewer", sa.String(100), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )


def downgrade() -> None:
    for t in ("reviews", "results", "job_records", "jobs", "api_keys"):
        op.drop_table(t)
