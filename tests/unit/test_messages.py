"""Online misses are queued in messages of like-length texts, shortest first: a worker
cuts its batches from the messages it holds and pads each batch to its longest text."""

from __future__ import annotations

from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.encoders.tokens import load_token_counter
from embedq.service import shortest_first
from embedq.tasks.publish import pack_messages


def padded_per_token(groups: list[list[tuple[str, str]]], tokens: dict[str, int]) -> float:
    counts = [[tokens[fp] for fp, _ in g] for g in groups]
    return sum(max(c) * len(c) for c in counts) / sum(sum(c) for c in counts)


def test_every_pair_goes_in_exactly_one_message_of_at_most_the_limit_in_order() -> None:
    pairs = [(f"fp{i}", "x" * (i % 17 + 1)) for i in range(150)]
    groups = pack_messages(pairs, 64)
    assert [len(g) for g in groups] == [64, 64, 22]
    assert [p for g in groups for p in g] == pairs
    assert pack_messages(pairs[:2], 0) == [[pairs[0]], [pairs[1]]]


def test_misses_by_their_counted_tokens_pad_far_less_than_in_input_order() -> None:
    texts = load_texts(250, None, split="heldout")
    counter = load_token_counter(Settings.from_env({}))
    pairs = [(f"fp{i}", t) for i, t in enumerate(texts)]
    tokens = dict(zip((fp for fp, _ in pairs), counter.raw_tokens(texts), strict=True))
    in_order = padded_per_token(pack_messages(pairs, 64), tokens)
    by_chars = padded_per_token(pack_messages(shortest_first(pairs, None), 64), tokens)
    by_tokens = padded_per_token(pack_messages(shortest_first(pairs, tokens), 64), tokens)
    assert by_tokens < by_chars < in_order
    assert by_tokens < 0.75 * in_order
    ordered = [tokens[fp] for fp, _ in shortest_first(pairs, tokens)]
    assert ordered == sorted(ordered)
