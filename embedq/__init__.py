"""embedq: an embedding service that never computes the same vector twice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embedq.config import Settings
from embedq.errors import EmbedqError
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.version import __version__

if TYPE_CHECKING:
    from embedq.client import Client

__all__ = ["Client", "EmbedqError", "EncodeSpec", "Settings", "__version__", "fingerprint"]


def __getattr__(name: str) -> Any:
    # The client brings the whole service (Celery, SQLAlchemy, Redis): it is imported on
    # first use, so importing a light module (config, encoders, corpus, `embedq bench
    # gpu`) needs only what that module uses, e.g. on a GPU machine with torch and FAISS.
    if name == "Client":
        from embedq.client import Client

        return Client
    raise AttributeError(f"module 'embedq' has no attribute {name!r}")
