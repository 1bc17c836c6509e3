"""embedq: an embedding service that never computes the same vector twice."""

from embedq.client import Client
from embedq.config import Settings
from embedq.errors import EmbedqError
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.version import __version__

__all__ = ["Client", "EmbedqError", "EncodeSpec", "Settings", "__version__", "fingerprint"]
