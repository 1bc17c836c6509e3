"""The model's whole words (embedq/encoders/tokens.known_words), which the semantic checks
read typos against: from the vocabulary in the model folder's tokenizer.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from embedq.config import Settings
from embedq.encoders.tokens import known_words


def _model(folder: Path, vocab: Any) -> Settings:
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}}),
                                           encoding="utf-8")
    return Settings.from_env({"EMBEDQ_MODEL": str(folder)})


def test_wordpiece_words_are_the_pieces_that_start_a_word(tmp_path: Path) -> None:
    settings = _model(tmp_path / "wordpiece", {"[CLS]": 0, "apple": 1, "##s": 2, "Code": 3,
                                               "x": 4, "2024": 5, "café": 6})
    assert known_words(settings) == {"apple", "code"}


def test_bpe_and_unigram_words_carry_the_word_start_mark(tmp_path: Path) -> None:
    bpe = _model(tmp_path / "bpe", {"\u0120apple": 0, "ing": 1, "\u0120code": 2})
    assert known_words(bpe) == {"apple", "code"}
    unigram = _model(tmp_path / "unigram", [["\u2581puppy", -1.0], ["py", -2.0]])
    assert known_words(unigram) == {"puppy"}


def test_no_vocabulary_without_a_tokenizer_or_a_model(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    assert known_words(Settings.from_env({"EMBEDQ_MODEL": str(tmp_path / "bare")})) == set()
    assert known_words(Settings.from_env({"EMBEDQ_ENCODER": "hashing"})) == set()
