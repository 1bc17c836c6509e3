"""One exception root for everything embedq raises on purpose.

    EmbedqError
    ├── ConfigError            a setting is wrong; the message names the variable
    ├── InvalidInput           a caller sent something we cannot embed (HTTP 4xx)
    │   ├── UnknownModel
    │   ├── InputTooLarge      past a documented limit (HTTP 413)
    │   ├── MalformedRequest   the body is not UTF-8 JSON (HTTP 400)
    │   │   └── UnsupportedMediaType  the body is not sent as application/json (HTTP 415)
    │   ├── BadInputFile       a bulk input file; names the line
    │   │   └── InputFileTooLarge  a line past a limit (HTTP 413, also an InputTooLarge)
    │   └── LimitReached       the tenant is at a cap on what it keeps (HTTP 409); names
    │                          the limit and the setting that raises it
    ├── Unauthorized           no or a wrong API key (HTTP 401)
    ├── Forbidden              the key lacks the scope the route needs (HTTP 403)
    ├── NotFound               a job or entry that does not exist (HTTP 404)
    ├── Unavailable            a server is down; retry later (HTTP 503, Retry-After)
    │   ├── DatabaseUnavailable
    │   ├── BrokerUnavailable
    │   │   └── BrokerOutOfMemory  Redis is at maxmemory and refuses writes (noeviction)
    │   ├── Overloaded         too much queued online work (HTTP 429, Retry-After)
    │   └── RateLimited        the key's request or text rate (HTTP 429, Retry-After)
    │       ├── DailyLimitReached  the key's texts a UTC day; Retry-After: the next day
    │       └── QueueLimitReached  the tenant's queued job inputs are at their cap
    ├── EmbeddingFailed        one text could not be embedded; carries its fingerprint
    │   ├── InvalidVector      the encoder produced NaN/Inf or the wrong dimension
    │   └── PoisonText         the worker died encoding it max_attempts times
    ├── EmbeddingTimeout       no answer within the request timeout (retryable)
    ├── Abandoned              a worker dropped a text nobody waits for any more
    └── UpstreamError          the remote embeddings API failed after its retries

Foreign exceptions (SQLAlchemy, redis, kombu) are translated where they enter, with
`raise ... from exc`, so callers catch only these.
"""

from __future__ import annotations


class EmbedqError(Exception):
    """Root of every error embedq raises on purpose."""

    retryable = False


class ConfigError(EmbedqError):
    """A setting is missing or malformed."""


class InvalidInput(EmbedqError):
    """The caller sent something that cannot be embedded as sent."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class UnknownModel(InvalidInput):
    """The request names a model this deployment does not serve."""


class InputTooLarge(InvalidInput):
    """The request is past a documented size limit."""


class BadInputFile(InvalidInput):
    """A bulk input file has a line that cannot be read."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}", param="file")
        self.line = line


class NothingToEmbed(BadInputFile):
    """A bulk input file, or its part from --from-line on, holds no text: no line is wrong."""


class InputFileTooLarge(BadInputFile, InputTooLarge):
    """A bulk input file's line is past a documented limit; names the line (HTTP 413)."""


class NotFound(EmbedqError):
    """A job or cache entry that does not exist."""


class Unavailable(EmbedqError):
    """A server embedq depends on is down; the caller should retry later."""

    retryable = True

    def __init__(self, message: str, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DatabaseUnavailable(Unavailable):
    """The durable store cannot be reached."""


class BrokerUnavailable(Unavailable):
    """The broker or the hot store cannot be reached."""


class BrokerLoginRefused(BrokerUnavailable):
    """The broker refuses the credentials of EMBEDQ_BROKER_URL: no retry mends them, so
    `embedq worker` and `embedq serve` refuse to start on it."""


class BrokerOutOfMemory(BrokerUnavailable):
    """Redis answers but refuses writes: its used memory is over `maxmemory` and its
    policy (noeviction) evicts nothing. Retryable once memory is freed or raised."""


class Overloaded(Unavailable):
    """Too much online work is queued; the caller should back off."""


class RateLimited(Unavailable):
    """The key is past its rate limit; the caller should retry after `retry_after_s`."""


class EmbeddingFailed(EmbedqError):
    """One text could not be embedded."""

    def __init__(self, message: str, fingerprint: str = "") -> None:
        super().__init__(message)
        self.fingerprint = fingerprint


class InvalidVector(EmbeddingFailed):
    """The encoder returned NaN/Inf or a vector of the wrong dimension."""


class PoisonText(EmbeddingFailed):
    """The worker process died while encoding this text, max_attempts times."""


class EmbeddingTimeout(EmbedqError):
    """No vector arrived within the request timeout."""

    retryable = True


class Abandoned(EmbedqError):
    """Every caller of a text went away (timed out, disconnected) before a worker encoded
    it, so it was not encoded. Only the worker sees it: nobody is left to tell."""


class UpstreamError(EmbedqError):
    """The remote embeddings API failed after its bounded retries."""

    retryable = True


class MalformedRequest(InvalidInput):
    """The request body cannot be read: not UTF-8, not JSON, or not a JSON object."""


class UnsupportedMediaType(MalformedRequest):
    """The request body is sent with a content type other than application/json."""


class Unauthorized(EmbedqError):
    """The request carries no API key, or one this deployment does not accept."""


class Forbidden(EmbedqError):
    """The key is accepted but lacks the scope the request needs."""


class LimitReached(InvalidInput):
    """The tenant keeps as many of something as its cap allows; `setting` raises the cap.
    Retrying as is cannot help until something is deleted (HTTP 409)."""

    def __init__(self, message: str, param: str | None = None, setting: str = "") -> None:
        super().__init__(message, param)
        self.setting = setting


class DailyLimitReached(RateLimited):
    """The key sent as many texts this UTC day as it may; Retry-After: the next day."""


class QueueLimitReached(RateLimited):
    """The tenant's unfinished jobs hold as many inputs as its cap allows; retry once
    some of them finished (HTTP 429)."""
