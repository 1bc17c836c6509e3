"""Settings, one frozen value object per concern.

Each field is one environment variable: `EMBEDQ_<PREFIX><FIELD>` in upper case, where the
group's `PREFIX` is shared by its variables (`semantic.threshold` is
EMBEDQ_SEMANTIC_THRESHOLD) unless the field names its own (`env=`). Each field's range or
choices are declared here (`knob`) and checked when settings are built; checks between
fields are in `embedq.config.Settings.validate`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

DEFAULT_MODEL = "all-MiniLM-L6-v2"
EMBEDDED_BROKER = "memory://localhost/"
ENCODERS = ("sentence-transformers", "hashing", "faulty", "upstream")
TIER_NAMES = ("fp32", "int8", "fp16")


def knob(default: Any = None, *, min: float | None = None, max: float | None = None,
         choices: tuple[str, ...] | None = None, env: str | None = None,
         factory: Any = None) -> Any:
    """A setting: its default, its inclusive range (numbers) or choices (strings), and
    its variable's name when it does not follow the group's prefix."""
    meta = {"min": min, "max": max, "choices": choices, "env": env}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def data_dir_of(env: Mapping[str, str]) -> Path:
    if env.get("EMBEDQ_DATA_DIR"):
        return Path(env["EMBEDQ_DATA_DIR"]).expanduser()
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "embedq"


DAY_S = 86_400
YEAR_S = 365 * DAY_S


@dataclass(frozen=True)
class Links:
    """Where things live, and the bounds on every link to them (docs/operations.md)."""

    PREFIX: ClassVar[str] = ""
    broker_url: str = EMBEDDED_BROKER
    redis_url: str | None = None
    database_url: str = ""
    data_dir: Path = field(default_factory=lambda: data_dir_of(os.environ))
    db_connect_timeout_s: int = knob(5, min=1, max=600)
    db_statement_timeout_ms: int = knob(30_000, min=0, max=24 * 3_600_000)  # 0: none
    db_lock_timeout_ms: int = knob(10_000, min=0, max=24 * 3_600_000)  # 0: none
    db_keepalive_idle_s: int = knob(30, min=1, max=DAY_S)
    # Connections each of a process's two Postgres pools (tables, vector rows) keeps open,
    # and how many more it may open under load: a process holds at most
    # 2 x (pool + overflow) (docs/operations.md, "Scaling out").
    db_pool_size: int = knob(10, min=1, max=1000)
    db_max_overflow: int = knob(20, min=0, max=1000)
    # Vector rows are committed without waiting for the WAL flush unless this is set
    # (`embedq.models.vectors`; docs/operations.md).
    vector_sync_commit: bool = False
    redis_socket_timeout_s: float = knob(10.0, min=0.05, max=3600)  # broker floor 2 s
    redis_connect_timeout_s: float = knob(5.0, min=0.05, max=3600)


@dataclass(frozen=True)
class ModelSettings:
    """The encoder that computes vectors, and the shape of what it returns."""

    PREFIX: ClassVar[str] = ""
    encoder: str = knob("sentence-transformers", choices=ENCODERS)
    model: str = DEFAULT_MODEL
    model_revision: str | None = None  # None: derived from the model's files
    # Several served models, NAME=SOURCE[@REVISION][:TIERS] (config/catalog.py); None:
    # EMBEDQ_MODEL alone. Aliases map other names (default, query) to listed models.
    models: str | None = None
    model_aliases: str = ""
    device: str | None = None  # None: cuda when present, else cpu (fp16: cuda only)
    backend: str = knob("torch", choices=("torch", "onnx"))
    model_threads: int = knob(0, min=0, max=1024)  # 0: torch's default, one per core
    tiers: tuple[str, ...] = ("fp32",)  # the first is the default
    normalize: bool = True
    dimensions: int | None = knob(None, min=1, max=65_536)
    truncate: bool = True


@dataclass(frozen=True)
class UpstreamSettings:
    """An OpenAI-compatible embeddings endpoint as the encoder (EMBEDQ_ENCODER=upstream)."""

    PREFIX: ClassVar[str] = "UPSTREAM_"
    url: str | None = None
    api_key: str | None = None
    model: str | None = None
    concurrency: int = knob(8, min=1, max=1024)
    timeout_s: float = knob(30.0, min=0.1, max=3600)


@dataclass(frozen=True)
class QueueSettings:
    """The queue contract: queues, claims, leases, redelivery, dead letters."""

    PREFIX: ClassVar[str] = ""
    online_queue: str = "online"
    bulk_queue: str = "bulk"
    claim_ttl_ms: int = knob(60_000, min=1000, max=DAY_S * 1000)
    # Refreshed every third of itself while its batch runs: below 100 ms the refresher
    # would spin.
    run_lease_ms: int = knob(15_000, min=100, max=DAY_S * 1000)
    visibility_timeout_s: int = knob(300, min=1, max=7 * DAY_S)
    restore_interval_s: int = knob(2, min=1, max=3600)
    max_attempts: int = knob(3, min=1, max=100)  # 0 would dead-letter every text
    message_max_texts: int = knob(64, min=1, max=100_000)
    request_timeout_s: float = knob(120.0, min=0.1, max=DAY_S)
    # A failed publish is tried again this long (within the request's deadline).
    publish_retry_s: float = knob(3.0, min=0, max=3600)
    # Who encodes an API's online misses: the online queue's workers, or this process.
    online_encode: str = knob("queue", choices=("queue", "local"))


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker process does with the texts it takes."""

    PREFIX: ClassVar[str] = ""
    concurrency: int = knob(32, min=1, max=4096)
    batch_wait_ms: float = knob(0.0, min=0, max=60_000)  # 0: no lingering once free
    batch_max_tokens: int = knob(0, min=0, max=10_000_000)  # 0: 4096 CPU, 32768 CUDA
    batch_max_texts: int = knob(0, min=0, max=100_000)  # 0: 64 CPU, 512 CUDA
    bulk_step_ms: float = knob(10.0, min=0.1, max=60_000)
    hot_ttl_s: int = knob(DAY_S, min=1, max=10 * YEAR_S)
    # Every process's own LRU of finished vectors in front of a remote hot store
    # (coordination/local_tier.py); 0 turns it off. Not used with an in-process store.
    local_tier_mb: int = knob(64, min=0, max=1_000_000)
    failure_ttl_s: int = knob(300, min=1, max=30 * DAY_S)
    ledger_path: str | None = None  # test encoders append one line per text they encode
    # CPU seconds per stage of the pipeline, counted in the hot store (embedq/stages.py;
    # `embedq bench pipeline` turns it on in the processes it starts).
    stage_timing: bool = False
    # The collector's youngest-generation threshold in `embedq serve` and `embedq worker`,
    # whose startup objects are frozen out of its walks (embedq/heap.py); 0: Python's own.
    gc_gen0: int = knob(10_000, min=0, max=10**7)


@dataclass(frozen=True)
class ApiSettings:
    """The HTTP API: keys, request limits, server-side coalescing of requests."""

    PREFIX: ClassVar[str] = "API_"
    keys: tuple[str, ...] = ()
    max_inputs: int = knob(2048, min=1, max=1_000_000, env="MAX_INPUTS")
    max_input_chars: int = knob(32_768, min=1, max=100_000_000, env="MAX_INPUT_CHARS")
    max_body_bytes: int = knob(16 * 1024 * 1024, min=1024, max=2**31, env="MAX_BODY_BYTES")
    max_job_inputs: int = knob(1_000_000, min=1, max=10**9, env="MAX_JOB_INPUTS")
    max_file_bytes: int = knob(100 * 1024 * 1024, min=1024, max=2**40, env="MAX_FILE_BYTES")
    max_online_depth: int = knob(10_000, min=1, max=10**9, env="MAX_ONLINE_DEPTH")
    # Tokens one POST /tokenize returns (413 past; embedq/limits.py).
    max_tokenize_tokens: int = knob(131_072, min=1, max=10**9, env="MAX_TOKENIZE_TOKENS")
    batch_wait_ms: float = knob(2.0, min=0, max=60_000)
    batch_max_texts: int = knob(1024, min=1, max=1_000_000)
    # Browser origins allowed to call the API (CORS); empty: none (checked in rules.py).
    cors_origins: tuple[str, ...] = knob((), env="CORS_ORIGINS")


@dataclass(frozen=True)
class TenantSettings:
    """Caps on what one tenant keeps, and whether tenants share one exact cache."""

    PREFIX: ClassVar[str] = "TENANT_"
    max_namespaces: int = knob(1000, min=1, max=10**9)
    max_entries: int = knob(1_000_000, min=1, max=10**12)
    max_queued_inputs: int = knob(5_000_000, min=1, max=10**12)
    isolation: str = knob("shared", choices=("shared", "strict"))


@dataclass(frozen=True)
class SemanticSettings:
    """The semantic cache (docs/semantic-cache.md)."""

    PREFIX: ClassVar[str] = "SEMANTIC_"
    threshold: float = knob(0.67, min=-1.0, max=1.0)  # cosine; `embedq bench threshold --lodo`
    contrast_guard: bool = True  # refuse matches one word apart (semantic/guard.py)
    verify: bool = True  # slot checks in the band (semantic/verify.py)
    verify_band: float = knob(0.4, min=0.0, max=2.0)
    # WordNet's database folder for the verifier's synonyms (semantic/synonyms.py): "auto"
    # (Debian's wordnet-base where installed), "off", or a folder of the same files.
    wordnet: str = "auto"
    max_entries: int = knob(100_000, min=1, max=10**9)  # per namespace
    max_payload_bytes: int = knob(256 * 1024, min=1, max=2**30)
    max_namespaces: int = knob(1000, min=1, max=10**9)
    max_lookup_bytes: int = knob(4 * 1024 * 1024, min=1024, max=2**31)
    sliding_ttl: bool = False
    index: str = knob("faiss", choices=("faiss", "exact", "pgvector"))
    ef_search: int = knob(100, min=1, max=1000)  # pgvector's HNSW candidate list
    # pgvector's HNSW build memory (maintenance_work_mem); 0: the server's own setting.
    index_build_memory_mb: int = knob(0, min=0, max=10**7)
    flat_max: int = knob(10_000, min=1, max=10**9)
    ivf_list_size: int = knob(256, min=1, max=10**7)
    nprobe: int = knob(24, min=1, max=10**6)
    gpu: bool = True
    sync_interval_s: float = knob(0.2, min=0.01, max=3600)
    # Per process: the FAISS indexes it holds, least recently used dropped past it.
    memory_mb: int = knob(1024, min=1, max=10**7)
    # Lookups per second (this process's, decayed) past which a namespace is reported hot.
    hot_lookups_per_s: float = knob(20.0, min=0.001, max=10**9)
    compact_deletes: int = knob(256, min=1, max=10**9)
    sweep_interval_s: float = knob(30.0, min=0.1, max=DAY_S)
    snapshot_interval_s: float = knob(300.0, min=1, max=DAY_S)
    change_retention_s: float = knob(7 * DAY_S, min=60, max=10 * YEAR_S)
    feedback_ttl_s: int = knob(DAY_S, min=1, max=YEAR_S)
    negative_similarity: float = knob(0.95, min=-1.0, max=1.0)
    feedback_window: int = knob(10_000, min=1, max=10**9)


@dataclass(frozen=True)
class JobSettings:
    """Jobs and bulk vectorization (docs/jobs.md)."""

    PREFIX: ClassVar[str] = "JOB_"
    chunk_tokens: int = knob(65_536, min=1, max=10**9)
    chunk_max_texts: int = knob(2048, min=1, max=10**7)
    wave_chunks: int = knob(4, min=1, max=10_000)  # chunk tasks per chord
    tick_s: float = knob(10.0, min=0.1, max=DAY_S)
    stall_s: float = knob(300.0, min=0.1, max=30 * DAY_S)
    timezone: str = "UTC"  # checked at start: a name the zoneinfo database knows
    precision: str | None = None  # one of the served tiers; None: the default tier
    # The off-peak window (HH:MM-HH:MM) of /v1/batches jobs; None: run now.
    batch_window: str | None = knob(None, env="BATCH_WINDOW")
    # One line of an `embedq bulk` input file (the reader never holds more of a line).
    max_line_bytes: int = knob(1024 * 1024, min=1, max=2**31, env="MAX_LINE_BYTES")
    # A job whose inputs stopped arriving this long ago (its submitter died) is failed.
    load_timeout_s: float = knob(600.0, min=1, max=30 * DAY_S)


@dataclass(frozen=True)
class CallbackSettings:
    """Job callbacks (docs/jobs.md, Callbacks): off until a secret signs them."""

    PREFIX: ClassVar[str] = "CALLBACK_"
    secret: str | None = None
    allow: str = ""  # comma-separated host patterns, "*" for any; empty: none
    timeout_s: float = knob(10.0, min=0.1, max=3600)
    backoff_s: float = knob(2.0, min=0, max=DAY_S)
    backoff_max_s: float = knob(600.0, min=0, max=30 * DAY_S)
    max_attempts: int = knob(12, min=1, max=1000)
    max_age_s: float = knob(DAY_S, min=1, max=YEAR_S)


GROUPS: dict[str, type] = {
    "links": Links, "model": ModelSettings, "upstream": UpstreamSettings,
    "queue": QueueSettings, "worker": WorkerSettings, "api": ApiSettings,
    "tenants": TenantSettings, "semantic": SemanticSettings, "jobs": JobSettings,
    "callbacks": CallbackSettings,
}
