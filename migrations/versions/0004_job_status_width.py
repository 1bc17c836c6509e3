"""jobs.status holds "succeeded_with_errors": widen it from 16 to 32 characters

Revision ID: 0004_job_status_width
Revises: 0003_merge
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_job_status_width"
down_revision = "0003_merge"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column("status", existing_type=sa.String(16), type_=sa.String(32),
                           existing_nullable=False)


def downgrade() -> None:
    # The older code knows no "succeeded_with_errors": it called such a job succeeded.
    op.execute("UPDATE jobs SET status = 'succeeded' WHERE status = 'succeeded_with_errors'")
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column("status", existing_type=sa.String(32), type_=sa.String(16),
                           existing_nullable=False)
