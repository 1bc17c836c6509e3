"""merge the jobs and semantic-cache branches: one head again

Both 0002 revisions follow 0001, so `alembic upgrade head` failed with "Multiple head
revisions" and `downgrade -1` was ambiguous. This revision changes no table.

Revision ID: 0003_merge
Revises: 0002_jobs, 0002_semantic
Create Date: 2026-12-02
"""

revision = "0003_merge"
down_revision = ("0002_jobs", "0002_semantic")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
