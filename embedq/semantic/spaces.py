"""The model space a process's semantic cache serves, and what it embeds queries with.

The cache serves the default model's space (space_of: model, revision, dimensions) and
follows the `default` alias: once `embedq models switch default B` is read (within 2 s),
`Spaces.view()` answers B's space, whose indexes are loaded on the first call that sees
the switch (the switch carried the entries there, carry.py); the previous space's sync
then stops. A call reads the view once, so it never mixes two spaces.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from embedq.config import Settings
from embedq.coordination.hot_keys import HotKeys
from embedq.coordination.store import HotStore
from embedq.encoders.catalog import ServedModel
from embedq.fingerprint import EncodeSpec, space_of
from embedq.models import Database
from embedq.semantic.engine import PGVECTOR, CandidateSearch
from embedq.semantic.index import IndexConfig
from embedq.semantic.pgvector import PgvectorSearch
from embedq.semantic.store import SemanticStore
from embedq.semantic.sync import IndexSync, SyncConfig


class EmbedResult(Protocol):
    """An embedding result: `EmbeddingService.embed` returns one."""

    def vectors(self) -> list[npt.NDArray[np.float32]]: ...


class Embedder(Protocol):
    """The embedding pipeline the cache embeds its queries with (`EmbeddingService`):
    passed in, so the cache store imports nothing above it."""

    settings: Settings
    db: Database
    hot_keys: HotKeys  # lookups count their namespace here (`embedq stats`, /metrics)
    hot: HotStore  # where the processes' hot keys are merged

    def resolve(self, model: str | None = None,
                precision: str | None = None) -> tuple[ServedModel, str]: ...

    def spec(self, model: str | None = None) -> EncodeSpec: ...

    def embed(self, texts: list[str], *, model: str | None = None,
              tenant: str | None = None) -> EmbedResult: ...


@dataclass(frozen=True)
class Space:
    """The model space the cache serves: the served model (its name routes the embeds),
    the fingerprint model entries are named with, the space digest, and its indexes."""

    name: str
    model: str
    space: str
    sync: CandidateSearch


class Spaces:
    """The space of the model the `default` alias names, with its indexes' sync."""

    def __init__(self, service: Embedder, settings: Settings, store: SemanticStore,
                 sweeps: Sequence[Callable[[datetime], object]], start: bool) -> None:
        self.service = service
        self.settings = settings
        self.store = store
        self.sweeps = sweeps
        self.start = start
        self._switching = threading.Lock()
        self.current = self._space(self._default())

    def _default(self) -> str:
        return self.service.resolve(None)[0].name

    def _space(self, name: str) -> Space:
        spec = self.service.spec(name)
        space = space_of(spec.model, spec.revision, spec.dimensions)
        sync = self._engine(space)
        if self.start:
            sync.start()
        return Space(name, spec.model, space, sync)

    def _engine(self, space: str) -> CandidateSearch:
        """The candidate search EMBEDQ_SEMANTIC_INDEX names (engine.py), for one space."""
        s = self.settings.semantic
        if s.index == PGVECTOR:  # Postgres' own index: no replica here, nothing to follow
            return PgvectorSearch(self.store, space, ef_search=s.ef_search,
                                  sweep_interval_s=s.sweep_interval_s,
                                  change_retention_s=s.change_retention_s, sweeps=self.sweeps)
        return IndexSync(
            self.store, space, self.settings.links.data_dir,
            IndexConfig(kind=s.index, flat_max=s.flat_max, ivf_list_size=s.ivf_list_size,
                        nprobe=s.nprobe, use_gpu=s.gpu),
            SyncConfig(interval_s=s.sync_interval_s, sweep_interval_s=s.sweep_interval_s,
                       snapshot_interval_s=s.snapshot_interval_s,
                       compact_deletes=s.compact_deletes,
                       change_retention_s=s.change_retention_s, memory_mb=s.memory_mb),
            sweeps=self.sweeps,
        )

    def view(self) -> Space:
        """The space of the model `default` names now (loaded here after a switch)."""
        current, name = self.current, self._default()
        if name == current.name:
            return current
        with self._switching:
            if self.current.name != name:
                previous, self.current = self.current, self._space(name)
                previous.sync.close(save=False)
            return self.current

    def close(self, save: bool = True) -> None:
        self.current.sync.close(save=save)
