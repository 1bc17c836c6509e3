"""Token counts and model facts without the model: what an API process needs.

`load_token_counter(settings)` reads only the tokenizer and a few JSON files from the
model folder (`model_path`), never the weights, so an API process can count tokens,
report the window and the dimension, refuse or flag inputs over the window exactly as
the worker's encoder will see them, and list an input's tokens with their offsets.

Counting rules, per encoder:
  sentence-transformers  the model's own tokenizer, special tokens included, untruncated;
                         the window is `max_seq_length` from sentence_bert_config.json
  hashing, faulty        the hashing encoder's rule (2 + whitespace-separated words)
  upstream               the hashing rule as an estimate; window and dimension unknown
                         (the remote API truncates and decides by itself)
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedq.config import Settings
from embedq.encoders import model_path
from embedq.encoders.hashing import HashingEncoder
from embedq.errors import ConfigError

Counter = Callable[[list[str]], list[int]]
Tokenizer = Callable[[list[str], bool], list[list["Token"]]]

# Tokenizers emit at most one token per UTF-8 byte, plus special tokens: a text this much
# under the window in bytes cannot reach it, and is not tokenized to find out.
_SPECIAL_TOKENS_BOUND = 8


# Characters tokenized at once by `tokenize` under a token limit (a token covers at least
# one character but a special one, so a group holds about this many tokens at most).
GROUP_CHARS = 16_384


class TooManyTokens(Exception):
    """More tokens than `tokenize`'s `max_tokens`: `counted` in the first `inputs` texts."""

    def __init__(self, counted: int, inputs: int) -> None:
        super().__init__(f"{counted} tokens in the first {inputs} inputs")
        self.counted = counted
        self.inputs = inputs


@dataclass(frozen=True)
class Token:
    """One token of an input: `start`/`stop` are character offsets into the input (None
    for special tokens, which no text produced)."""

    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


@dataclass(frozen=True)
class TokenCounter:
    """Counts the tokens each text costs the model, before truncation to `window`."""

    count: Counter
    window: int | None  # the model's max sequence length; None when unknown
    dimension: int | None  # the model's native output width; None when unknown
    split: Tokenizer | None = None  # each text's tokens, untruncated; None: count only
    pooling: str | None = None  # "mean", "cls", ... from the model's Pooling module

    def raw_tokens(self, texts: list[str]) -> list[int]:
        return self.count(texts) if texts else []

    def tokenize(self, texts: list[str], add_special_tokens: bool = True,
                 max_tokens: int | None = None) -> list[list[Token]]:
        """Each text's tokens as the model sees them, before truncation to the window.

        With `max_tokens`, TooManyTokens as soon as the texts tokenized so far hold more:
        texts are tokenized a group of about GROUP_CHARS characters at a time, so what is
        held before the refusal is bounded by the limit plus one group, whatever the
        request's size."""
        split = self.split
        if split is None:
            raise ConfigError(
                "this model's tokenizer cannot list tokens with offsets (it has no "
                "tokenizer.json): serve a model folder with a fast tokenizer to use this"
            )
        out: list[list[Token]] = []
        start = 0
        while start < len(texts):
            stop, chars = start, 0
            while stop < len(texts) and (stop == start or chars + len(texts[stop]) <= GROUP_CHARS):
                chars += len(texts[stop])
                stop += 1
            out.extend(split(texts[start:stop], add_special_tokens))
            total = sum(map(len, out))
            if max_tokens is not None and total > max_tokens:
                raise TooManyTokens(total, stop)
            start = stop
        return out

    def over_window(self, texts: list[str]) -> list[tuple[int, int]]:
        """(index, tokens) of each text longer than the window, in input order."""
        if self.window is None:
            return []
        limit = self.window - _SPECIAL_TOKENS_BOUND
        suspects = [i for i, t in enumerate(texts) if len(t) > limit // 4
                    and len(t.encode("utf-8", "surrogatepass")) > limit]
        if not suspects:
            return []
        counts = self.raw_tokens([texts[i] for i in suspects])
        return [(i, n) for i, n in zip(suspects, counts, strict=True) if n > self.window]

    def billed_tokens(self, texts: list[str]) -> int:
        """Tokens the model sees for these texts (each capped at the window)."""
        counts = self.raw_tokens(texts)
        if self.window is not None:
            counts = [min(n, self.window) for n in counts]
        return sum(counts)


def load_token_counter(settings: Settings) -> TokenCounter:
    """The counter for the configured encoder; raises ConfigError when it cannot load."""
    if settings.model.encoder in {"hashing", "faulty"}:
        rule = HashingEncoder(settings.model.model)
        return TokenCounter(rule.raw_tokens, rule.max_seq_length, rule.dimension, _word_tokens)
    if settings.model.encoder == "upstream":
        return TokenCounter(HashingEncoder(settings.model.model).raw_tokens, None, None,
                            _word_tokens)
    return _sentence_transformers_counter(model_path(settings.model.model))


def _sentence_transformers_counter(path: str) -> TokenCounter:
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(
            f"model {path!r} is not a folder, so its tokenizer cannot be read without "
            "downloading: set EMBEDQ_MODEL to a sentence-transformers model folder"
        )
    count, split = _tokenizer_counter(folder)
    return TokenCounter(count, _window(folder), _dimension(folder), split, _pooling(folder))


def _tokenizer_counter(folder: Path) -> tuple[Counter, Tokenizer | None]:
    """The `tokenizers` library alone when tokenizer.json exists (no torch import)."""
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # Shipped tokenizer files often carry a padding and truncation setup of their own.
        tokenizer.no_truncation()
        tokenizer.no_padding()

        def count_fast(texts: list[str]) -> list[int]:
            return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=True)]

        def split_fast(texts: list[str], add_special_tokens: bool) -> list[list[Token]]:
            encoded = tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
            return [_tokens(text, e.ids, e.tokens, e.offsets, e.special_tokens_mask)
                    for text, e in zip(texts, encoded, strict=True)]

        return count_fast, split_fast
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        slow: Any = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the tokenizer from {str(folder)!r}: {exc}") from exc

    def count_slow(texts: list[str]) -> list[int]:
        ids = slow(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return [len(row) for row in ids]

    return count_slow, None


def _tokens(text: str, ids: list[int], pieces: list[str], offsets: list[tuple[int, int]],
            special: list[int]) -> list[Token]:
    return [Token(i, piece, True, None, None) if is_special
            else Token(i, text[start:stop], False, start, stop)
            for i, piece, (start, stop), is_special
            in zip(ids, pieces, offsets, special, strict=True)]


_WORD = re.compile(r"\S+")
_WORD_IDS = 30_522  # a BERT-sized vocabulary, so that ids look like ids


def _word_tokens(texts: list[str], add_special_tokens: bool) -> list[list[Token]]:
    """The hashing encoder's rule as tokens: one per whitespace-separated word, between
    [CLS] and [SEP]; ids are a stable hash of the word."""
    out = []
    for text in texts:
        words = [Token(zlib.crc32(m.group().encode("utf-8", "surrogatepass")) % _WORD_IDS,
                       m.group(), False, m.start(), m.end()) for m in _WORD.finditer(text)]
        if add_special_tokens:
            words = [Token(101, "[CLS]", True, None, None), *words,
                     Token(102, "[SEP]", True, None, None)]
        out.append(words)
    return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _modules(folder: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _window(folder: Path) -> int | None:
    for module in _modules(folder):
        if str(module.get("type", "")).endswith("Transformer"):
            config = _read_json(folder / str(module.get("path", "")) / "sentence_bert_config.json")
            if isinstance(config.get("max_seq_length"), int):
                return int(config["max_seq_length"])
    config = _read_json(folder / "sentence_bert_config.json")
    if isinstance(config.get("max_seq_length"), int):
        return int(config["max_seq_length"])
    positions = _read_json(folder / "config.json").get("max_position_embeddings")
    return int(positions) if isinstance(positions, int) else None


def _pooling(folder: Path) -> str | None:
    """The Pooling module's mode, named as text-embeddings-inference names it."""
    modes = (("pooling_mode_cls_token", "cls"), ("pooling_mode_mean_tokens", "mean"),
             ("pooling_mode_lasttoken", "last_token"), ("pooling_mode_max_tokens", "max"))
    for module in _modules(folder):
        if str(module.get("type", "")).endswith("Pooling"):
            config = _read_json(folder / str(module.get("path", "")) / "config.json")
            return next((name for key, name in modes if config.get(key) is True), None)
    return None


def _dimension(folder: Path) -> int | None:
    """The width of the last module that sets one (Dense after Pooling), else hidden_size."""
    width: int | None = None
    for module in _modules(folder):
        config = _read_json(folder / str(module.get("path", "")) / "config.json")
        kind = str(module.get("type", ""))
        if kind.endswith("Dense") and isinstance(config.get("out_features"), int):
            width = int(config["out_features"])
        elif kind.endswith("Pooling") and isinstance(config.get("word_embedding_dimension"), int):
            width = int(config["word_embedding_dimension"])
    if width is None:
        hidden = _read_json(folder / "config.json").get("hidden_size")
        width = int(hidden) if isinstance(hidden, int) else None
    return width


def known_words(settings: Settings) -> frozenset[str]:
    """The whole words of the configured model's vocabulary, lower-cased (tokenizer.json's
    WordPiece, BPE or Unigram vocabulary, word-start marks dropped, pieces that continue a
    word left out): the semantic checks read a word one edit from one of these, and not
    one itself, as its typo (semantic/lexicon.misspelt). Empty for the hashing and
    upstream encoders and where the model is no folder with a tokenizer.json."""
    if settings.model.encoder != "sentence-transformers":
        return frozenset()
    tokenizer = _read_json(Path(model_path(settings.model.model)) / "tokenizer.json")
    model = tokenizer.get("model")
    vocab = model.get("vocab", {}) if isinstance(model, dict) else {}
    pieces = [p for p in (vocab.keys() if isinstance(vocab, dict) else (r[0] for r in vocab))
              if isinstance(p, str)]
    # BPE and Unigram mark the pieces that start a word (a piece without the mark goes on
    # one); WordPiece marks those that go on ("##").
    marked = {p[1:] for p in pieces if p[:1] in _WORD_START}
    words = marked or {p for p in pieces if not p.startswith("##")}
    return frozenset(w.lower() for w in words if len(w) >= 2 and w.isalpha() and w.isascii())


_WORD_START = ("\u0120", "\u2581")  # BPE's "G with a dot", SentencePiece's lower block
