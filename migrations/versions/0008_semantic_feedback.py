"""semantic cache error budget: namespace policies, served hits, feedback, negatives

Revision ID: 0008_semantic_feedback
Revises: 0007_tenants
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_semantic_feedback"
down_revision = "0007_tenants"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "semantic_budgets",
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("base_threshold", sa.Float(), nullable=True),
        sa.Column("max_false_hit_rate", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.PrimaryKeyConstraint("namespace", name="pk_semantic_budgets"),
    )
    op.create_table(
        "semantic_hits",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("space", sa.String(64), nullable=False),
        sa.Column("entry_id", sa.BigInteger(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_semantic_hits"),
    )
    op.create_index("ix_semantic_hits_expires_at", "semantic_hits", ["expires_at"])
    op.create_table(
        "semantic_feedback",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("entry_id", sa.BigInteger(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_semantic_feedback"),
    )
    op.create_index("ix_semantic_feedback_ns_id", "semantic_feedback", ["namespace", "id"])
    op.create_table(
        "semantic_negatives",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("entry_id", sa.BigInteger(), nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_semantic_negatives"),
        sa.ForeignKeyConstraint(["entry_id"], ["semantic_entries.id"], ondelete="CASCADE",
                                name="fk_semantic_negatives_entry_id_semantic_entries"),
    )
    op.create_index("ix_semantic_negatives_entry_id", "semantic_negatives", ["entry_id"])


def downgrade() -> None:
    op.drop_index("ix_semantic_negatives_entry_id", table_name="semantic_negatives")
    op.drop_table("semantic_negatives")
    op.drop_index("ix_semantic_feedback_ns_id", table_name="semantic_feedback")
    op.drop_table("semantic_feedback")
    op.drop_index("ix_semantic_hits_expires_at", table_name="semantic_hits")
    op.drop_table("semantic_hits")
    op.drop_table("semantic_budgets")
