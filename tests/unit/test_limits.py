"""The one table of input limits, the checks on what may be stored, and the pieces that
enforce them without a server: the token limit of /tokenize, the line limit of the bulk
reader, the latch that keeps a keyed process keyed, and Redis out of memory named."""

from __future__ import annotations

import gzip
import io
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.errors import BrokerOutOfMemory, InputFileTooLarge, InputTooLarge, InvalidInput
from embedq.limits import (
    EARLIEST,
    LATEST,
    LIMITS,
    MAX_DIMENSIONS,
    check_dimensions,
    check_moment,
    check_text,
    check_texts,
    plausible_id,
)

SETTINGS = Settings.from_env({"EMBEDQ_MAX_INPUTS": "3", "EMBEDQ_MAX_INPUT_CHARS": "10"})


# --- the table
def test_every_limit_is_a_setting_and_documented() -> None:
    from embedq.config import VARIABLES

    docs = (Path(__file__).parents[2] / "docs" / "http-api.md").read_text()
    config = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for limit in LIMITS:
        assert limit.setting in VARIABLES, limit
        assert limit.setting in docs and limit.setting in config, limit.setting


def test_one_past_a_text_limit_is_413_naming_the_setting() -> None:
    assert check_texts(["a" * 10] * 3, SETTINGS) == ["a" * 10] * 3
    with pytest.raises(InputTooLarge, match=r"4 items, over the limit of 3 .EMBEDQ_MAX_INPUTS"):
        check_texts(["a"] * 4, SETTINGS)
    with pytest.raises(InputTooLarge, match=r"input\[1\] has 11 characters.*EMBEDQ_MAX_INPUT_"):
        check_texts(["a", "a" * 11], SETTINGS)


@pytest.mark.parametrize("raw", [0, -1, MAX_DIMENSIONS + 1, 2**70, 1.5, True, "256"])
def test_a_width_no_column_or_model_holds_is_refused(raw: object) -> None:
    with pytest.raises(InvalidInput, match="dimensions"):
        check_dimensions(raw)


# --- what may be stored
@pytest.mark.parametrize("moment", [
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),  # 1 BC in UTC
    datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),  # year 10000 in UTC
    datetime(1969, 12, 31, 23, 59, tzinfo=UTC),
    LATEST + timedelta(seconds=1),
], ids=["bc", "year-10000", "before-1970", "past-latest"])
def test_a_moment_outside_the_stored_range_is_refused_naming_the_field(moment: datetime
                                                                       ) -> None:
    with pytest.raises(InvalidInput, match=r"not_before .* outside the range") as caught:
        check_moment(moment, "not_before")
    assert caught.value.param == "not_before"


def test_a_moment_in_range_comes_back_in_utc() -> None:
    paris = datetime(2030, 6, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert check_moment(paris, "t") == datetime(2030, 6, 1, 10, tzinfo=UTC)
    assert check_moment(datetime(2030, 6, 1), "t") == datetime(2030, 6, 1, tzinfo=UTC)
    assert check_moment(EARLIEST, "t") == EARLIEST and check_moment(None, "t") is None


@pytest.mark.parametrize(("value", "says"), [("a\x00b", "NUL"), ("a\ud800b", "surrogate")])
def test_text_no_reader_can_read_is_refused(value: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        check_text(value, "custom_id")


@pytest.mark.parametrize("job_id", ["a\x00b", "a\ud800", "x" * 129, "", "new\nline"])
def test_ids_that_cannot_exist_are_not_plausible(job_id: str) -> None:
    assert not plausible_id(job_id)
    assert plausible_id("0123456789abcdef0123456789abcdef")


# --- /tokenize: bounded by the tokens returned, and stops tokenizing at the limit
def test_tokenize_stops_once_past_its_token_limit() -> None:
    from embedq.encoders.tokens import TooManyTokens, load_token_counter

    tokens = load_token_counter(Settings.from_env({"EMBEDQ_ENCODER": "hashing"}))
    texts = ["one two three"] * 10  # 5 tokens each with [CLS] and [SEP]
    assert sum(map(len, tokens.tokenize(texts, max_tokens=50))) == 50
    calls: list[int] = []
    split = tokens.split
    assert split is not None

    def counting(batch: list[str], special: bool) -> list[list[object]]:
        calls.append(len(batch))
        return split(batch, special)  # type: ignore[return-value]

    huge = ["word " * 3000] * 100  # 300,000 words: far past the limit
    counted = type(tokens)(tokens.count, tokens.window, tokens.dimension,
                           counting)  # type: ignore[arg-type]
    with pytest.raises(TooManyTokens) as caught:
        counted.tokenize(huge, max_tokens=5000)
    assert caught.value.counted > 5000
    assert sum(calls) < 10, calls  # a few inputs read, not the hundred


# --- the bulk reader: a line past EMBEDQ_MAX_LINE_BYTES is refused once read that far
class CountingFile(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.largest_read = 0

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.largest_read = max(self.largest_read, len(line))
        return line


def test_an_endless_line_is_refused_after_the_limit_not_held_whole() -> None:
    from embedq.jobs.readers import _lines

    fh = CountingFile(b"short\r\n" + b"x" * 5_000_000 + b"\n")
    lines = _lines(fh, 1000)
    assert next(lines) == (1, "short")
    with pytest.raises(InputFileTooLarge, match=r"line 2: .*1000 bytes .EMBEDQ_MAX_LINE_BYTES"):
        next(lines)
    assert fh.largest_read <= 1002


def test_a_line_at_the_limit_with_crlf_is_read(tmp_path: Path) -> None:
    from embedq.jobs.readers import read_records

    path = tmp_path / "texts.txt.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"a" * 100 + b"\r\n" + b"b" * 100)
    records = list(read_records(path, max_line_bytes=100))
    assert [r.text for r in records] == ["a" * 100, "b" * 100]
    with pytest.raises(InputFileTooLarge, match="line 1"):
        list(read_records(path, max_line_bytes=99))


# --- auth: keyed is a state that only closes
class Keys:
    """The KeyStore's two questions, answered from a set the test changes."""

    def __init__(self) -> None:
        self.active: set[str] = set()

    def any_active(self) -> bool:
        return bool(self.active)

    def principal(self, key: str) -> object | None:
        from embedq.tenants import Principal

        return Principal.everything("k", "acme") if key in self.active else None


def test_revoking_the_last_key_leaves_the_process_keyed() -> None:
    from embedq.tenants import Authenticator

    keys = Keys()
    auth = Authenticator((), keys, ttl_s=0)  # type: ignore[arg-type]
    assert auth.required() is False  # never saw a key: open (loopback only, at start)
    keys.active.add("eq_1")
    assert auth.required() is True and auth.authenticate("eq_1") is not None
    keys.active.clear()
    assert auth.required() is True and auth.required_known() is True
    assert auth.authenticate("eq_1") is None and auth.without_active_key()
    keys.active.add("eq_2")
    assert not auth.without_active_key() and auth.authenticate("eq_2") is not None


def test_a_bootstrap_key_never_reads_as_no_active_key() -> None:
    from embedq.tenants import Authenticator

    auth = Authenticator(("boot",), Keys(), ttl_s=0)  # type: ignore[arg-type]
    assert auth.required() and not auth.without_active_key()


# --- Redis out of memory, named as such
def test_redis_out_of_memory_is_named_not_unreachable() -> None:
    from kombu.exceptions import OperationalError
    from redis.exceptions import OutOfMemoryError  # type: ignore[attr-defined]

    from embedq.coordination.redis_link import map_redis_errors
    from embedq.tasks.publish import broker_error

    refused = OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    with pytest.raises(BrokerOutOfMemory, match=r"out of memory.*maxmemory"), \
            map_redis_errors():
        raise refused
    wrapped = OperationalError("Command # 1 (LLEN online) of pipeline caused error: command "
                               "not allowed when used memory > 'maxmemory'.")
    assert isinstance(broker_error(wrapped), BrokerOutOfMemory)
    assert "unreachable" in str(broker_error(OperationalError("Connection refused")))
