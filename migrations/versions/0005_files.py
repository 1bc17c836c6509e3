"""files, batches: the OpenAI Batch API over jobs

Revision ID: 0005_files
Revises: 0004_job_status_width
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_files"
down_revision = "0004_job_status_width"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("content", sa.LargeBinary(), nullable=True),
        sa.Column("batch_id", sa.String(40), nullable=True),
        sa.Column("errors", sa.Boolean(), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_files"),
    )
    op.create_index("ix_files_created_at", "files", ["created_at"])
    op.create_table(
        "batches",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("input_file_id", sa.String(40), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("endpoint", sa.String(64), nullable=False),
        sa.Column("completion_window", sa.String(8), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("encoding_format", sa.String(8), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finalized_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("output_file_id", sa.String(40), nullable=True),
        sa.Column("error_file_id", sa.String(40), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_batches_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_batches"),
    )
    op.create_index("ix_batches_created_at", "batches", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_batches_created_at", table_name="batches")
    op.drop_table("batches")
    op.drop_index("ix_files_created_at", table_name="files")
    op.drop_table("files")
