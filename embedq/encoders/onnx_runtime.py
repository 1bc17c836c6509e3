"""The ONNX Runtime encoder: a model exported by `encoders/export.py`, on CPU.

Same contract as the sentence-transformers encoder (raw vectors as the model's pipeline
gives them, the same tokenizer, window and width), from a folder `export_model` made.
It has no steps to pause between: ONNX Runtime runs a graph in one call, so
`add_checkpoint` returns 0 and the batcher preempts bulk work between batches only,
cutting bulk batches to about `bulk_step_ms` each while online texts arrive.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from embedq.encoders.base import Encoder, Matrix
from embedq.encoders.export import META_FILE, MODEL_FILE

log = logging.getLogger(__name__)


class OnnxEncoder(Encoder):
    """Loads `folder/model.onnx` once; `threads` pins ONNX Runtime's intra-op pool."""

    def __init__(self, name: str, revision: str, folder: Path, threads: int) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import json

        import onnxruntime as ort
        from tokenizers import Tokenizer

        meta = json.loads((folder / META_FILE).read_text("utf-8"))
        self.name = name
        self.revision = revision
        self.tier = str(meta["tier"])
        self.dimension = int(meta["dimension"])
        self.max_seq_length = int(meta["max_seq_length"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(folder / MODEL_FILE), options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        # Tokenizers' Rust objects are read-only once configured, so threads share them.
        self._truncating = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._truncating.no_padding()
        self._truncating.enable_truncation(max_length=self.max_seq_length)
        self._whole = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._whole.no_padding()
        self._whole.no_truncation()
        log.info("onnx encoder loaded model=%s revision=%s tier=%s threads=%d dim=%d",
                 name, revision[:12], self.tier, threads, self.dimension)

    def encode(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self._truncating.encode_batch(texts, add_special_tokens=True)
        width = max(len(e.ids) for e in encodings)
        feeds: dict[str, Any] = {
            name: np.zeros((len(texts), width), dtype=np.int64)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }
        # Padding positions carry mask 0: attention and mean pooling never see their ids.
        for row, e in enumerate(encodings):
            n = len(e.ids)
            feeds["input_ids"][row, :n] = e.ids
            feeds["attention_mask"][row, :n] = 1
            feeds["token_type_ids"][row, :n] = e.type_ids
        out = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        return np.asarray(out, dtype=np.float32)

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._truncating.encode_batch(texts, add_special_tokens=True)]

    def raw_tokens(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._whole.encode_batch(texts, add_special_tokens=True)]
