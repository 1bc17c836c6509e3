"""Carry a semantic cache from one model's space into another's (`embedq models switch`).

The semantic cache serves the default model's space (space_of: model, revision,
dimensions), and entries of two spaces are never compared. When the `default` alias moves
from model A to model B, every live entry of A's space gets its counterpart in B's: the
same namespace, query, payload, metadata, ttl (the same expiry, so the remaining ttl),
sliding flag, hit count and recency, with B's vector of the query. The vectors come from
`vectors` (the switch reads them through the embedding service: the re-embed job stored
them, so none is computed again unless its text arrived after the job).

`carry` runs inside a transaction that holds the semantic writers' lock
(`SemanticStore.writing()`), and logs one "put" change per entry it adds, as any put does:
index followers of B's space add the vectors by the change log, never by this module.
It is idempotent: a counterpart that exists (same namespace, space and query digest) is
never added twice; `update` makes it take the source's payload, metadata and expiry (the
source is the truth until the switch), otherwise it is left as it is (after the switch,
B's own writes win). Expired entries are not carried, and a deleted one is not there to
carry; deleting an entry later deletes its counterparts too (store.delete_entry).
Entries are read a page at a time, by id.

`carrier` is the switch's step (`embedq models switch default B`, embedq/jobs/reembed.py),
made there rather than when the re-embed job ends: until the switch the old model's
entries are the ones served and written, so only a copy made at the switch is exact; one
made at the job's end would miss what was put, replaced or deleted between the two.
  1. every live entry, a page a transaction (other writes wait one page at most);
  2. in one transaction holding the writers' lock: what changed since step 1 (new
     entries, replaced payloads; a deleted entry is simply gone) and the alias row, so
     the copy and the switch commit together;
  3. once every process has read the switch (ALIAS_TTL_S), the entries a process still
     on the old model put meanwhile, unless the new model holds that query already.
A query whose vector the job did not store (put after it ran: `switch` counts these with
the job's texts and refuses while any is missing) is embedded through the new model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Text, cast, func, select
from sqlalchemy import update as sa_update
from sqlalchemy.orm import Session

from embedq.encoders.catalog import ServedModel
from embedq.fingerprint import space_of
from embedq.models import SemanticChange, SemanticEntry
from embedq.models.alias import ALIAS_TTL_S
from embedq.semantic.spaces import Embedder
from embedq.semantic.store import SemanticStore, utcnow

PAGE = 1000

Vectors = Callable[[list[str]], list[bytes]]  # queries -> unit float32 vectors, in order


@dataclass(frozen=True)
class Carried:
    """What one carry did: counterparts added, counterparts updated, entries read (those
    that already had an up-to-date counterpart included), and the highest id read."""

    added: int = 0
    updated: int = 0
    read: int = 0
    last_id: int = 0

    def __add__(self, other: Carried) -> Carried:
        return Carried(self.added + other.added, self.updated + other.updated,
                       self.read + other.read, max(self.last_id, other.last_id))


# What a counterpart copies (the vector aside), and what makes it out of date: compared
# as the database's text (the same serializer wrote both sides), so a page of entries that
# are up to date decodes no JSON.
FIELDS = ("namespace", "query", "query_sha256", "payload", "meta", "created_at",
          "expires_at", "ttl_s", "sliding", "hit_count", "last_hit_at")
KEPT = ("payload", "meta", "ttl_s", "sliding", "expires_at")


def _kept() -> list[Any]:
    return [cast(getattr(SemanticEntry, f), Text) if f in ("payload", "meta")
            else getattr(SemanticEntry, f) for f in KEPT]


def carry(s: Session, *, source: str, target: str, model: str, vectors: Vectors,
          now: datetime, after_id: int = 0, pages: int | None = None,
          update: bool = True) -> Carried:
    """Give each live entry of space `source` with an id above `after_id` its counterpart
    in space `target` (entries named with fingerprint model `model`), within `s`; at most
    `pages` pages (None: all). Returns what was done; `last_id` resumes a paged run.

    No vector is read, and counterparts are looked up by the unique key (namespace,
    space, query digest), a namespace of the page at a time: each page costs the same
    however many entries the target space holds (a join left to the planner was
    quadratic on tables whose statistics predate step 1's copies)."""
    done = Carried(last_id=after_id)
    while pages is None or pages > 0:
        rows = s.execute(
            select(SemanticEntry.id, SemanticEntry.namespace, SemanticEntry.query_sha256,
                   *_kept())
            .where(SemanticEntry.space == source, SemanticEntry.id > done.last_id,
                   SemanticEntry.expires_at.is_(None) | (SemanticEntry.expires_at > now))
            .order_by(SemanticEntry.id).limit(PAGE)).all()
        if not rows:
            break
        done = done + _page(s, rows, target, model, vectors, update)
        pages = None if pages is None else pages - 1
        if len(rows) < PAGE:
            break
    return done


def _page(s: Session, rows: Sequence[Any], target: str, model: str, vectors: Vectors,
          update: bool) -> Carried:
    twins: dict[tuple[str, str], Any] = {}
    for namespace in {r.namespace for r in rows}:
        digests = [r.query_sha256 for r in rows if r.namespace == namespace]
        twins.update(((namespace, t.query_sha256), t) for t in s.execute(
            select(SemanticEntry.id, SemanticEntry.query_sha256, *_kept())
            .where(SemanticEntry.namespace == namespace, SemanticEntry.space == target,
                   SemanticEntry.query_sha256.in_(digests))))
    stale = {r.id: twin.id for r in rows
             if (twin := twins.get((r.namespace, r.query_sha256))) is not None
             and tuple(r[3:]) != tuple(twin[2:])} if update else {}
    missing = [r.id for r in rows if (r.namespace, r.query_sha256) not in twins]
    full = {r.id: r for r in s.execute(
        select(SemanticEntry.id, *(getattr(SemanticEntry, f) for f in FIELDS))
        .where(SemanticEntry.id.in_([*stale, *missing])))} if stale or missing else {}
    if stale:  # by primary key, one statement
        s.execute(sa_update(SemanticEntry), [
            {"id": twin_id, **{f: getattr(full[i], f) for f in KEPT}}
            for i, twin_id in stale.items()])
    added = [SemanticEntry(model=model, space=target, vector=vector,
                           **{f: getattr(full[i], f) for f in FIELDS})
             for i, vector in zip(missing, vectors([full[i].query for i in missing])
                                  if missing else [], strict=True)]
    s.add_all(added)
    s.flush()
    s.add_all(SemanticChange(entry_id=e.id, namespace=e.namespace, space=target, op="put")
              for e in added)
    return Carried(len(added), len(stale), len(rows), rows[-1].id)


Switch = Callable[[ServedModel, ServedModel, Callable[[Session], None]], Carried]


def settle() -> None:
    """Wait until every process has read a switch (each rereads within ALIAS_TTL_S)."""
    time.sleep(ALIAS_TTL_S + 1.0)


def carrier(service: Embedder, wait: Callable[[], None] = settle) -> Switch:
    """The switch's step for `embedq.jobs.reembed.switch`: carry the semantic cache from
    the old model's space into the new one's and commit `flip` (the alias) with it, in the
    module docstring's three steps, step 3 after `wait`. The result's `read` counts the
    entries live at the switch and those put during `wait`."""

    def run(old: ServedModel, new: ServedModel, flip: Callable[[Session], None]) -> Carried:
        store = SemanticStore(service.db)
        dims = service.settings.model.dimensions
        source = space_of(old.model, old.revisions[old.default_tier], dims)
        target = space_of(new.model, new.revisions[new.default_tier], dims)

        def vectors(queries: list[str]) -> list[bytes]:
            found = service.embed(queries, model=new.name).vectors()
            return [np.ascontiguousarray(v / (np.linalg.norm(v) or 1.0), dtype="<f4")
                    .tobytes() for v in found]

        def step(s: Session, after_id: int, pages: int | None = None,
                 update: bool = True) -> Carried:
            return carry(s, source=source, target=target, model=new.model, vectors=vectors,
                         now=utcnow(), after_id=after_id, pages=pages, update=update)

        early = Carried()
        while True:
            with store.writing() as s:
                page = step(s, early.last_id, pages=1)
            early = early + page
            if page.read < PAGE:
                break
        with store.writing() as s:
            final = step(s, 0)
            flip(s)
            switched_at = int(s.scalar(select(func.max(SemanticEntry.id))) or 0)
        wait()
        with store.writing() as s:
            late = step(s, switched_at, update=False)
        return Carried(early.added + final.added + late.added, early.updated + final.updated,
                       final.read + late.read, late.last_id)

    return run
