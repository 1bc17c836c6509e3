"""SQLAlchemy 2 tables. "model" here means a table; ML models are encoders."""

from embedq.models.base import Base
from embedq.models.embedding import Embedding
from embedq.models.engine import Database, map_db_errors, normalize_url
from embedq.models.job import Job, JobChunk, JobItem
from embedq.models.semantic import SemanticChange, SemanticEntry, SemanticNamespace

__all__ = [
    "Base", "Database", "Embedding", "Job", "JobChunk", "JobItem", "SemanticChange",
    "SemanticEntry", "SemanticNamespace", "map_db_errors", "normalize_url",
]
