"""a namespace's trust score under its error budget, and the hits served over it

Revision ID: 0010_semantic_trust
Revises: 0009_model_aliases
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_semantic_trust"
down_revision = "0009_model_aliases"
branch_labels = None
depends_on = None

COLUMNS = (("semantic_budgets", "base_trust_score"), ("semantic_budgets", "trust_score"),
           ("semantic_hits", "trust_score"), ("semantic_feedback", "trust_score"))


def upgrade() -> None:
    for table, column in COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column(column, sa.Float(), nullable=True))


def downgrade() -> None:
    # The older code knows no trust score: its verdicts join the threshold's evidence, as
    # every verdict did there (a hit served over a conflict was then a hit like another).
    for table, column in reversed(COLUMNS):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
