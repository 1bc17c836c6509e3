"""An upstream outage stays the caller's to retry once stored as a fingerprint's outcome
(the HTTP mapping, 502 + Retry-After, is pinned in test_api_wire)."""

from __future__ import annotations

from embedq.coordination.outcomes import decode_failure
from embedq.coordination.store import encode_failure
from embedq.errors import UpstreamError


def test_a_stored_upstream_failure_reads_back_as_an_upstream_error() -> None:
    stored = encode_failure(UpstreamError("the upstream embeddings API failed"))
    error = decode_failure(stored, "fp")
    assert type(error) is UpstreamError and error.retryable
    assert str(error) == "the upstream embeddings API failed"
