"""sentence-transformers models: the default all-MiniLM-L6-v2 or any model by name or path."""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from embedq.encoders.base import Encoder, Matrix
from embedq.errors import ConfigError

log = logging.getLogger(__name__)

SMALL_CALL = 32  # texts; token counts this small use their own tokenizer copy


class SentenceTransformerEncoder(Encoder):
    """Loads the model once, in the precision its tier names: fp32 (on CPU or CUDA) or
    fp16 (CUDA only). The device never changes the precision: an fp32 vector is the same
    whichever device computed it, so it can share the fingerprints of fp32 vectors made
    elsewhere; fp16 vectors carry the fp16 tier's revision."""

    def __init__(self, name: str, path: str, revision: str, device: str | None = None,
                 hub_revision: str | None = None, tier: str = "fp32") -> None:
        """`revision` names the model in fingerprints; `hub_revision` (a hub name only) is
        the commit sentence-transformers loads, so the name and the weights agree.
        `tier` is fp32 or fp16; fp16 on a device other than CUDA raises ConfigError."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # The tokenizer's own thread pool competes with the model's threads for the same
        # cores (measured: no throughput gain at our batch sizes, and stalls online work).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from sentence_transformers import SentenceTransformer

        if tier not in {"fp32", "fp16"}:
            raise ConfigError(f"the torch encoder computes fp32 or fp16, not {tier!r}")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if tier == "fp16" and not self.device.startswith("cuda"):
            raise ConfigError(
                f"no CUDA device: the fp16 tier runs only on CUDA, not on {self.device!r}; "
                "remove fp16 from EMBEDQ_TIERS, or run this worker on a CUDA GPU"
            )
        self.tier = tier
        model: Any = SentenceTransformer(path, device=self.device, revision=hub_revision)
        if tier == "fp16":
            model = model.half()
        model.eval()
        self._model = model
        self._on = torch.device(self.device)
        # `encode`'s own steps, taken directly (see encode), where this model needs no
        # more than them: no default prompt, and a library that has `preprocess`.
        self._direct = (hasattr(model, "preprocess")
                        and getattr(model, "default_prompt_name", None) is None)
        # Task threads count tokens while the batcher thread encodes. A fast tokenizer
        # keeps truncation/padding state and is not safe to share across threads: counting
        # gets its own copies, each behind a lock. Small calls (online requests) have a
        # copy of their own, so they never queue behind a bulk slice being counted.
        self._counters = {
            small: (copy.deepcopy(model.tokenizer), threading.Lock()) for small in (True, False)
        }
        self._checkpoints: tuple[Callable[[], None], ...] = ()
        self._hooks: list[Any] | None = None
        self.name = name
        self.revision = revision
        dim = model.get_embedding_dimension() if hasattr(
            model, "get_embedding_dimension"
        ) else model.get_sentence_embedding_dimension()
        self.dimension = int(dim)
        self.max_seq_length = int(model.max_seq_length)
        log.info(
            "encoder loaded model=%s revision=%s tier=%s device=%s dim=%d window=%d",
            name, revision[:12], tier, self.device, self.dimension, self.max_seq_length,
        )

    def encode(self, texts: list[str]) -> Matrix:
        """`texts` in one forward pass. Straight through the model's own steps
        (preprocess, device, forward, the pooled embedding): the same vectors as
        `SentenceTransformer.encode(texts, batch_size=len(texts))` (a test compares them
        bit for bit), without its per-call work for one batch: a scan of every parameter
        for the device, sorting by length and back, a tensor per row. On 2 cores that was
        0.7-0.8 ms of a one-text call and 0.5-1.0 ms of a 4-text one (docs/history.md).
        A model that asks for
        a prompt by default, or a library without these steps, goes through `encode`."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self._direct:
            import torch
            from sentence_transformers.util import batch_to_device

            features = batch_to_device(self._model.preprocess(texts), self._on)
            with torch.inference_mode():
                pooled = self._model(features)["sentence_embedding"]
            return np.asarray(pooled.float().cpu().numpy(), dtype=np.float32)
        out = self._model.encode(
            texts,
            batch_size=len(texts),
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)

    def add_checkpoint(self, hook: Callable[[], None]) -> int:
        """Call `hook` before each transformer layer (a forward pre-hook per layer)."""
        if self._hooks is None:
            layers = _layer_stack(self._model)
            if layers is None:
                log.info("no layer stack found in %s: preemption between batches only",
                         self.name)
                return 0
            self._hooks = [layer.register_forward_pre_hook(self._before_layer)
                           for layer in layers]
        self._checkpoints += (hook,)
        return len(self._hooks)

    def remove_checkpoint(self, hook: Callable[[], None]) -> None:
        self._checkpoints = tuple(h for h in self._checkpoints if h != hook)

    def _before_layer(self, module: Any, args: Any) -> None:
        for hook in self._checkpoints:
            hook()

    def count_tokens(self, texts: list[str]) -> list[int]:
        tokenizer, lock = self._counters[len(texts) <= SMALL_CALL]
        with lock:
            enc = tokenizer(
                texts, add_special_tokens=True, truncation=True, max_length=self.max_seq_length
            )
        return [len(ids) for ids in enc["input_ids"]]

    def raw_tokens(self, texts: list[str]) -> list[int]:
        tokenizer, lock = self._counters[len(texts) <= SMALL_CALL]
        with lock:
            enc = tokenizer(texts, add_special_tokens=True, truncation=False)
        return [len(ids) for ids in enc["input_ids"]]

    @property
    def model(self) -> Any:
        """The underlying SentenceTransformer (benchmarks compare against it)."""
        return self._model


def _layer_stack(model: Any) -> Any:
    """The model's repeated blocks: the largest `ModuleList` of two or more modules of one
    class (BERT's `encoder.layer`, MPNet's, XLM-R's...), or None."""
    import torch

    best, best_size = None, 0
    for module in model.modules():
        if not isinstance(module, torch.nn.ModuleList) or len(module) < 2:
            continue
        if len({type(child) for child in module}) != 1:
            continue
        size = sum(p.numel() for p in module.parameters())
        if size > best_size:
            best, best_size = module, size
    return best
