"""api_keys, and the owning tenant of jobs, files and semantic-cache namespaces

Rows older than this revision belong to the tenant "default", the tenant of the
bootstrap keys (EMBEDQ_API_KEYS), so a deployment that used those keys keeps its data.

Revision ID: 0007_tenants
Revises: 0006_job_callbacks
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_tenants"
down_revision = "0006_job_callbacks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("scopes", sa.String(255), nullable=False),
        sa.Column("rate_per_s", sa.Float(), nullable=True),
        sa.Column("texts_per_day", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("digest", name="uq_api_keys_digest"),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("tenant", sa.String(64), nullable=False,
                                   server_default="default"))
    op.create_index("ix_jobs_tenant", "jobs", ["tenant"])
    with op.batch_alter_table("semantic_namespaces") as batch:
        batch.add_column(sa.Column("tenant", sa.String(64), nullable=False,
                                   server_default="default"))
    op.execute("UPDATE files SET owner = 'default' WHERE owner IS NULL")


def downgrade() -> None:
    with op.batch_alter_table("semantic_namespaces") as batch:
        batch.drop_column("tenant")
    op.drop_index("ix_jobs_tenant", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("tenant")
    op.drop_index("ix_api_keys_tenant", table_name="api_keys")
    op.drop_table("api_keys")
