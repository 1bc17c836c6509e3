"""The checks between settings, in one place, run when settings are built."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from embedq.config.catalog import check_models
from embedq.config.cluster_url import check_redis_url, is_cluster
from embedq.config.groups import DEFAULT_MODEL, TIER_NAMES
from embedq.errors import ConfigError

if TYPE_CHECKING:
    from embedq.config import Settings

# What a browser sends as `Origin:`: scheme, host (a name or an [IPv6] address), port.
_ORIGIN = re.compile(r"^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$")
_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def check_across(s: Settings) -> None:
    """Raise ConfigError for the first combination of settings that cannot work."""
    _check_links(s)
    check_models(s, _check_model)
    _check_cors_origins(s.api.cors_origins)
    _check_jobs(s)
    _check_wordnet(s.semantic.wordnet)
    if s.callbacks.backoff_max_s < s.callbacks.backoff_s:
        raise ConfigError(
            f"EMBEDQ_CALLBACK_BACKOFF_MAX_S={s.callbacks.backoff_max_s:g} is below "
            f"EMBEDQ_CALLBACK_BACKOFF_S={s.callbacks.backoff_s:g}: the longest wait between "
            "attempts must be at least the first")


def _check_links(s: Settings) -> None:
    if s.embedded and s.links.redis_url:
        raise ConfigError(
            "EMBEDQ_REDIS_URL is set but EMBEDQ_BROKER_URL is the embedded memory:// "
            "broker: set EMBEDQ_BROKER_URL too (e.g. the same redis:// URL)")
    if not s.embedded and not s.links.redis_url:
        raise ConfigError(
            f"EMBEDQ_BROKER_URL={s.links.broker_url!r} needs EMBEDQ_REDIS_URL for the hot "
            "store and claims shared by all processes")
    if s.links.redis_url:
        check_redis_url(s.links.redis_url)
    if is_cluster(s.links.broker_url):
        raise ConfigError(
            "EMBEDQ_BROKER_URL names a Redis Cluster, which Celery's Redis transport cannot "
            "use: point the broker at one Redis (redis://) or RabbitMQ (amqp://), and the "
            "coordination store (EMBEDQ_REDIS_URL) at the cluster")
    if is_cluster(s.links.redis_url) and not s.links.broker_url.startswith(
            ("redis://", "rediss://")):
        raise ConfigError(
            "EMBEDQ_REDIS_URL names a Redis Cluster, where Celery's result backend (the "
            "chord counters that close bulk jobs) cannot live; with a cluster it lives on "
            "the broker's Redis, so EMBEDQ_BROKER_URL must be one Redis (redis://), not "
            f"{s.links.broker_url.split(':', 1)[0]}: use a redis:// broker, or a single "
            "Redis for EMBEDQ_REDIS_URL with RabbitMQ")
    if s.semantic.index == "pgvector" and not s.resolved_database_url.startswith("postgresql"):
        raise ConfigError(
            "EMBEDQ_SEMANTIC_INDEX=pgvector keeps the semantic cache's vectors in Postgres: "
            "set EMBEDQ_DATABASE_URL to a postgresql:// database with the pgvector "
            "extension, or use EMBEDQ_SEMANTIC_INDEX=faiss")


def _check_wordnet(wordnet: str) -> None:
    if wordnet in ("auto", "off"):
        return
    if not (Path(wordnet) / "index.noun").is_file():
        raise ConfigError(
            f"EMBEDQ_SEMANTIC_WORDNET={wordnet!r} holds no WordNet database (no index.noun "
            "there): name the folder of WordNet's index.* and data.* files (Debian's "
            "wordnet-base: /usr/share/wordnet), 'auto' or 'off'")


def _check_cors_origins(origins: tuple[str, ...]) -> None:
    """Each origin as a browser sends it (`Origin:`), or `*` alone for any."""
    if "*" in origins and len(origins) > 1:
        raise ConfigError(f"EMBEDQ_CORS_ORIGINS={','.join(origins)!r} lists * with other "
                          "origins: use * alone (any origin) or list the origins")
    for origin in origins:
        if origin != "*" and not _ORIGIN.match(origin):
            raise ConfigError(
                f"EMBEDQ_CORS_ORIGINS has {origin!r}, which is not an origin: write each as "
                "scheme://host[:port], without a path or a trailing slash (e.g. "
                "https://app.example.com,http://localhost:3000), or * alone for any")


def _check_model(s: Settings) -> None:
    m = s.model
    unknown = [t for t in m.tiers if t not in TIER_NAMES]
    if unknown or not m.tiers or len(set(m.tiers)) != len(m.tiers):
        raise ConfigError(
            f"EMBEDQ_TIERS={','.join(m.tiers)!r} must list tiers among fp32, int8 "
            "(ONNX Runtime) and fp16 (CUDA), each once, the default first (e.g. fp32,int8)")
    if "int8" in m.tiers and m.backend != "onnx":
        raise ConfigError("EMBEDQ_TIERS with int8 runs on ONNX Runtime: set "
                          "EMBEDQ_BACKEND=onnx (and pip install 'embedq[onnx]')")
    _check_fp16(s)
    if m.encoder == "upstream" and not s.upstream.url:
        raise ConfigError("EMBEDQ_ENCODER=upstream needs EMBEDQ_UPSTREAM_URL")
    unpinned = unpinned_model(s)
    if unpinned is not None:
        raise unpinned


def _check_fp16(s: Settings) -> None:
    """fp16 is computed by torch on a CUDA device. Whether this machine has one is
    checked where the model loads (a worker's start), not here: an API or a client on a
    CPU machine lists fp16 to fingerprint the work of GPU workers elsewhere."""
    if "fp16" not in s.model.tiers:
        return
    if s.model.encoder == "upstream":
        raise ConfigError(
            "EMBEDQ_TIERS with fp16 is computed by a local model on a CUDA GPU, but "
            "EMBEDQ_ENCODER=upstream computes vectors remotely: remove fp16 from "
            "EMBEDQ_TIERS (the upstream API's precision is its own)")
    device = s.model.device
    if device is not None and not device.startswith("cuda"):
        raise ConfigError(
            f"EMBEDQ_TIERS with fp16 runs only on a CUDA device, but EMBEDQ_DEVICE="
            f"{device!r}: unset EMBEDQ_DEVICE (cuda when present) or set it to cuda (or "
            "cuda:N), or remove fp16 from EMBEDQ_TIERS")


def _check_jobs(s: Settings) -> None:
    j = s.jobs
    if j.precision is not None and j.precision not in s.model.tiers:
        raise ConfigError(
            f"EMBEDQ_JOB_PRECISION={j.precision!r} is not a served tier: use one of "
            f"EMBEDQ_TIERS ({','.join(s.model.tiers)}), or add it there")
    try:
        ZoneInfo(j.timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError(f"EMBEDQ_JOB_TIMEZONE={j.timezone!r} is unknown: use an IANA name "
                          "such as UTC or Europe/Paris") from None
    window = j.batch_window
    if window is not None:
        m = _WINDOW.match(window.strip())
        if not m or m.group(1, 2) == m.group(3, 4):
            raise ConfigError(f"EMBEDQ_BATCH_WINDOW={window!r} is not an off-peak window: "
                              "use HH:MM-HH:MM (24-hour clock, two different times), e.g. "
                              "01:00-06:00, or unset it to run batches at once")


def unpinned_model(s: Settings) -> ConfigError | None:
    """The error for a model whose vectors can change under its name while
    EMBEDQ_MODEL_REVISION does not pin it, else None.

    A hub name or a remote API's model can be updated by its owner: without a pinned
    revision old and new vectors would share one fingerprint. A local folder (the default
    model is one, from its package) is pinned by a hash of its files; the test encoders
    never change.
    """
    m = s.model
    if m.model_revision or m.encoder in {"hashing", "faulty"}:
        return None
    if m.encoder == "upstream":
        name = s.upstream.model or m.model
        return ConfigError(
            f"EMBEDQ_ENCODER=upstream serves the remote model {name!r}, which its vendor "
            "can update under the same name, mixing old and new vectors under one cache "
            "key: set EMBEDQ_MODEL_REVISION to the version served (the vendor's model "
            "version, or the date you started), and change it when the model changes")
    if m.model == DEFAULT_MODEL or Path(m.model).expanduser().is_dir():
        return None
    return ConfigError(
        f"EMBEDQ_MODEL={m.model!r} is not a local model folder, so nothing pins which "
        "version of it is loaded: set EMBEDQ_MODEL_REVISION to the hub commit to load "
        "(its 40-character hash), or set EMBEDQ_MODEL to a model folder")
