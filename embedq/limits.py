"""What a caller may send, and what may be stored: one table for every way in.

`LIMITS` is the table of input limits. Every way a text comes in checks it here: HTTP
embeddings and the text-embeddings-inference routes (`check_texts`), jobs over HTTP and
from `embedq bulk` files (`check_input_chars`, `line_too_long`), batch files, and the MCP
tools. Past a limit the caller gets InputTooLarge (HTTP 413) naming the setting that
raises it. docs/http-api.md (Limits) shows the same table.

A value a request sets is stored only if every reader can read it back (the API's GET
routes, `embedq jobs list`, the beat tick, export):

- text (`check_text`): no NUL (Postgres text and jsonb refuse it) and no lone surrogate
  (not text: UTF-8, psycopg and JSON writers refuse it);
- moments (`check_moment`): within [EARLIEST, LATEST] in UTC once converted, so that
  psycopg can load them into a Python datetime in any session time zone (a year-1 value at
  +14:00 is 1 BC in UTC, a year-9999 value at -05:00 is year 10000: neither loads);
- integers (`check_int`): within the column's range (INT32 for Integer columns);
- ids (`plausible_id`): an id that cannot exist (a NUL, a lone surrogate, a megabyte) is
  "not found" without reaching a query.

Each check raises InvalidInput (HTTP 422) naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from embedq.config import Settings
from embedq.errors import InputTooLarge, InvalidInput

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
# A margin below year 9999: a moment a day before the calendar's end still loads in a
# session whose zone is ahead of UTC, and the windows computed from it do not overflow.
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
INT32 = (-(2**31), 2**31 - 1)
MAX_DIMENSIONS = 65_536  # widest vector a request may ask for (a model's is far below)
MAX_JSON_DEPTH = 64
MAX_ID_CHARS = 128


@dataclass(frozen=True)
class Limit:
    """One row of the table: the Settings field, the unit it counts, what it bounds and
    where it applies."""

    field: str
    unit: str
    what: str
    where: str

    @property
    def setting(self) -> str:
        return f"EMBEDQ_{self.field.upper()}"

    def value(self, settings: Settings) -> int:
        value: int = settings.value(self.field)
        return value


MAX_INPUTS = Limit("max_inputs", "items", "inputs in one request",
                   "POST /v1/embeddings, /embed, /tokenize, a batch file's line, MCP "
                   "embed_texts")
MAX_INPUT_CHARS = Limit("max_input_chars", "characters", "characters in one input",
                        "every text: embeddings, TEI routes, jobs, batch files, `embedq "
                        "bulk`, semantic-cache queries, MCP tools")
MAX_BODY_BYTES = Limit("max_body_bytes", "bytes", "bytes in one request body",
                       "every HTTP route and the MCP HTTP transport; one batch file line")
MAX_FILE_BYTES = Limit("max_file_bytes", "bytes", "bytes in one uploaded file",
                       "POST /v1/files")
MAX_JOB_INPUTS = Limit("max_job_inputs", "inputs", "inputs in one job",
                       "POST /v1/jobs, a batch file, `embedq bulk`")
MAX_TOKENIZE_TOKENS = Limit("max_tokenize_tokens", "tokens",
                            "tokens one /tokenize answer lists",
                            "POST /tokenize")
MAX_LINE_BYTES = Limit("max_line_bytes", "bytes", "bytes in one line of an input file",
                       "`embedq bulk` (the reader never holds a longer line)")

LIMITS: tuple[Limit, ...] = (MAX_INPUTS, MAX_INPUT_CHARS, MAX_BODY_BYTES, MAX_FILE_BYTES,
                             MAX_JOB_INPUTS, MAX_TOKENIZE_TOKENS, MAX_LINE_BYTES)


def over(limit: Limit, settings: Settings, have: int, subject: str, remedy: str,
         param: str | None) -> InputTooLarge:
    """The 413 for `subject` holding `have` of what `limit` bounds."""
    return InputTooLarge(
        f"{subject} has {have} {limit.unit}, over the limit of {limit.value(settings)} "
        f"({limit.setting}): {remedy}", param)


# --- texts: every way in
def check_texts(raw: Any, settings: Settings, param: str = "input") -> list[str]:
    """A string or a list of strings, each checked (`check_input`); `param` names the
    field in messages (TEI's routes call it "inputs", MCP "texts")."""
    if raw is None:
        raise InvalidInput(f'{param} is missing: send "{param}": "text" or ["text", ...]', param)
    if isinstance(raw, str):
        texts = [raw]
    elif isinstance(raw, list):
        texts = raw
        if not texts:
            raise InvalidInput(f"{param} is an empty list: send at least one string", param)
        if len(texts) > settings.api.max_inputs:
            raise over(MAX_INPUTS, settings, len(texts), param,
                       "split it into several requests, or use a bulk job", param)
    else:
        raise InvalidInput(
            f"{param} must be a string or a list of strings (token arrays are not supported)",
            param,
        )
    for i, text in enumerate(texts):
        check_input(text, settings, f"{param}[{i}]", param)
    return texts


def check_input(text: Any, settings: Settings, subject: str, param: str | None) -> str:
    """One input text: a non-empty string within EMBEDQ_MAX_INPUT_CHARS that is text."""
    if not isinstance(text, str):
        raise InvalidInput(f"{subject} is a {json_type(text)}, not a string: send text only "
                           "(token arrays are not supported)", param)
    if not text:
        raise InvalidInput(f"{subject} is an empty string: send non-empty text", param)
    check_input_chars(text, settings, subject, param)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{subject} contains a lone surrogate at character {exc.start} "
            "(\\ud800-\\udfff), which is not text: send valid Unicode (pair the surrogate "
            "or remove it)", param) from None
    return text


def check_input_chars(text: str, settings: Settings, subject: str, param: str | None) -> None:
    if len(text) > settings.api.max_input_chars:
        raise over(MAX_INPUT_CHARS, settings, len(text), subject, "split or shorten it",
                   param)


def line_too_long(settings: Settings, line: int) -> str:
    """The message for a file line past EMBEDQ_MAX_LINE_BYTES (its reader stopped there)."""
    return (f"line {line} is longer than {settings.jobs.max_line_bytes} bytes "
            f"({MAX_LINE_BYTES.setting}): one input a line, each at most "
            f"{settings.api.max_input_chars} characters ({MAX_INPUT_CHARS.setting}); split the "
            "text, or raise the setting")


def check_dimensions(raw: Any, param: str = "dimensions") -> int | None:
    """A requested width: None, or an integer in [1, MAX_DIMENSIONS] (256.0 is 256)."""
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)  # JSON has one number type: 256.0 is the integer 256
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int)
                            or not 1 <= raw <= MAX_DIMENSIONS):
        raise InvalidInput(f"{param}={raw!r} is not an integer from 1 to {MAX_DIMENSIONS}: "
                           "send e.g. 256, or omit it", param)
    return raw


def json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


# --- what may be stored
def check_text(value: str, name: str) -> str:
    """`value` if the database can store it and it is text; InvalidInput naming `name`."""
    if "\x00" in value:
        raise InvalidInput(
            f"{name} contains a NUL character (\\u0000), which the database cannot store: "
            "remove it", name,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{name} contains a lone surrogate escape (\\ud800-\\udfff), which is not text: "
            "send valid Unicode", name,
        ) from None
    return value


def check_json(value: Any, name: str) -> None:
    """Every string (keys too) passes check_text, and nesting stays within MAX_JSON_DEPTH.

    Iterative, so that no depth a JSON parser accepted can exhaust the stack here."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, name)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise InvalidInput(
                f"{name} is nested more than {MAX_JSON_DEPTH} levels deep: flatten it, or "
                "store a reference instead", name,
            )
        if isinstance(item, dict):
            stack.extend((key, depth) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        else:
            stack.extend((child, depth + 1) for child in item)


def check_moment(value: datetime | None, name: str) -> datetime | None:
    """`value` in UTC (a naive one is read as UTC) if it lies within [EARLIEST, LATEST]
    once converted; InvalidInput naming `name` otherwise."""
    if value is None:
        return None
    try:
        moment = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)
                  ).astimezone(UTC)
    except (OverflowError, ValueError):
        moment = None  # before year 1 or after 9999 in UTC: out of range either way
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise InvalidInput(
            f"{name} {value.isoformat()} is outside the range this server stores "
            f"({EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}, UTC): send a moment in it, with "
            "its UTC offset", name)
    return moment


def check_int(value: int, name: str, bounds: tuple[int, int] = INT32) -> int:
    """`value` if it lies within `bounds` (a column's range); InvalidInput otherwise."""
    low, high = bounds
    if not low <= value <= high:
        raise InvalidInput(f"{name}={value} is outside [{low}, {high}]: send a value in "
                           "that range", name)
    return value


def plausible_id(value: str) -> bool:
    """Whether `value` can be a job, file or batch id at all (ids are short printable
    ASCII): anything else cannot exist, and never reaches a query."""
    return 0 < len(value) <= MAX_ID_CHARS and value.isascii() and value.isprintable()
