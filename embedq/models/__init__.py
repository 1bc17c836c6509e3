"""SQLAlchemy 2 tables. "model" here means a table; ML models are encoders."""

from embedq.models.base import Base
from embedq.models.embedding import Embedding
from embedq.models.engine import Database, map_db_errors, normalize_url
from embedq.models.job import Job, JobChunk, JobItem

__all__ = [
    "Base", "Database", "Embedding", "Job", "JobChunk", "JobItem", "map_db_errors",
    "normalize_url",
]
