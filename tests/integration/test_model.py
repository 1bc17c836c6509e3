"""The real default model (all-MiniLM-L6-v2 from its PyPI package) end to end."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.model


def test_default_model_gives_normalized_384_dim_vectors(model_client: Any) -> None:
    vectors = model_client.embed(["how do I open an account", "how to create an account",
                                  "the boiling point of water"])
    assert all(v.shape == (384,) for v in vectors)
    assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-4) for v in vectors)
    paraphrase = float(vectors[0] @ vectors[1])
    unrelated = float(vectors[0] @ vectors[2])
    assert paraphrase > 0.7 > unrelated


def test_pipeline_vectors_equal_a_bare_encode(model_client: Any) -> None:
    from embedq.encoders.sentence import SentenceTransformerEncoder

    texts = ["Development files of gfal2", "manage mail domains for Dovecot and Postfix"]
    vectors = model_client.embed(texts)
    runtime_encoder = _embedded_encoder(model_client)
    assert isinstance(runtime_encoder, SentenceTransformerEncoder)
    bare = runtime_encoder.model.encode(texts, normalize_embeddings=True)
    for got, want in zip(vectors, bare, strict=True):
        assert float(got @ want) > 0.9999


def test_dimensions_truncate_and_renormalize(model_client: Any) -> None:
    full = model_client.embed(["matryoshka text"])[0]
    short = model_client.embed(["matryoshka text"], dimensions=128)[0]
    assert short.shape == (128,)
    np.testing.assert_allclose(short, full[:128] / np.linalg.norm(full[:128]), atol=1e-5)


def test_a_batch_paused_between_layers_for_another_gives_the_same_vectors(
        model_client: Any) -> None:
    """The batcher's preemption: a nested encode inside a layer hook leaves both exact."""
    import threading

    encoder = _embedded_encoder(model_client)
    outer = ["Development files of gfal2", "a long bulk text " * 20, "short"]
    inner = ["an online text that could not wait"]
    want_outer, want_inner = encoder.encode(outer), encoder.encode(inner)
    me = threading.get_ident()
    calls: list[int] = []
    got_inner: list[Any] = []

    def hook() -> None:
        if threading.get_ident() != me:
            return
        calls.append(1)
        if len(calls) == 3 and not got_inner:  # inside the outer batch, before layer 3
            got_inner.append(encoder.encode(inner))

    steps = encoder.add_checkpoint(hook)
    try:
        got_outer = encoder.encode(outer)
    finally:
        encoder.remove_checkpoint(hook)
    assert steps == 6  # all-MiniLM-L6-v2: six transformer layers
    assert len(calls) == 6 + 6  # the outer batch's layers and the nested one's
    np.testing.assert_allclose(got_outer, want_outer, atol=1e-5)
    np.testing.assert_allclose(got_inner[0], want_inner, atol=1e-5)


def _embedded_encoder(client: Any) -> Any:
    client.deployment.ensure_worker()
    runtime = client.deployment.worker_runtime
    assert runtime is not None
    return runtime.encoder


def test_a_hub_model_loads_its_pinned_revision_or_says_what_to_set() -> None:
    """The revision in the fingerprints is the one loaded: a commit not in the local hub
    cache is refused (nothing is downloaded: embedq loads offline)."""
    from embedq.config import Settings
    from embedq.encoders import load_encoder
    from embedq.errors import ConfigError

    settings = Settings.from_env({"EMBEDQ_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
                                  "EMBEDQ_MODEL_REVISION": "not-a-cached-commit"})
    with pytest.raises(ConfigError, match="@not-a-cached-commit") as refused:
        load_encoder(settings)
    assert "EMBEDQ_MODEL_REVISION" in str(refused.value)


def test_the_encoders_direct_pass_equals_sentence_transformers_encode(model_encoder: Any
                                                                      ) -> None:
    """The runtime encoder takes encode's steps itself (no device scan, no sorting, no
    tensor per row): its vectors are encode's, bit for bit, for texts of mixed lengths
    in one batch, and for one text alone."""
    from embedq.corpus import load_texts

    assert model_encoder._direct  # the default model asks for no prompt
    texts = load_texts(12, split="heldout")
    texts[3] = texts[3] * 20  # past the window: truncated alike
    bare = model_encoder.model.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                      normalize_embeddings=False, show_progress_bar=False)
    np.testing.assert_array_equal(model_encoder.encode(texts), bare)
    np.testing.assert_array_equal(model_encoder.encode(texts[:1]),
                                  model_encoder.model.encode(texts[:1], convert_to_numpy=True,
                                                             show_progress_bar=False))
    assert model_encoder.encode(texts).dtype == np.float32
