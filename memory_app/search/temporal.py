"""The time a search query names ("last July", "in May 2023", "two weeks ago") as a window of time.

Pure: no Django, no database, no LLM, so the benches and the evaluation resolve queries the same way.
`reference` is the moment "now" means: the caller passes the latest time said in the searched
conversations, so an imported history from 2023 reads "last July" as July 2023, not as today's year.
The rules are listed in docs/recall.md ("Time in the query"); each one is a small resolver below.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Final


@dataclass(frozen=True)
class TimeWindow:
    start: datetime  # inclusive, timezone-aware
    end: datetime  # exclusive, timezone-aware
    expression: str  # the words of the query it came from, as written, e.g. "last July"


Span = tuple[datetime, datetime]


class _Unplaceable:
    """A time relative to an event ("two weeks before the trip"): it ends the search with no window,
    because a later absolute expression in the same query would name the wrong time."""


_UNPLACEABLE: Final = _Unplaceable()
# What a resolver answers: a span, None (the words are no time here), or a time that cannot be placed.
Resolution = Span | _Unplaceable | None
Resolver = Callable[[re.Match[str], datetime], Resolution]


_FULL_MONTHS = "january february march april may june july august september october november december".split()
_ABBREVIATED = dict(jan=1, feb=2, mar=3, apr=4, jun=6, jul=7, aug=8, sep=9, sept=9, oct=10, nov=11, dec=12)
_MONTH_NUMBER = {name: number for number, name in enumerate(_FULL_MONTHS, start=1)} | _ABBREVIATED
# "I may go", "they march", "June said": a month resolves only with a day, a year or a word that makes it a time.
_NEEDS_CONTEXT = frozenset(_MONTH_NUMBER)
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True)) + r")(?!\w)"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # northern hemisphere
_UNIT = r"(?P<unit>day|week|month|year)s?(?!\w)"
_NUMBER_WORDS = "one two three four five six seven eight nine ten eleven twelve".split()
_COUNT_VALUES = {word: number for number, word in enumerate(_NUMBER_WORDS, start=1)} | {"a": 1, "an": 1}
# A count is digits, a number word, or a vague amount read as a range ("a few days": 2 to 6 days).
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(_NUMBER_WORDS) + r"|an?|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several)"
_DAY = r"(?P<day>3[01]|[12]\d|0?[1-9])(?P<ordinal>st|nd|rd|th)?(?![\w:])"
# A plausible year, never part of a longer number, an amount, a decimal or a numeric date ("05/2023").
_YEAR = r"(?<![\w$€£#.,:/-])(?P<year>19\d\d|20\d\d|2100)(?![\w%]|[.,:/-]\d)"
_PART = r"(?:(?P<part>early|mid|late)[\s-]+)"
# Words before a month or season that make it a time, not a verb or a name: "in May", "since the winter".
_TIME_CONTEXT = re.compile(
    r"\b(?:in|during|of|throughout|since|before|after|until|till|from|prior\s+to)\s+(?:the\s+)?$", re.IGNORECASE
)
_HALF_UNIT_DAYS = {"day": 0, "week": 3, "month": 15, "year": 182}  # "ago" windows: whole days around the moment
_RECENTLY_DAYS = 30
_OPEN_PAST_YEARS = 100  # "before X" starts this long before the reference


def resolve_time(query: str, *, reference: datetime) -> TimeWindow | None:
    """The window the query's first temporal expression names, resolved against `reference` (the moment
    'now' means: the caller passes the latest time said in the searched conversations, so an imported
    history from 2023 resolves "last July" into 2023, not into today's year). None if the query names no time,
    or if its first time is relative to an event ("two weeks before the trip")."""
    if reference.tzinfo is None or reference.utcoffset() is None:
        raise ValueError("reference must be timezone-aware")
    candidates = _candidates(query, reference)
    if not candidates:
        return None
    start, end, resolution = min(candidates, key=lambda candidate: (candidate[0], -candidate[1]))
    if not isinstance(resolution, tuple):
        return None
    return TimeWindow(start=resolution[0], end=resolution[1], expression=query[start:end])


def _candidates(query: str, reference: datetime) -> list[tuple[int, int, Span | _Unplaceable]]:
    found: list[tuple[int, int, Span | _Unplaceable]] = []
    for pattern, resolve in _RULES:
        for match in pattern.finditer(query):
            resolution = resolve(match, reference)
            if resolution is not None:
                found.append((match.start(), match.end(), resolution))
    spans_by_start = {
        start: (end, span) for start, end, span in sorted(found, key=lambda c: c[1]) if isinstance(span, tuple)
    }
    for operator in _OPERATOR.finditer(query):
        if operator.end() in spans_by_start:
            end, span = spans_by_start[operator.end()]
            found.append((operator.start(), end, _bounded(_normalised(operator["operator"]), span, reference)))
    return found


def _bounded(operator: str, span: Span, reference: datetime) -> Span:
    """ "before May 2023" and friends: one end from the named time, the other open (far past or just after now)."""
    far_past = _shift_datetime_months(reference, -12 * _OPEN_PAST_YEARS)
    just_after_now = reference + timedelta(days=1)
    start, end = span
    if operator in ("before", "prior to"):
        return min(far_past, start - timedelta(days=1)), start
    if operator in ("until", "till"):
        return min(far_past, end - timedelta(days=1)), end
    if operator == "after":
        return end, max(just_after_now, end + timedelta(days=1))
    return start, max(just_after_now, start + timedelta(days=1))  # since


# ---- calendar arithmetic (all in the reference's zone: a day is local midnight to local midnight)


def _midnight(day: date, zone: tzinfo | None) -> datetime:
    return datetime.combine(day, time(), tzinfo=zone)


def _days(first: date, after_last: date, zone: tzinfo | None) -> Span:
    return _midnight(first, zone), _midnight(after_last, zone)


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _shift_datetime_months(moment: datetime, months: int) -> datetime:
    return datetime.combine(_add_months(moment.date(), months), moment.timetz())


def _months(first_index: int, count: int, zone: tzinfo | None) -> Span:
    """Whole months, numbered year * 12 + month - 1 so that arithmetic across years is plain addition."""
    start_year, start_month = divmod(first_index, 12)
    end_year, end_month = divmod(first_index + count, 12)
    return _days(date(start_year, start_month + 1, 1), date(end_year, end_month + 1, 1), zone)


def _month_index(moment: date) -> int:
    return moment.year * 12 + moment.month - 1


def _yearly_start(mode: str, first_month: int, length: int, today: date) -> int:
    """The month index where a yearly period (a month, a season) starts, for "last"/"this"/"next"/bare.

    bare: the most recent one that started on or before the reference month; last: the most recent one that
    ended before the reference month began; this: the one containing the reference, else the one in its year;
    next: the first one starting after the reference month.
    """
    now = _month_index(today)
    start = today.year * 12 + first_month - 1
    if mode == "last":
        while start + length > now:
            start -= 12
    elif mode == "this":
        start -= 12 if start - 12 + length > now else 0
    elif mode == "next":
        start -= 12
        while start <= now:
            start += 12
    else:
        while start > now:
            start -= 12
    return start


def _part_of_month(part: str | None, month_index: int, zone: tzinfo | None) -> Span:
    """early / mid / late narrow a month to days 1-10, 11-20 and 21 to its end."""
    start, end = _months(month_index, 1, zone)
    if part is None:
        return start, end
    first = start.date()
    if part == "early":
        return _days(first, first.replace(day=11), zone)
    if part == "mid":
        return _days(first.replace(day=11), first.replace(day=21), zone)
    return _days(first.replace(day=21), end.date(), zone)


def _months_part(part: str | None, first_index: int, count: int, zone: tzinfo | None) -> Span:
    """early / mid / late narrow a period of months to its first, middle and last third (a year: 4 months each)."""
    if part is None:
        return _months(first_index, count, zone)
    third = max(count // 3, 1)
    offset = {"early": 0, "mid": third, "late": count - third}[part]
    return _months(first_index + offset, third, zone)


def _has_time_context(match: re.Match[str]) -> bool:
    return _TIME_CONTEXT.search(match.string, 0, match.start()) is not None


def _latest_date_on_or_before(month: int, day: int, today: date) -> date | None:
    """ "May 8th" with no year: the most recent May 8th on or before the reference day (Feb 29: a leap year)."""
    for year in range(today.year, today.year - 9, -1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if candidate <= today:
            return candidate
    return None


def _date_span(year: int | None, month: int, day: int, reference: datetime) -> Span | None:
    today = reference.date()
    if year is None:
        found = _latest_date_on_or_before(month, day, today)
    else:
        try:
            found = date(year, month, day)
        except ValueError:
            found = None
    return None if found is None else _days(found, found + timedelta(days=1), reference.tzinfo)


# ---- resolvers, one per kind of expression


def _iso_date(match: re.Match[str], reference: datetime) -> Resolution:
    return _date_span(int(match["year"]), int(match["month"]), int(match["day"]), reference)


def _day_month(match: re.Match[str], reference: datetime) -> Resolution:
    """ "8 May 2023", "the 8th of May". Without a year, "8 may" needs an ordinal, "of" or a leading
    "on"/"the": "step 8 may fail" is no date."""
    month_word = match["month"].lower()
    if match["year"] is None and month_word in _NEEDS_CONTEXT and not (match["ordinal"] or match["of"]):
        if not re.search(r"\b(?:on|the)\s+$", match.string[: match.start()], re.IGNORECASE):
            return None
    year = int(match["year"]) if match["year"] else None
    return _date_span(year, _MONTH_NUMBER[month_word], int(match["day"]), reference)


def _month_day(match: re.Match[str], reference: datetime) -> Resolution:
    year = int(match["year"]) if match["year"] else None
    return _date_span(year, _MONTH_NUMBER[match["month"].lower()], int(match["day"]), reference)


def _month_year(match: re.Match[str], reference: datetime) -> Resolution:
    index = int(match["year"]) * 12 + _MONTH_NUMBER[match["month"].lower()] - 1
    return _part_of_month(_lower(match["part"]), index, reference.tzinfo)


def _month_alone(match: re.Match[str], reference: datetime) -> Resolution:
    month_word = match["month"].lower()
    modifier = _lower(match["modifier"])
    if month_word in _NEEDS_CONTEXT and not _month_word_is_time(match, modifier):
        return None
    mode = modifier if modifier in ("last", "this", "next") else "bare"
    start = _yearly_start(mode, _MONTH_NUMBER[month_word], 1, reference.date())
    return _part_of_month(modifier if modifier in ("early", "mid", "late") else None, start, reference.tzinfo)


def _month_word_is_time(match: re.Match[str], modifier: str | None) -> bool:
    if modifier in ("last", "next", "early", "mid", "late"):
        return True
    if modifier == "this":  # "this May?" is a month, "this may help" is not
        return re.match(r"\s*(?:[^\w\s]|$)", match.string[match.end() :]) is not None
    return _has_time_context(match)


def _year(match: re.Match[str], reference: datetime) -> Resolution:
    return _months_part(_lower(match["part"]), int(match["year"]) * 12, 12, reference.tzinfo)


def _season(match: re.Match[str], reference: datetime) -> Resolution:
    """Northern-hemisphere seasons of three months; winter Y is December Y to the end of February Y+1."""
    first_month = _SEASON_START[match["season"].lower()]
    modifier = _lower(match["modifier"])
    if match["year"]:
        start = int(match["year"]) * 12 + first_month - 1
    elif modifier is None and not _has_time_context(match):
        return None  # "Spring Boot", "I fall", "summer internship": a season needs "in", "last", a year ...
    else:
        mode = modifier if modifier in ("last", "this", "next") else "bare"
        start = _yearly_start(mode, first_month, 3, reference.date())
    return _months_part(modifier if modifier in ("early", "mid", "late") else None, start, 3, reference.tzinfo)


def _named_day(match: re.Match[str], reference: datetime) -> Resolution:
    today = reference.date()
    offset = {"day before yesterday": -2, "yesterday": -1, "tomorrow": 1}.get(_normalised(match[0]), 0)
    day = today + timedelta(days=offset)
    return _days(day, day + timedelta(days=1), reference.tzinfo)


def _last_night(match: re.Match[str], reference: datetime) -> Resolution:
    """Noon yesterday to noon today: the evening before and the small hours after midnight."""
    noon = datetime.combine(reference.date(), time(12), tzinfo=reference.tzinfo)
    return noon - timedelta(days=1), noon


def _calendar_unit(match: re.Match[str], reference: datetime) -> Resolution:
    """this/last/next week (ISO, Monday to Sunday), weekend (Saturday and Sunday of that week), month, year."""
    step = {"last": -1, "this": 0, "next": 1}[match["modifier"].lower()]
    unit = match["unit"].lower()
    today = reference.date()
    zone = reference.tzinfo
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        first = monday + timedelta(days=5) if unit == "weekend" else monday
        return _days(first, monday + timedelta(days=7), zone)
    if unit == "month":
        return _months(_month_index(today) + step, 1, zone)
    return _months((today.year + step) * 12, 12, zone)


def _weekday(match: re.Match[str], reference: datetime) -> Resolution:
    """Bare ("on Friday"): the most recent such day on or before the reference day; "last": strictly before it;
    "this": in the reference's ISO week; "next": the first one after it."""
    today = reference.date()
    wanted = _WEEKDAYS.index(match["weekday"].lower())
    modifier = _lower(match["modifier"])
    back = (today.weekday() - wanted) % 7
    if modifier == "last":
        day = today - timedelta(days=back or 7)
    elif modifier == "this":
        day = today + timedelta(days=wanted - today.weekday())
    elif modifier == "next":
        day = today + timedelta(days=(wanted - today.weekday()) % 7 or 7)
    else:
        day = today - timedelta(days=back)
    return _days(day, day + timedelta(days=1), reference.tzinfo)


def _count_range(word: str) -> tuple[int, int]:
    word = _normalised(word).removeprefix("a ")
    if word.isdigit():
        return int(word), int(word)
    if word.startswith("couple"):
        return 2, 2
    if word in ("few", "several"):
        return 2, 6
    return _COUNT_VALUES[word], _COUNT_VALUES[word]


def _back(today: date, unit: str, count: int) -> date:
    if unit == "day":
        return today - timedelta(days=count)
    if unit == "week":
        return today - timedelta(weeks=count)
    return _add_months(today, -count * (12 if unit == "year" else 1))


def _ago(match: re.Match[str], reference: datetime) -> Resolution:
    """ "N units ago": the whole days within half a unit of reference - N units (a day: that day; a week: the
    7 days centred on it). A range ("a few days ago": 2 to 6) spans from its farthest to its nearest moment."""
    low, high = _count_range(match["count"])
    if low < 1:
        return None
    unit = match["unit"].lower()
    half = timedelta(days=_HALF_UNIT_DAYS[unit])
    try:
        first = _back(reference.date(), unit, high) - half
        last = _back(reference.date(), unit, low) + half
    except (OverflowError, ValueError):  # "5000 years ago" is before the calendar
        return None
    return _days(first, last + timedelta(days=1), reference.tzinfo)


def _trailing(match: re.Match[str], reference: datetime) -> Resolution:
    """ "the past 3 days", "the last week", "past few months": up to and including the reference day.
    A plain "last week" is the previous calendar week (see _calendar_unit), so it needs "the", "past" or a count."""
    if match["count"] is None and not match["lead"].lower().startswith(("the", "past")):
        return None
    _, high = _count_range(match["count"]) if match["count"] else (1, 1)
    today = reference.date()
    try:
        first = _back(today, match["unit"].lower(), high)
    except (OverflowError, ValueError):
        return None
    return _days(first, today + timedelta(days=1), reference.tzinfo)


def _recently(match: re.Match[str], reference: datetime) -> Resolution:
    today = reference.date()
    return _days(today - timedelta(days=_RECENTLY_DAYS), today + timedelta(days=1), reference.tzinfo)


def _unplaceable(match: re.Match[str], reference: datetime) -> Resolution:
    return _UNPLACEABLE


def _lower(text: str | None) -> str | None:
    return None if text is None else text.lower()


def _normalised(text: str) -> str:
    return " ".join(text.lower().replace("the ", "").split())


def _rule(pattern: str, resolve: Resolver) -> tuple[re.Pattern[str], Resolver]:
    return re.compile(pattern, re.IGNORECASE), resolve


_RULES: Final = (
    _rule(r"(?<![\w-])(?P<year>\d{4})(?P<sep>[-/])(?P<month>\d{1,2})(?P=sep)(?P<day>\d{1,2})(?!\d)", _iso_date),
    _rule(r"\b" + _DAY + r"(?P<of>\s+of)?\s+" + _MONTH + r"(?:,?\s+" + _YEAR + r")?", _day_month),
    _rule(r"\b" + _MONTH + r"\.?\s+(?:the\s+)?" + _DAY + r"(?:,?\s+" + _YEAR + r")?", _month_day),
    _rule(r"\b" + _PART + r"?" + _MONTH + r"(?:\s+of|,)?\s+" + _YEAR, _month_year),
    _rule(r"\b(?:(?P<modifier>last|this|next|early|mid|late)[\s-]+)?" + _MONTH, _month_alone),
    _rule(r"(?:\b" + _PART + r")?" + _YEAR, _year),
    _rule(
        r"\b(?:(?P<modifier>last|this|next|early|mid|late)[\s-]+)?(?P<season>spring|summer|autumn|fall|winter)"
        r"(?:\s+(?:of\s+)?" + _YEAR + r")?(?!\w)",
        _season,
    ),
    _rule(r"\b(?:(?:the\s+)?day\s+before\s+yesterday|yesterday|today|tonight|tomorrow)\b", _named_day),
    _rule(r"\bthis\s+(?:morning|afternoon|evening)\b", _named_day),
    _rule(r"\blast\s+night\b", _last_night),
    _rule(r"\b(?P<modifier>last|this|next)\s+(?P<unit>weekend|week|month|year)\b", _calendar_unit),
    _rule(r"\b(?:(?P<modifier>last|this|next)\s+)?(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b", _weekday),
    _rule(r"\b" + _COUNT + r"\s+" + _UNIT + r"\s+ago\b", _ago),
    _rule(r"\b(?P<lead>the\s+(?:past|last)|past|last)\s+(?:" + _COUNT + r"\s+)?" + _UNIT, _trailing),
    _rule(r"\b(?:recently|lately)\b", _recently),
    # Times relative to an event: "two weeks before the trip", "a day after", "the week before".
    _rule(
        r"\b(?:" + _COUNT + r"|\d+)\s+(?:hour|day|week|month|year)s?\s+(?:before|after|prior\s+to|following|"
        r"earlier|later)\b",
        _unplaceable,
    ),
    _rule(r"\bthe\s+(?:day|night|week|weekend|month|year)\s+(?:before|after|following)\b", _unplaceable),
)
# "before May 2023", "since last week": an operator directly followed by another expression.
_OPERATOR: Final = re.compile(r"\b(?P<operator>before|after|since|until|till|prior\s+to)\s+(?:the\s+)?", re.IGNORECASE)
