"""A remote OpenAI-compatible embeddings API as the encoder.

One pooled HTTP client per process (keep-alive), at most `upstream_concurrency` calls at
once, at most 2 retries with exponential backoff on 429, 5xx and timeouts, then a clear
UpstreamError (retryable: the texts are not at fault; the upstream's address is logged,
not put in the error callers see). A batch of different texts goes upstream as one
request, asking for base64 vectors (as the OpenAI SDK does: a 16-text batch of 384-d
vectors costs 0.14 ms to decode, 2.1 ms as JSON floats); an upstream that refuses
base64 (a 400 or 422 naming encoding_format) is asked in floats from then on, and one that
ignores it answers floats, which are read as well. The upstream model name is the model
name in every fingerprint, and EMBEDQ_MODEL_REVISION, required, its revision: a vendor
can change a model under its name.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any

import httpx
import numpy as np

from embedq.config import Settings
from embedq.encoders.base import Encoder, Matrix
from embedq.errors import UpstreamError

log = logging.getLogger(__name__)

MAX_RETRIES = 2
BACKOFF_S = 0.2
RETRY_STATUSES = {429, 500, 502, 503, 504}


class UpstreamEncoder(Encoder):
    flat_cost = True

    def __init__(self, settings: Settings, dimension: int | None = None) -> None:
        if not settings.upstream.url:
            raise UpstreamError("EMBEDQ_UPSTREAM_URL is not set")
        base = settings.upstream.url.rstrip("/")
        self.url = base if base.endswith("/embeddings") else base + "/embeddings"
        self.name = settings.upstream.model or settings.model.model
        # Checked by Settings.validate too; a Settings built in code skips that.
        unpinned = settings.unpinned_model()
        if unpinned is not None:
            raise unpinned
        assert settings.model.model_revision is not None
        self.revision = settings.model.model_revision
        self.dimension = dimension or settings.model.dimensions or 0
        self.max_seq_length = 8192
        self.device = "upstream"
        headers = {"Content-Type": "application/json"}
        if settings.upstream.api_key:
            headers["Authorization"] = f"Bearer {settings.upstream.api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(settings.upstream.timeout_s, connect=5.0),
            limits=httpx.Limits(
                max_connections=settings.upstream.concurrency,
                max_keepalive_connections=settings.upstream.concurrency,
            ),
        )
        self._slots = threading.BoundedSemaphore(settings.upstream.concurrency)
        self.encoding_format = "base64"
        self.calls = 0
        self.tokens = 0

    def warm_up(self) -> None:
        """Nothing to warm: a call would cost the upstream a request for no text."""

    def count_tokens(self, texts: list[str]) -> list[int]:
        # No tokenizer for a remote model: about 4 characters a token.
        return [min(self.max_seq_length, 1 + len(t) // 4) for t in texts]

    def encode(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        body = {"model": self.name, "input": texts, "encoding_format": self.encoding_format}
        data = self._post(body)
        rows = sorted(data.get("data", []), key=lambda d: int(d.get("index", 0)))
        if len(rows) != len(texts):
            raise UpstreamError(
                f"upstream returned {len(rows)} embeddings for {len(texts)} inputs"
            )
        out = np.stack([_vector(r.get("embedding")) for r in rows])
        if not self.dimension:
            self.dimension = int(out.shape[1])
        usage = data.get("usage") or {}
        self.tokens += int(usage.get("total_tokens") or usage.get("prompt_tokens") or 0)
        return out

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        last = ""
        for attempt in range(MAX_RETRIES + 1):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                with self._slots:
                    self.calls += 1
                    resp = self._client.post(self.url, json=body)
            except httpx.TimeoutException:
                last = "timed out"
                continue
            except httpx.TransportError as exc:
                last = f"unreachable ({exc.__class__.__name__})"
                continue
            if resp.status_code in RETRY_STATUSES:
                last = f"HTTP {resp.status_code}"
                continue
            if resp.status_code in (400, 422) and body["encoding_format"] == "base64" \
                    and "encoding_format" in resp.text:
                log.info("upstream %s refuses base64 vectors: asking in floats", self.url)
                self.encoding_format = "float"
                return self._post({**body, "encoding_format": "float"})
            if resp.status_code >= 400:
                raise self._failure(f"refused the request: HTTP {resp.status_code} "
                                    f"{resp.text[:200]}")
            try:
                payload: dict[str, Any] = resp.json()
            except ValueError as exc:
                raise self._failure("answered with non-JSON") from exc
            return payload
        raise self._failure(f"failed after {MAX_RETRIES + 1} attempts (last: {last})")

    def _failure(self, reason: str) -> UpstreamError:
        # The error reaches API callers: the upstream's address stays in the worker's log.
        log.warning("upstream %s %s; check the upstream service or EMBEDQ_UPSTREAM_URL",
                    self.url, reason)
        return UpstreamError(f"the upstream embeddings API {reason}")


def _vector(embedding: object) -> Matrix:
    """One answered vector: base64 of little-endian float32 bytes, or a list of floats."""
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except ValueError as exc:
            raise UpstreamError("the upstream embeddings API answered a vector that is "
                                "not base64") from exc
        if len(raw) % 4:
            raise UpstreamError("the upstream embeddings API answered a base64 vector "
                                "that is not float32 bytes")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not isinstance(embedding, list):
        raise UpstreamError("the upstream embeddings API answered an embedding that is "
                            "neither base64 nor a list of floats")
    return np.asarray(embedding, dtype=np.float32)
