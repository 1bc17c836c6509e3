"""Settings: the one place that reads the environment.

Every setting has an embedded default, so a fresh checkout runs with no servers at all
(SQLite, an in-process broker and store, a worker thread started by the command). The
same code runs on Redis + Postgres + many workers by setting:

    EMBEDQ_BROKER_URL    redis://..., amqp://... (RabbitMQ), or memory:// (embedded)
    EMBEDQ_REDIS_URL     redis://...  hot cache, claims, counters; unset = in-process
    EMBEDQ_DATABASE_URL  postgresql://... or sqlite:///path; unset = SQLite in the data dir

`Settings.from_env()` builds one frozen object; nothing else reads `os.environ`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from embedq.errors import ConfigError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
EMBEDDED_BROKER = "memory://localhost/"


def _data_dir(env: Mapping[str, str]) -> Path:
    if env.get("EMBEDQ_DATA_DIR"):
        return Path(env["EMBEDQ_DATA_DIR"]).expanduser()
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "embedq"


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean: use true or false")


def _int(name: str, raw: str, minimum: int = 0) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _float(name: str, raw: str, minimum: float = 0.0) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


@dataclass(frozen=True)
class Settings:
    """All of embedq's configuration; each field maps to `EMBEDQ_<FIELD>` in upper case."""

    # --- where things live
    broker_url: str = EMBEDDED_BROKER
    redis_url: str | None = None
    database_url: str = ""
    data_dir: Path = field(default_factory=lambda: _data_dir(os.environ))
    # Timeouts on every link, so one that goes silent (packets dropped, not refused) fails
    # a call with a retryable error instead of hanging it (docs/operations.md, Timeouts).
    db_connect_timeout_s: int = 5
    db_statement_timeout_ms: int = 30_000  # server side; 0: none. The client gives up
    # on an answer after this + db_connect_timeout_s (the server may never see the query)
    db_lock_timeout_ms: int = 10_000  # row locks and the semantic-cache write lock; 0: none
    db_keepalive_idle_s: int = 30  # TCP keepalive probes after this much idle time
    # Vector rows are committed without waiting for the WAL flush (Postgres
    # synchronous_commit=off, those statements only): a database server crash may lose the
    # last fraction of a second of them, computed again on the next request; every other
    # write waits, and its flush covers the vector rows before it (docs/operations.md).
    vector_sync_commit: bool = False
    redis_socket_timeout_s: float = 10.0  # hot store, claims and broker; broker floor 2 s
    redis_connect_timeout_s: float = 5.0  # also the broker's connection timeout (amqp too)

    # --- the encoder
    encoder: str = "sentence-transformers"  # or "hashing", "faulty" (tests), "upstream"
    model: str = DEFAULT_MODEL
    model_revision: str | None = None  # None: derived from the model's files
    device: str | None = None  # None: cuda when present, else cpu (fp16: cuda only)
    backend: str = "torch"  # or "onnx": ONNX Runtime on CPU, exported once (docs/backends.md)
    # CPU threads a torch model runs on (the process's intra-op threads). 0: torch's
    # default, one per core (docs/benchmarks.md compares 1 and 2 on 2 cores).
    model_threads: int = 0
    tiers: tuple[str, ...] = ("fp32",)  # fp32, int8 (onnx), fp16 (CUDA); the first is default
    normalize: bool = True
    dimensions: int | None = None
    truncate: bool = True

    # --- upstream (an OpenAI-compatible embeddings endpoint as the encoder)
    upstream_url: str | None = None
    upstream_api_key: str | None = None
    upstream_model: str | None = None
    upstream_concurrency: int = 8
    upstream_timeout_s: float = 30.0

    # --- the queue contract
    online_queue: str = "online"
    bulk_queue: str = "bulk"
    claim_ttl_ms: int = 60_000
    run_lease_ms: int = 15_000
    visibility_timeout_s: int = 300
    restore_interval_s: int = 2
    max_attempts: int = 3
    message_max_texts: int = 64
    request_timeout_s: float = 120.0
    # A failed publish is tried again for this long (within the request's deadline) before
    # the caller gets a 503: a broker restarting under a request is a second's blip.
    publish_retry_s: float = 3.0
    # Who encodes an API's online misses: "queue" (the online queue's workers) or "local"
    # (this process loads the model and batches them straight into it; docs/operations.md).
    online_encode: str = "queue"

    # --- the worker
    concurrency: int = 32
    # 0: a batch starts as soon as the model is free and grows while the model is busy.
    batch_wait_ms: float = 0.0
    batch_max_tokens: int = 0  # 0: 4096 on CPU, 32768 on CUDA (padded tokens per batch)
    batch_max_texts: int = 0  # 0: 64 on CPU, 512 on CUDA
    # While online texts keep arriving, bulk batches are cut so one model step (a layer,
    # where a bulk batch pauses for online texts) takes about this long.
    bulk_step_ms: float = 10.0
    hot_ttl_s: int = 86_400
    failure_ttl_s: int = 300
    ledger_path: str | None = None  # test encoders append one line per text they encode

    # --- HTTP API
    api_keys: tuple[str, ...] = ()
    max_inputs: int = 2048
    max_input_chars: int = 32_768
    max_body_bytes: int = 16 * 1024 * 1024
    max_job_inputs: int = 1_000_000
    max_file_bytes: int = 100 * 1024 * 1024  # an uploaded file (POST /v1/files)
    max_online_depth: int = 10_000
    # --- HTTP API (embedq serve): concurrent requests coalesced into one service call
    api_batch_wait_ms: float = 2.0  # linger for more requests while a call is in flight
    api_batch_max_texts: int = 1024  # texts per coalesced call

    # --- hardening: the input limits every way in shares (embedq/limits.py) and the
    # deadline of a job whose submitter died while its inputs were being stored
    max_tokenize_tokens: int = 131_072  # tokens one POST /tokenize returns (413 past)
    max_line_bytes: int = 1024 * 1024  # one line of an `embedq bulk` input file
    job_load_timeout_s: float = 600.0  # inputs stopped arriving this long ago: beat fails it

    # --- tenants: caps on what one tenant keeps, each counted over its own resources
    tenant_max_namespaces: int = 1000  # semantic-cache namespaces a tenant owns (409 past)
    tenant_max_entries: int = 1_000_000  # live semantic-cache entries in all its namespaces
    tenant_max_queued_inputs: int = 5_000_000  # inputs of its unfinished jobs (429 past)
    # shared: one exact cache for all tenants (a text is embedded once, whoever sends it);
    # strict: the tenant enters every fingerprint, so each tenant's cache is its own.
    tenant_isolation: str = "shared"

    # --- semantic cache
    semantic_threshold: float = 0.62  # cosine; `embedq bench threshold` (tune split + margin)
    semantic_contrast_guard: bool = True  # refuse matches one word apart (semantic/guard.py)
    semantic_verify: bool = True  # slot checks in the band (semantic/verify.py)
    semantic_verify_band: float = 0.4  # candidates in [threshold, threshold + band) verified
    semantic_max_entries: int = 100_000  # per namespace; least recently hit evicted first
    semantic_max_payload_bytes: int = 256 * 1024  # payload and metadata, as JSON
    semantic_max_namespaces: int = 1000  # a put creating one more is refused (409)
    semantic_max_lookup_bytes: int = 4 * 1024 * 1024  # matches' JSON in one lookup answer
    semantic_sliding_ttl: bool = False  # default expiry mode: absolute, or sliding on hit
    semantic_index: str = "faiss"  # or "exact" (the in-memory fake: tests, checks)
    semantic_flat_max: int = 10_000  # past this many vectors a namespace's index is IVF
    semantic_ivf_list_size: int = 256  # vectors per IVF list (nlist = n / this)
    semantic_nprobe: int = 24  # IVF lists searched per lookup
    semantic_gpu: bool = True  # build indexes on the GPU when faiss-gpu sees one
    semantic_sync_interval_s: float = 0.2  # how often other processes' writes are applied
    semantic_compact_deletes: int = 256  # tombstones an index holds before compaction
    semantic_sweep_interval_s: float = 30.0  # expired-entry sweep and log pruning
    semantic_snapshot_interval_s: float = 300.0  # index snapshots under data_dir/semantic
    semantic_change_retention_s: float = 7 * 86_400.0  # change-log rows kept this long
    # The error budget (docs/semantic-cache.md, Feedback): how long a served hit can be
    # judged, how close a query must come to one an entry was marked wrong for to be
    # refused that entry (cosine), and how many recent verdicts the threshold rule reads.
    semantic_feedback_ttl_s: int = 86_400
    semantic_negative_similarity: float = 0.95
    semantic_feedback_window: int = 10_000

    # --- jobs and bulk vectorization
    job_chunk_tokens: int = 65_536  # estimated tokens per chunk task
    job_chunk_max_texts: int = 2048
    job_wave_chunks: int = 4  # chunk tasks per chord; bounds the bulk threads per job
    job_tick_s: float = 10.0  # how often `embedq beat` checks windows and stalled jobs
    job_stall_s: float = 300.0  # a running job idle this long is dispatched again
    job_timezone: str = "UTC"  # the time zone of off-peak windows
    # The tier jobs use when they name none (one of tiers; None: the default tier), so
    # off-peak bulk work can run on int8 while online requests stay fp32.
    job_precision: str | None = None
    # The off-peak window (HH:MM-HH:MM, job_timezone) of /v1/batches jobs; None: run now.
    batch_window: str | None = None
    # Job callbacks (docs/jobs.md, Callbacks): off until a secret signs them; hosts must
    # match EMBEDQ_CALLBACK_ALLOW (comma-separated patterns, "*" for any; empty: none).
    callback_secret: str | None = None
    callback_allow: str = ""
    callback_timeout_s: float = 10.0  # one POST, connect to answer
    callback_backoff_s: float = 2.0  # before the 2nd attempt; doubles after each failure
    callback_backoff_max_s: float = 600.0
    callback_max_attempts: int = 12
    callback_max_age_s: float = 86_400.0  # no attempt starts this long after the job ended

    @property
    def embedded(self) -> bool:
        """True when no servers are configured: broker and hot store live in this process."""
        return self.broker_url.startswith("memory://")

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'embedq.db'}"

    def unpinned_model(self) -> ConfigError | None:
        """The error for a model whose vectors can change under its name while
        EMBEDQ_MODEL_REVISION does not pin it, else None.

        A hub name or a remote API's model can be updated by its owner: without a pinned
        revision old and new vectors would share one fingerprint. A local folder (the
        default model is one, from its package) is pinned by a hash of its files; the test
        encoders never change.
        """
        if self.model_revision or self.encoder in {"hashing", "faulty"}:
            return None
        if self.encoder == "upstream":
            name = self.upstream_model or self.model
            return ConfigError(
                f"EMBEDQ_ENCODER=upstream serves the remote model {name!r}, which its vendor "
                "can update under the same name, mixing old and new vectors under one cache "
                "key: set EMBEDQ_MODEL_REVISION to the version served (the vendor's model "
                "version, or the date you started), and change it when the model changes"
            )
        if self.model == DEFAULT_MODEL or Path(self.model).expanduser().is_dir():
            return None
        return ConfigError(
            f"EMBEDQ_MODEL={self.model!r} is not a local model folder, so nothing pins which "
            "version of it is loaded: set EMBEDQ_MODEL_REVISION to the hub commit to load "
            "(its 40-character hash), or set EMBEDQ_MODEL to a model folder"
        )

    def _validate_fp16(self) -> None:
        """fp16 is computed by torch on a CUDA device. Whether this machine has one is
        checked where the model loads (a worker's start), not here: an API or a client on
        a CPU machine lists fp16 to fingerprint the work of GPU workers elsewhere."""
        if "fp16" not in self.tiers:
            return
        if self.encoder == "upstream":
            raise ConfigError(
                "EMBEDQ_TIERS with fp16 is computed by a local model on a CUDA GPU, but "
                "EMBEDQ_ENCODER=upstream computes vectors remotely: remove fp16 from "
                "EMBEDQ_TIERS (the upstream API's precision is its own)"
            )
        if self.device is not None and not self.device.startswith("cuda"):
            raise ConfigError(
                f"EMBEDQ_TIERS with fp16 runs only on a CUDA device, but EMBEDQ_DEVICE="
                f"{self.device!r}: unset EMBEDQ_DEVICE (cuda when present) or set it to "
                "cuda (or cuda:N), or remove fp16 from EMBEDQ_TIERS"
            )

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from `EMBEDQ_*` variables; raise ConfigError naming a bad one."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {"data_dir": _data_dir(env)}
        for f in fields(cls):
            name = f"EMBEDQ_{f.name.upper()}"
            raw = env.get(name)
            if raw is None or f.name == "data_dir":
                continue
            if f.name in ("api_keys", "tiers"):
                values[f.name] = tuple(k.strip() for k in raw.split(",") if k.strip())
            elif f.type in ("bool",):
                values[f.name] = _bool(name, raw)
            elif f.type in ("int",):
                values[f.name] = _int(name, raw)
            elif f.type in ("float",):
                values[f.name] = _float(name, raw)
            elif f.name == "dimensions":
                values[f.name] = _int(name, raw, minimum=1) if raw.strip() else None
            elif f.type.startswith("str | None"):
                values[f.name] = raw or None
            else:
                values[f.name] = raw
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.encoder not in {"sentence-transformers", "hashing", "faulty", "upstream"}:
            raise ConfigError(
                f"EMBEDQ_ENCODER={self.encoder!r} is unknown: "
                "use sentence-transformers, hashing, faulty or upstream"
            )
        if self.tenant_isolation not in {"shared", "strict"}:
            raise ConfigError(f"EMBEDQ_TENANT_ISOLATION={self.tenant_isolation!r} is unknown: "
                              "use shared (one exact cache) or strict (one per tenant)")
        if self.online_encode not in {"queue", "local"}:
            raise ConfigError(
                f"EMBEDQ_ONLINE_ENCODE={self.online_encode!r} is unknown: use queue (workers "
                "encode online misses) or local (the API process loads the model and "
                "encodes them itself)")
        if self.backend not in {"torch", "onnx"}:
            raise ConfigError(f"EMBEDQ_BACKEND={self.backend!r} is unknown: use torch or onnx")
        unknown = [t for t in self.tiers if t not in {"fp32", "int8", "fp16"}]
        if unknown or not self.tiers or len(set(self.tiers)) != len(self.tiers):
            raise ConfigError(
                f"EMBEDQ_TIERS={','.join(self.tiers)!r} must list tiers among fp32, int8 "
                "(ONNX Runtime) and fp16 (CUDA), each once, the default first (e.g. fp32,int8)"
            )
        if "int8" in self.tiers and self.backend != "onnx":
            raise ConfigError("EMBEDQ_TIERS with int8 runs on ONNX Runtime: set "
                              "EMBEDQ_BACKEND=onnx (and pip install 'embedq[onnx]')")
        self._validate_fp16()
        if self.job_precision is not None and self.job_precision not in self.tiers:
            raise ConfigError(
                f"EMBEDQ_JOB_PRECISION={self.job_precision!r} is not a served tier: use one "
                f"of EMBEDQ_TIERS ({','.join(self.tiers)}), or add it there"
            )
        if self.encoder == "upstream" and not self.upstream_url:
            raise ConfigError("EMBEDQ_ENCODER=upstream needs EMBEDQ_UPSTREAM_URL")
        unpinned = self.unpinned_model()
        if unpinned is not None:
            raise unpinned
        if self.embedded and self.redis_url:
            raise ConfigError(
                "EMBEDQ_REDIS_URL is set but EMBEDQ_BROKER_URL is the embedded memory:// "
                "broker: set EMBEDQ_BROKER_URL too (e.g. the same redis:// URL)"
            )
        if not self.embedded and not self.redis_url:
            raise ConfigError(
                f"EMBEDQ_BROKER_URL={self.broker_url!r} needs EMBEDQ_REDIS_URL for the hot "
                "cache and claims shared by all processes"
            )
        if min(self.db_connect_timeout_s, self.redis_socket_timeout_s,
               self.redis_connect_timeout_s) <= 0:
            raise ConfigError("EMBEDQ_DB_CONNECT_TIMEOUT_S, EMBEDQ_REDIS_SOCKET_TIMEOUT_S and "
                              "EMBEDQ_REDIS_CONNECT_TIMEOUT_S must be above 0: a link needs "
                              "a bound")
        if self.claim_ttl_ms < 1000:
            raise ConfigError("EMBEDQ_CLAIM_TTL_MS must be at least 1000")
        if self.publish_retry_s < 0:
            raise ConfigError("EMBEDQ_PUBLISH_RETRY_S must be 0 or more (0: answer 503 as soon "
                              "as a publish fails)")
        self._validate_limits()

    def _validate_limits(self) -> None:
        limits = {"EMBEDQ_MAX_INPUTS": self.max_inputs,
                  "EMBEDQ_MAX_INPUT_CHARS": self.max_input_chars,
                  "EMBEDQ_MAX_BODY_BYTES": self.max_body_bytes,
                  "EMBEDQ_MAX_JOB_INPUTS": self.max_job_inputs,
                  "EMBEDQ_MAX_FILE_BYTES": self.max_file_bytes,
                  "EMBEDQ_MAX_TOKENIZE_TOKENS": self.max_tokenize_tokens,
                  "EMBEDQ_MAX_LINE_BYTES": self.max_line_bytes}
        for name, value in limits.items():
            if value < 1:
                raise ConfigError(f"{name}={value} must be at least 1: it is a limit on "
                                  "what one request may send")
        if self.job_load_timeout_s <= 0:
            raise ConfigError("EMBEDQ_JOB_LOAD_TIMEOUT_S must be above 0: a job whose "
                              "inputs stopped arriving is failed after it")
