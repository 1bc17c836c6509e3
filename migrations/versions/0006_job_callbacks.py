"""jobs.callback_*: a URL to POST the final state to, and its delivery state

Revision ID: 0006_job_callbacks
Revises: 0005_files
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_job_callbacks"
down_revision = "0005_files"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("callback_url", sa.String(2048), nullable=True))
        batch.add_column(sa.Column("callback_state", sa.String(16), nullable=True))
        batch.add_column(sa.Column("callback_attempts", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("callback_next_at", sa.DateTime(timezone=True),
                                   nullable=True))
        batch.add_column(sa.Column("callback_error", sa.Text(), nullable=True))
    # The tick looks for deliveries due; only pending ones are ever in this index.
    op.create_index("ix_jobs_callback_pending", "jobs", ["callback_next_at"],
                    postgresql_where=sa.text("callback_state = 'pending'"),
                    sqlite_where=sa.text("callback_state = 'pending'"))


def downgrade() -> None:
    op.drop_index("ix_jobs_callback_pending", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        for column in ("callback_error", "callback_next_at", "callback_attempts",
                       "callback_state", "callback_url"):
            batch.drop_column(column)
