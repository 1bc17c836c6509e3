"""SQLAlchemy 2 tables. "model" here means a table; ML models are encoders."""

from embedq.models.base import Base
from embedq.models.embedding import Embedding
from embedq.models.engine import Database, map_db_errors, normalize_url

__all__ = ["Base", "Database", "Embedding", "map_db_errors", "normalize_url"]
