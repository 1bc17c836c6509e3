"""SQLAlchemy 2 tables. "model" here means a table; ML models are encoders."""

from embedq.models.alias import ModelAlias
from embedq.models.api_key import DEFAULT_TENANT, ApiKey
from embedq.models.base import Base
from embedq.models.batch import Batch, File, FilePurpose
from embedq.models.embedding import Embedding
from embedq.models.engine import Database, map_db_errors, normalize_url
from embedq.models.job import Job, JobChunk, JobItem
from embedq.models.semantic import SemanticChange, SemanticEntry, SemanticNamespace
from embedq.models.semantic_feedback import (
    SemanticBudget,
    SemanticFeedback,
    SemanticHit,
    SemanticNegative,
)
from embedq.models.states import ChunkStatus, JobStatus, Lane, Priority

__all__ = [
    "DEFAULT_TENANT", "ApiKey", "Base", "Batch", "ChunkStatus", "Database", "Embedding",
    "File", "FilePurpose", "Job", "JobChunk", "JobItem", "JobStatus", "Lane", "ModelAlias",
    "Priority",
    "SemanticBudget", "SemanticChange", "SemanticEntry", "SemanticFeedback", "SemanticHit",
    "SemanticNamespace", "SemanticNegative",
    "map_db_errors", "normalize_url",
]
