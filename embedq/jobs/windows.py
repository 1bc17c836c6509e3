"""Off-peak windows: "HH:MM-HH:MM" in a time zone, possibly across midnight.

A job with a window runs only while the window is open: it waits for the next opening,
pauses at the chunk boundary after it closes, and resumes at the next opening. Pure
functions of an explicit `now`, so tests drive them with a fake clock.

Dates near the calendar's end (a hostile `not_before` in year 9999) never raise: an
opening past the last representable moment is `NEVER`. Submissions are bounded anyway
(`check_not_before`), so only a row written around the API can get there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from embedq.errors import InvalidInput
from embedq.models.base import utc

# How far ahead a job may be scheduled; bounds every date computed from `not_before`.
MAX_NOT_BEFORE = timedelta(days=366)
NEVER = datetime.max.replace(tzinfo=UTC)

_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def zone(name: str) -> ZoneInfo:
    """The named IANA time zone; InvalidInput naming it if this machine does not know it.

    The name comes from a request (a job's timezone) or from EMBEDQ_JOB_TIMEZONE; either
    way it is refused before a job is stored, so a stored job's zone always loads."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidInput(
            f"time zone {name!r} is unknown: use an IANA name such as UTC or Europe/Paris "
            "(the job's timezone, or EMBEDQ_JOB_TIMEZONE when the job names none)",
            "timezone",
        ) from exc


@dataclass(frozen=True)
class Window:
    start: time
    end: time
    tz: ZoneInfo

    @classmethod
    def parse(cls, text: str, tz_name: str = "UTC") -> Window:
        m = _WINDOW.match(text.strip())
        if not m:
            raise InvalidInput(
                f"off-peak window {text!r} is not HH:MM-HH:MM (24-hour clock), "
                "e.g. 01:00-06:00", "window",
            )
        h1, m1, h2, m2 = (int(g) for g in m.groups())
        if (h1, m1) == (h2, m2):
            raise InvalidInput(
                f"off-peak window {text!r} opens and closes at the same minute: "
                "give two different times, or leave the window out to run at once", "window",
            )
        return cls(time(h1, m1), time(h2, m2), zone(tz_name))

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"

    def is_open(self, now: datetime) -> bool:
        local = utc(now).astimezone(self.tz).time().replace(tzinfo=None)
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end  # across midnight

    def next_open(self, now: datetime) -> datetime:
        """When the window opens next (`now` itself when it is open), in UTC; `NEVER`
        when that is past the calendar's end."""
        try:
            if self.is_open(now):
                return utc(now)
            return self._next(self.start, now)
        except (OverflowError, ValueError):
            return NEVER

    def next_close(self, now: datetime) -> datetime:
        """When the window closes next, in UTC; `NEVER` past the calendar's end."""
        try:
            return self._next(self.end, now)
        except (OverflowError, ValueError):
            return NEVER

    def _next(self, at: time, now: datetime) -> datetime:
        local = utc(now).astimezone(self.tz)
        for days in (0, 1, 2):
            day = local.date() + timedelta(days=days)
            candidate = datetime.combine(day, at, tzinfo=self.tz)
            if candidate > local:
                return candidate.astimezone(UTC)
        raise AssertionError("a daily window opens and closes within two days")


def check_not_before(not_before: datetime | None, now: datetime) -> None:
    """Refuse a start time further ahead than `MAX_NOT_BEFORE` (InvalidInput)."""
    if not_before is None:
        return
    try:
        too_far = utc(not_before) - utc(now) > MAX_NOT_BEFORE
    except OverflowError:
        too_far = True
    if too_far:
        raise InvalidInput(
            f"not_before {not_before.isoformat()} is more than {MAX_NOT_BEFORE.days} days "
            "ahead: schedule a job at most that far ahead, or submit it later", "not_before",
        )


def may_run(
    window: Window | None, not_before: datetime | None, now: datetime
) -> tuple[bool, datetime | None]:
    """(True, None) when a job may run at `now`; else (False, when it may start)."""
    now = utc(now)
    if not_before is not None and utc(not_before) > now:
        start = utc(not_before)
        if window is not None:
            start = window.next_open(start)
        return False, start
    if window is not None and not window.is_open(now):
        return False, window.next_open(now)
    return True, None
