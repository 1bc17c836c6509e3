"""Off-peak windows and input readers: pure logic, driven by a fake clock and temp files."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from embedq.errors import BadInputFile, InvalidInput, NothingToEmbed
from embedq.jobs.readers import read_records
from embedq.jobs.windows import MAX_NOT_BEFORE, NEVER, Window, check_not_before, may_run


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC)


def test_window_opens_and_closes_on_the_minute() -> None:
    w = Window.parse("01:00-06:00")
    assert not w.is_open(at(0, 59))
    assert w.is_open(at(1, 0))
    assert w.is_open(at(5, 59))
    assert not w.is_open(at(6, 0))
    assert w.next_open(at(0, 30)) == at(1, 0)
    assert w.next_open(at(7, 0)) == at(1, 0, day=2)
    assert w.next_close(at(2, 0)) == at(6, 0)


def test_window_across_midnight() -> None:
    w = Window.parse("22:00-02:00")
    assert w.is_open(at(23, 0)) and w.is_open(at(1, 59))
    assert not w.is_open(at(2, 0)) and not w.is_open(at(12, 0))
    assert w.next_open(at(12, 0)) == at(22, 0)


def test_window_follows_its_time_zone() -> None:
    w = Window.parse("01:00-06:00", "Asia/Tokyo")  # UTC+9, no daylight saving
    assert w.is_open(at(16, 30))  # 01:30 in Tokyo
    assert not w.is_open(at(1, 30))
    assert w.next_open(at(12, 0)) == at(16, 0)


def test_may_run_waits_for_not_before_then_the_window() -> None:
    w = Window.parse("01:00-06:00")
    assert may_run(None, None, at(12)) == (True, None)
    assert may_run(w, None, at(3)) == (True, None)
    assert may_run(w, None, at(7)) == (False, at(1, day=2))
    later = at(3) + timedelta(days=1)
    assert may_run(w, later, at(3)) == (False, later)
    assert may_run(None, at(5), at(4)) == (False, at(5))


@pytest.mark.parametrize("tz", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def test_openings_past_the_calendars_end_are_never_not_an_overflow(tz: str) -> None:
    w = Window.parse("01:00-02:00", tz)
    end = datetime(9999, 12, 31, 23, 30, tzinfo=UTC)
    assert w.next_open(end) == NEVER and w.next_close(end) == NEVER
    assert may_run(w, end, at(12, 0)) == (False, NEVER)
    assert may_run(w, datetime.max, at(12, 0)) == (False, NEVER)


def test_not_before_is_bounded_and_the_message_names_the_limit() -> None:
    now = at(12, 0)
    check_not_before(None, now)
    check_not_before(now - timedelta(days=3000), now)  # the past: run at once
    check_not_before(now + MAX_NOT_BEFORE, now)
    for far in (now + MAX_NOT_BEFORE + timedelta(minutes=1), datetime(9999, 12, 31)):
        with pytest.raises(InvalidInput, match=f"{MAX_NOT_BEFORE.days} days ahead") as err:
            check_not_before(far, now)
        assert err.value.param == "not_before"


@pytest.mark.parametrize("bad", ["1:00-6:00", "01:00", "25:00-06:00", "01:00-01:00"])
def test_bad_windows_say_how_to_write_one(bad: str) -> None:
    with pytest.raises(InvalidInput, match=r"HH:MM|same minute"):
        Window.parse(bad)


def test_reads_jsonl_csv_text_and_gzip(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "x", "text": "one"}\n\n{"id": 2, "text": "two"}\n')
    (tmp_path / "b.csv").write_text('id,text\nx,"one, quoted"\ny,two\n')
    (tmp_path / "c.txt").write_text("one\n\ntwo\n")
    with gzip.open(tmp_path / "d.jsonl.gz", "wt") as fh:
        fh.write('{"text": "gz"}\n')
    assert [(r.line, r.id, r.text) for r in read_records(tmp_path / "a.jsonl")] == [
        (1, "x", "one"), (3, "2", "two")]
    assert [(r.id, r.text) for r in read_records(tmp_path / "b.csv")] == [
        ("x", "one, quoted"), ("y", "two")]
    assert [(r.line, r.text) for r in read_records(tmp_path / "c.txt")] == [(1, "one"),
                                                                             (3, "two")]
    assert [r.text for r in read_records(tmp_path / "d.jsonl.gz")] == ["gz"]
    assert [r.text for r in read_records(tmp_path / "c.txt", from_line=2)] == ["two"]


def test_a_file_with_no_text_from_the_line_asked_says_where_its_texts_end(
        tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("one\n\ntwo\n\n\n")
    with pytest.raises(NothingToEmbed) as info:
        list(read_records(path, from_line=4))
    assert info.value.line == 4
    assert "--from-line 4 is past the last text of 'c.txt' (line 3)" in str(info.value)
    assert "give a line up to 3" in str(info.value)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(NothingToEmbed, match="holds no texts"):
        list(read_records(empty))


def _read_until_error(path: Path, **kw: str) -> tuple[list[str], BadInputFile]:
    got: list[str] = []
    with pytest.raises(BadInputFile) as info:
        for record in read_records(path, **kw):  # type: ignore[arg-type]
            got.append(record.text)
    return got, info.value


def test_missing_field_names_the_line_after_yielding_the_lines_before(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"text": "a"}\n{"text": "b"}\n{"body": "c"}\n{"text": "d"}\n')
    got, err = _read_until_error(path)
    assert got == ["a", "b"]
    assert err.line == 3 and "line 3" in str(err) and "--text-field" in str(err)


def test_non_utf8_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff\xfe here\n")
    got, err = _read_until_error(path)
    assert got == ["fine", "also fine"]
    assert err.line == 3 and "UTF-8" in str(err)


def test_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    got, err = _read_until_error(path)
    assert got == [] and "no texts" in str(err)


def test_csv_without_the_text_column(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("id,body\n1,x\n")
    _, err = _read_until_error(path)
    assert err.line == 1 and "'text'" in str(err)
