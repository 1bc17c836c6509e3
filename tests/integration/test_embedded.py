"""With no servers configured, Client() runs the whole pipeline in-process."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from embedq import Client
from embedq.config import Settings


def test_embedded_client_embeds_and_caches(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    assert settings.embedded
    client = Client(settings)
    texts = ["alpha", "beta", "alpha"]
    first = client.embed_detailed(texts)
    assert [o.source for o in first.outcomes] == ["computed", "computed", "computed"]
    vectors = first.vectors()
    np.testing.assert_array_equal(vectors[0], vectors[2])
    second = client.embed_detailed(texts)
    assert {o.source for o in second.outcomes} == {"hot"}
    stats = client.stats()
    assert stats["encoded"] >= 2 and stats["cache_hits"] >= 2
    assert (tmp_path / "embedq.db").exists()
