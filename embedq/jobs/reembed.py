"""A model upgrade without downtime: re-embed what one model holds under another, then
switch an alias in one step (`embedq models reembed`, `embedq models switch`).

The texts a model "holds" are the ones embedq kept: every job item of a job made with
that model (at any of its revisions), and the query of every live semantic-cache entry
in its space. Vector rows keep no text (online requests leave none behind), so a text only
ever sent online has no copy to re-embed: its first request under the new model computes
it, as for any new text.

`reembed` submits those texts, each once, as one bulk job under the new model (progress,
resume after a crash, off-peak windows: as any job). `switch` points an alias at the new
model only once every such text has a vector under it, and says how many are missing
otherwise; the old model keeps serving its callers until then.

The semantic cache serves the `default` alias's model, so switching `default` also
carries the semantic cache into the new model's space, committed with the alias: `switch`
takes that step as `carry` (embedq/semantic/carry.py's `carrier`, a layer above this one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from embedq.config.catalog import DEFAULT_ALIAS
from embedq.encoders.catalog import Catalog, ServedModel
from embedq.errors import InvalidInput
from embedq.fingerprint import fingerprint, space_of
from embedq.jobs.service import JobService
from embedq.models import Database, Job, JobItem, Priority, SemanticEntry
from embedq.models.alias import switch_alias, write_alias
from embedq.models.vectors import VectorStore

T = TypeVar("T")
# Carries the semantic cache from the old model to the new and commits `flip` (the alias)
# with it: embedq/semantic/carry.py's `carrier`, which this layer cannot import.
Carry = Callable[[ServedModel, ServedModel, Callable[[Session], None]], T]

PAGE = 2000


def held_texts(db: Database, served: ServedModel, dimensions: int | None) -> Iterator[str]:
    """Each text `served` holds (job items, the queries of live semantic-cache entries in
    its spaces at `dimensions`), once; read a page a transaction so that no read stays
    open while a job loads them."""
    seen: set[bytes] = set()
    now = datetime.now(UTC)
    revisions = list(served.revisions.values())
    after: tuple[str, int] = ("", -1)
    while True:
        with db.session() as s:
            rows = s.execute(
                select(JobItem.job_id, JobItem.index, JobItem.text)
                .join(Job, Job.id == JobItem.job_id)
                .where(Job.model == served.model, Job.revision.in_(revisions),
                       tuple_(JobItem.job_id, JobItem.index) > after)
                .order_by(JobItem.job_id, JobItem.index).limit(PAGE)).all()
        for job_id, index, text in rows:
            after = (job_id, index)
            yield from _once(text, seen)
        if len(rows) < PAGE:
            break
    last_id = 0
    spaces = [space_of(served.model, r, dimensions) for r in revisions]
    while True:
        with db.session() as s:
            entries = s.execute(
                select(SemanticEntry.id, SemanticEntry.query)
                .where(SemanticEntry.space.in_(spaces), SemanticEntry.id > last_id,
                       SemanticEntry.expires_at.is_(None) | (SemanticEntry.expires_at > now))
                .order_by(SemanticEntry.id).limit(PAGE)).all()
        for entry_id, query in entries:
            last_id = entry_id
            yield from _once(query, seen)
        if len(entries) < PAGE:
            return


def _once(text: str, seen: set[bytes]) -> Iterator[str]:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    if digest not in seen:
        seen.add(digest)
        yield text


@dataclass(frozen=True)
class Coverage:
    """How many of the texts one model holds another has a vector for."""

    held: int
    missing: int


def coverage(jobs: JobService, durable: VectorStore, old: ServedModel, new: ServedModel
             ) -> Coverage:
    """The texts `old` holds that have a vector under `new` in `durable` (its default
    tier, the deployment's dimensions and normalization: what `reembed` computes)."""
    spec = jobs.service.spec(new.name)
    held = missing = 0
    page: list[str] = []

    def check(fps: list[str]) -> int:
        return len(fps) - len(durable.get_many(fps))

    for text in held_texts(jobs.service.db, old, jobs.settings.model.dimensions):
        held += 1
        page.append(fingerprint(spec, text))
        if len(page) >= PAGE:
            missing, page = missing + check(page), []
    if page:
        missing += check(page)
    return Coverage(held, missing)


def reembed(jobs: JobService, catalog: Catalog, old: str, new: str,
            window: str | None = None) -> str:
    """Submit every text model `old` holds as one bulk job under model `new` (in the
    off-peak `window`, if given); return the job id."""
    a, b = _pair(catalog, old, new)
    return jobs.submit(held_texts(jobs.service.db, a, jobs.settings.model.dimensions),
                       model=b.name, window=window,
                       priority=Priority.BULK, source=f"reembed {a.name} -> {b.name}")


@dataclass(frozen=True)
class Switched(Generic[T]):
    """What a switch did: the model the alias pointed at, the coverage it checked, and
    what `carry` returned (None: not the default alias, or no carry)."""

    old: str
    coverage: Coverage
    carried: T | None


def switch(jobs: JobService, durable: VectorStore, catalog: Catalog, alias: str, new: str,
           carry: Carry[T] | None = None) -> Switched[T]:
    """Point `alias` at model `new` for every process, refused (InvalidInput saying how
    many texts lack a vector and what to run) unless `new` has a vector for every text
    the alias's current model holds. Switching `default` (the semantic cache's model)
    runs `carry`, which commits the alias with the semantic cache's copy."""
    old = catalog.resolve(alias)
    target = catalog.resolve(new)
    if target.name != new:
        raise InvalidInput(f"switch {alias} to a model's own name, not the alias {new!r}: "
                           f"use {target.name!r}", "model")
    found = (coverage(jobs, durable, old, target) if old.name != target.name
             else Coverage(0, 0))
    if found.missing:
        raise InvalidInput(
            f"model {target.name!r} has no vector yet for {found.missing} of the "
            f"{found.held} texts {old.name!r} holds, so {alias!r} stays on {old.name!r}: run "
            f"`embedq models reembed --from {old.name} --to {target.name}`, wait for its "
            "job to succeed (`embedq jobs status ID`), then switch again", "model")
    revision = target.revisions[target.default_tier]
    if carry is None or alias != DEFAULT_ALIAS or old.name == target.name:
        switch_alias(jobs.service.db, alias, target.name, target.model, revision)
        return Switched(old.name, found, None)
    return Switched(old.name, found, carry(old, target, lambda s: write_alias(
        s, alias, target.name, target.model, revision)))


def _pair(catalog: Catalog, old: str, new: str) -> tuple[ServedModel, ServedModel]:
    a, b = catalog.resolve(old), catalog.resolve(new)
    if a.name == b.name:
        raise InvalidInput(f"--from {old} and --to {new} name the same model {a.name!r}: "
                           "re-embed into another served model (`embedq models list`)",
                           "model")
    return a, b
