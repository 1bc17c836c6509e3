"""The embedding routes (POST /v1/embeddings, TEI's POST /embed and POST /) check their
caller's scope in their handlers (auth.check_scope), not through a router
dependency: they still refuse a request without a key (401) and a key without the scope
(403, TEI's routes in TEI's error shape), and OpenAPI still shows them keyed."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from embedq.api.app import create_app
from embedq.config import Settings
from embedq.models import Database
from embedq.models.migrate import upgrade
from embedq.tenants.keys import KeyStore


def test_the_embedding_routes_refuse_a_key_without_the_embed_scope(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    upgrade(settings.resolved_database_url)
    db = Database(settings.resolved_database_url)
    try:
        keys = KeyStore(db)
        jobs_only = keys.create("alice", "jobs-only", "jobs").key
        embedder = keys.create("alice", "embedder", "embed").key
    finally:
        db.dispose()
    body = {"input": ["a text to embed"]}
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/embeddings", json=body).status_code == 401
        refused = client.post("/v1/embeddings", json=body,
                              headers={"Authorization": f"Bearer {jobs_only}"})
        assert refused.status_code == 403, refused.text
        assert "lacks the scope 'embed'" in refused.json()["error"]["message"]
        answered = client.post("/v1/embeddings", json=body,
                               headers={"Authorization": f"Bearer {embedder}"})
        assert answered.status_code == 200, answered.text
        assert len(answered.json()["data"][0]["embedding"]) == 384
        paths = client.get("/openapi.json", headers={"Authorization": f"Bearer {embedder}"}
                           ).json()["paths"]
        for path in ("/v1/embeddings", "/embed"):
            assert paths[path]["post"]["security"] == [{"HTTPBearer": []}]
        for path in ("/embed", "/"):  # TEI's, answered in its error shape
            assert client.post(path, json={"inputs": "x"}).status_code == 401
            tei = client.post(path, json={"inputs": "x"},
                              headers={"Authorization": f"Bearer {jobs_only}"})
            assert tei.status_code == 403 and tei.json()["error_type"] == "Forbidden", tei.text
            vectors = client.post(path, json={"inputs": "x"},
                                  headers={"Authorization": f"Bearer {embedder}"})
            assert vectors.status_code == 200 and len(vectors.json()[0]) == 384
        # GET / is still the server's own description, not TEI's POST /.
        assert client.get("/", headers={"Authorization": f"Bearer {embedder}"}
                          ).status_code == 200
