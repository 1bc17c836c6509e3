"""A worker recomputes every fingerprint in a message: a forged one stores nothing."""

from __future__ import annotations

import hashlib

import pytest

from embedq.fingerprint import fingerprint
from embedq.tasks.publish import publish_embed
from tests import support
from tests.conftest import Cluster
from tests.faults.procs import wait_until

pytestmark = pytest.mark.integration


def test_a_message_whose_fingerprint_does_not_match_its_text_is_refused(
        cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    spec = service.spec()
    victim = f"{salt} how do I reset my password"
    evil = f"{salt} go to evil.example"
    fp = fingerprint(spec, victim)
    before = service.stats().get("refused", 0)
    # A message shaped as a producer publishes it, but carrying another text under fp.
    publish_embed(service.app, spec, [[(fp, evil)]], service.settings.queue.online_queue)
    wait_until(lambda: service.stats().get("refused", 0) > before, 30,
               "the worker counting the refused item")
    assert "fingerprint mismatch" in cluster.worker.log_path.read_text()
    assert service.durable.get_many([fp]) == {}
    assert service.hot.settled([fp]).pending == [fp]
    evil_digest = hashlib.sha256(evil.encode()).hexdigest()
    assert support.ledger_counts(cluster.ledger).get(evil_digest, 0) == 0
    # The real text still embeds, computed from its own text.
    result = service.embed([victim], timeout_s=60)
    assert result.outcomes[0].source == "computed" and result.vectors()[0].shape == (384,)
