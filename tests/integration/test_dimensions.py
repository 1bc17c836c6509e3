"""`dimensions` is answered as asked, whatever the deployment's default width."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def narrow_api(cluster: Cluster) -> Iterator[ApiServer]:
    """An API whose default width is 256 (EMBEDQ_DIMENSIONS), over the shared worker."""
    env = {**cluster.env, "EMBEDQ_DIMENSIONS": "256"}
    with ApiServer(env, cluster.tmp / "api-narrow.log") as server:
        yield server


def widths(api: ApiServer, salt: str, dimensions: int | None) -> int:
    body: dict[str, object] = {"input": [f"{salt} width"], "model": "all-MiniLM-L6-v2"}
    if dimensions is not None:
        body["dimensions"] = dimensions
    response = httpx.post(api.url + "/v1/embeddings", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return len(response.json()["data"][0]["embedding"])


def test_the_native_width_is_answered_when_the_default_is_narrower(
        narrow_api: ApiServer, salt: str) -> None:
    assert widths(narrow_api, salt, None) == 256
    assert widths(narrow_api, salt, 384) == 384  # was 256 with a 200
    assert widths(narrow_api, salt, 128) == 128
    assert widths(narrow_api, salt, None) == 256  # the cached 384 did not answer this


def test_wider_than_the_model_is_refused(narrow_api: ApiServer) -> None:
    response = httpx.post(narrow_api.url + "/v1/embeddings",
                          json={"input": "x", "dimensions": 385}, timeout=30)
    assert response.status_code == 422, response.text
    assert "wider than the model's 384" in response.json()["error"]["message"]
