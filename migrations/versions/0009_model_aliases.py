"""model aliases switched at run time (`embedq models switch`)

Revision ID: 0009_model_aliases
Revises: 0008_semantic_feedback
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_model_aliases"
down_revision = "0008_semantic_feedback"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_aliases",
        sa.Column("alias", sa.String(64), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("revision", sa.String(255), nullable=False),
        sa.Column("switched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("alias", name="pk_model_aliases"),
    )


def downgrade() -> None:
    op.drop_table("model_aliases")
