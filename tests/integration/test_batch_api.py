"""The OpenAI Batch API end to end: the official `openai` SDK against `embedq serve` and a
real worker (faulty encoder), on Redis and Postgres."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer
from tests.support import wait_until

pytestmark = pytest.mark.integration

FINAL = {"completed", "failed", "cancelled", "expired"}


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    with ApiServer(cluster.env, cluster.tmp / "api-batch.log") as server:
        yield server


def sdk(api: ApiServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=api.url + "/v1", api_key="unused", max_retries=0)


def request_line(custom_id: str, text: str | list[str], **body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings",
            "body": {"input": text, **body}}


def jsonl(lines: list[dict[str, Any]]) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())


def upload(client: openai.OpenAI, lines: list[dict[str, Any]]) -> Any:
    return client.files.create(file=("requests.jsonl", jsonl(lines)), purpose="batch")


def wait_final(client: openai.OpenAI, batch_id: str, timeout_s: float = 120) -> Any:
    last: list[Any] = []

    def final() -> bool:
        last[:] = [client.batches.retrieve(batch_id)]
        return bool(last[0].status in FINAL)

    wait_until(final, timeout_s, f"batch {batch_id} reaching a final status", interval_s=0.2)
    return last[0]


def content_lines(client: openai.OpenAI, file_id: str) -> dict[str, dict[str, Any]]:
    text = client.files.content(file_id).text
    rows = [json.loads(line) for line in text.splitlines()]
    return {row["custom_id"]: row for row in rows}


def test_sdk_batch_answers_what_embeddings_answers(api: ApiServer, salt: str) -> None:
    client = sdk(api)
    model = client.models.list().data[0].id
    one = f"{salt} batch one"
    pair = [f"{salt} batch two", f"{salt} batch three"]
    broken = f"{salt} batch [[nan]]"
    uploaded = upload(client, [
        request_line("one", one, model=model),
        request_line("pair", pair, model=model),
        request_line("broken", broken, model=model),
    ])
    assert uploaded.id.startswith("file-") and uploaded.object == "file"
    assert uploaded.purpose == "batch" and uploaded.bytes > 0
    assert client.files.retrieve(uploaded.id).filename == "requests.jsonl"

    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings",
                                  completion_window="24h", metadata={"run": salt})
    assert batch.id.startswith("batch_") and batch.metadata == {"run": salt}
    done = wait_final(client, batch.id)

    assert done.status == "completed"
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed,
            done.request_counts.failed) == (3, 2, 1)
    assert done.output_file_id and done.error_file_id
    output = content_lines(client, done.output_file_id)
    assert set(output) == {"one", "pair"}
    for custom_id, texts in (("one", [one]), ("pair", pair)):
        row = output[custom_id]
        assert row["id"].startswith("batch_req_") and row["error"] is None
        assert row["response"]["status_code"] == 200
        body = row["response"]["body"]
        direct = client.embeddings.create(model=model, input=texts)
        assert body["object"] == "list" and body["model"] == direct.model
        assert body["usage"]["prompt_tokens"] == direct.usage.prompt_tokens
        assert [d["index"] for d in body["data"]] == list(range(len(texts)))
        for got, want in zip(body["data"], direct.data, strict=True):
            np.testing.assert_array_equal(np.asarray(got["embedding"], np.float32),
                                          np.asarray(want.embedding, np.float32))
    errors = content_lines(client, done.error_file_id)
    assert set(errors) == {"broken"}
    assert errors["broken"]["response"] is None
    assert errors["broken"]["error"]["code"] == "embedding_failed"
    # Rendered again from the job, the content is the same bytes; its size is stated.
    first = client.files.content(done.output_file_id).content
    assert client.files.content(done.output_file_id).content == first
    assert client.files.retrieve(done.output_file_id).bytes == len(first)
    assert batch.id in {b.id for b in client.batches.list(limit=100).data}

    client.files.delete(uploaded.id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)
    # The job holds the texts: the output outlives the input file.
    assert client.files.content(done.output_file_id).content == first


def test_base64_lines_decode_to_the_float_vectors(api: ApiServer, salt: str) -> None:
    client = sdk(api)
    model = client.models.list().data[0].id
    text = f"{salt} base64 line"
    uploaded = upload(client, [request_line("b", text, model=model, encoding_format="base64")])
    batch = wait_final(client, client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h").id)
    assert batch.status == "completed" and batch.output_file_id
    encoded = content_lines(client, batch.output_file_id)["b"]["response"]["body"]
    vector = np.frombuffer(base64.b64decode(encoded["data"][0]["embedding"]), "<f4")
    direct = client.embeddings.create(model=model, input=[text]).data[0].embedding
    np.testing.assert_array_equal(vector, np.asarray(direct, np.float32))


def test_cancel_before_the_window_opens_fails_every_request(
    cluster: Cluster, salt: str
) -> None:
    now = datetime.now(UTC)
    window = f"{(now + timedelta(hours=2)):%H:00}-{(now + timedelta(hours=3)):%H:00}"
    env = {**cluster.env, "EMBEDQ_BATCH_WINDOW": window}
    with ApiServer(env, cluster.tmp / "api-batch-window.log") as server:
        client = sdk(server)
        uploaded = upload(client, [request_line("x", f"{salt} waits"),
                                   request_line("y", [f"{salt} waits too", f"{salt} also"])])
        batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings",
                                      completion_window="24h")
        assert client.batches.retrieve(batch.id).status == "in_progress"
        cancelled = client.batches.cancel(batch.id)
        assert cancelled.status == "cancelled"
        assert cancelled.request_counts is not None
        assert (cancelled.request_counts.total, cancelled.request_counts.completed,
                cancelled.request_counts.failed) == (2, 0, 2)
        assert cancelled.output_file_id is None and cancelled.error_file_id
        errors = content_lines(client, cancelled.error_file_id)
        assert {row["error"]["code"] for row in errors.values()} == {"batch_cancelled"}
        assert set(errors) == {"x", "y"}


def test_a_malformed_line_is_refused_by_number(api: ApiServer) -> None:
    client = sdk(api)
    lines = jsonl([request_line("a", "fine")]).getvalue() + b'{"custom_id": "b", "method"\n'
    with pytest.raises(openai.BadRequestError) as caught:
        client.files.create(file=("bad.jsonl", io.BytesIO(lines)), purpose="batch")
    assert "line 2" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        upload(client, [request_line("a", "x"), request_line("a", "y")])
    assert "line 2" in caught.value.message and "custom_id" in caught.value.message
    wrong_url = {**request_line("c", "x"), "url": "/v1/chat/completions"}
    with pytest.raises(openai.BadRequestError) as caught:
        upload(client, [wrong_url])
    assert "line 1" in caught.value.message


def test_a_file_is_checked_whole_at_upload_so_an_accepted_one_makes_a_batch(
        api: ApiServer) -> None:
    """What POST /v1/batches would refuse is refused at POST /v1/files, naming the line:
    text no row can store (422), the model (404) and width (422) the batch would run."""
    client = sdk(api)
    for line, error, says in (
            (request_line("a", "ok\ud800"), openai.UnprocessableEntityError, "surrogate"),
            (request_line("a\x00", "ok"), openai.UnprocessableEntityError, "NUL"),
            (request_line("\udfff", "ok"), openai.UnprocessableEntityError, "surrogate"),
            (request_line("a", "ok", model="nope"), openai.NotFoundError, "nope"),
            (request_line("a", "ok", dimensions=385), openai.UnprocessableEntityError, "385")):
        content = json.dumps(line).encode()  # \ud800 as JSON escapes, as a client sends
        with pytest.raises(error) as caught:
            client.files.create(file=("f.jsonl", io.BytesIO(content)), purpose="batch")
        assert "line 1" in caught.value.message and says in caught.value.message, line


def test_unknown_ids_are_404_in_the_openai_shape(api: ApiServer) -> None:
    client = sdk(api)
    with pytest.raises(openai.NotFoundError) as caught:
        client.files.retrieve("file-nope")
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "not_found"
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-nope", endpoint="/v1/embeddings",
                              completion_window="24h")
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")


def test_a_wrong_endpoint_is_a_400(api: ApiServer, salt: str) -> None:
    client = sdk(api)
    uploaded = upload(client, [request_line("a", f"{salt} endpoint")])
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(input_file_id=uploaded.id,
                              endpoint="/v1/chat/completions",  # type: ignore[arg-type]
                              completion_window="24h")
    assert "/v1/embeddings" in caught.value.message


def test_hostile_list_cursors_and_ids_are_4xx(api: ApiServer) -> None:
    """Found by the random-seed fuzz: a NUL in `after` reached Postgres (500)."""
    for path in ("/v1/batches?after=%00x", "/v1/files?after=%00x", "/v1/files?purpose=%00",
                 "/v1/batches/batch_%00", "/v1/files/file-%C3%A9%00"):
        response = httpx.get(api.url + path, timeout=30)
        assert 400 <= response.status_code < 500, (path, response.status_code, response.text)
