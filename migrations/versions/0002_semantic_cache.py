"""semantic cache: entries, the change log followed by watermark, namespaces

Revision ID: 0002_semantic
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_semantic"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "semantic_entries",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("space", sa.String(64), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("query_sha256", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_s", sa.Integer(), nullable=True),
        sa.Column("sliding", sa.Boolean(), nullable=False),
        sa.Column("hit_count", sa.BigInteger(), nullable=False),
        sa.Column("last_hit_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_semantic_entries"),
        sa.UniqueConstraint("namespace", "space", "query_sha256",
                            name="uq_semantic_entries_query"),
    )
    op.create_index("ix_semantic_entries_ns_space", "semantic_entries", ["namespace", "space"])
    op.create_index("ix_semantic_entries_expires_at", "semantic_entries", ["expires_at"])
    op.create_table(
        "semantic_changes",
        sa.Column("seq", BigId, autoincrement=True, nullable=False),
        sa.Column("entry_id", sa.BigInteger(), nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("space", sa.String(64), nullable=False),
        sa.Column("op", sa.String(8), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("seq", name="pk_semantic_changes"),
    )
    op.create_table(
        "semantic_namespaces",
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("hits", sa.BigInteger(), nullable=False),
        sa.Column("misses", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("namespace", name="pk_semantic_namespaces"),
    )


def downgrade() -> None:
    op.drop_table("semantic_namespaces")
    op.drop_table("semantic_changes")
    op.drop_index("ix_semantic_entries_expires_at", table_name="semantic_entries")
    op.drop_index("ix_semantic_entries_ns_space", table_name="semantic_entries")
    op.drop_table("semantic_entries")
