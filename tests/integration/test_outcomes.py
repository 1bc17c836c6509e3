"""Outcomes across requests: an old failure never answers a new computation."""

from __future__ import annotations

import numpy as np
import pytest

from embedq.coordination.outcomes import publish_failures
from embedq.errors import EmbeddingFailed
from embedq.fingerprint import fingerprint
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


def test_a_transient_failure_does_not_poison_the_next_request(cluster: Cluster,
                                                             salt: str) -> None:
    service = cluster.service()
    text = f"{salt} once failed"
    fp = fingerprint(service.spec(), text)
    # What a failed computation leaves: its failure, kept failure_ttl_s, and no claim.
    publish_failures(service.hot, {fp: EmbeddingFailed("upstream blip", fp)}, ttl_s=300)
    result = service.embed([text], timeout_s=60)
    outcome = result.outcomes[0]
    assert outcome.error is None, outcome.error
    assert outcome.source == "computed"
    assert outcome.vector is not None and np.isclose(np.linalg.norm(outcome.vector), 1.0)
