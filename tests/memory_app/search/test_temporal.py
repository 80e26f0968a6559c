"""A search query's time words ("last July", "in May 2023", "two weeks ago") become a window of time,
resolved against the latest time said in the searched conversations. Pure: no database."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from memory_app.search.temporal import TimeWindow, resolve_time

# A Thursday in August 2023, mid-afternoon.
REFERENCE = datetime(2023, 8, 10, 15, 30, tzinfo=UTC)


def day(year: int, month: int, day_of_month: int) -> datetime:
    return datetime(year, month, day_of_month, tzinfo=UTC)


def window(query: str, reference: datetime = REFERENCE) -> TimeWindow:
    found = resolve_time(query, reference=reference)
    assert found is not None, query
    return found


def span(query: str, reference: datetime = REFERENCE) -> tuple[datetime, datetime]:
    found = window(query, reference)
    return found.start, found.end


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did we ship in 2023", (day(2023, 1, 1), day(2024, 1, 1))),
        ("the move during 2022", (day(2022, 1, 1), day(2023, 1, 1))),
        ("2021 budget review", (day(2021, 1, 1), day(2022, 1, 1))),
        ("in May 2023", (day(2023, 5, 1), day(2023, 6, 1))),
        ("May of 2023", (day(2023, 5, 1), day(2023, 6, 1))),
        ("in May, 2022", (day(2022, 5, 1), day(2022, 6, 1))),
        ("trip in Sept 2021", (day(2021, 9, 1), day(2021, 10, 1))),
    ],
)
def test_it_resolves_years_and_months_with_a_year(query: str, expected: tuple[datetime, datetime]) -> None:
    assert span(query) == expected


@pytest.mark.parametrize(
    "query",
    ["call 12023 now", "it costs $2023", "ticket #2023", "version 2023.1", "05/2023", "the 2020s", "2023% growth"],
)
def test_it_reads_no_year_inside_a_longer_number_or_an_amount(query: str) -> None:
    assert resolve_time(query, reference=REFERENCE) is None


@pytest.mark.parametrize("query", ["in 1899", "back in 2101", "the year 3000"])
def test_it_reads_no_year_outside_1900_to_2100(query: str) -> None:
    assert resolve_time(query, reference=REFERENCE) is None


@pytest.mark.parametrize(
    ("query", "reference", "expected"),
    [
        # bare / "in": the most recent July that started on or before the reference (its own July if in July)
        ("what did she do in July", day(2023, 8, 10), (day(2023, 7, 1), day(2023, 8, 1))),
        ("during July", day(2023, 7, 10), (day(2023, 7, 1), day(2023, 8, 1))),
        ("in July", day(2023, 6, 30), (day(2022, 7, 1), day(2022, 8, 1))),
        # "last": the most recent July that ended before the reference's month began
        ("last July", day(2023, 8, 10), (day(2023, 7, 1), day(2023, 8, 1))),
        ("last July", day(2023, 7, 10), (day(2022, 7, 1), day(2022, 8, 1))),
        ("last July", day(2023, 3, 1), (day(2022, 7, 1), day(2022, 8, 1))),
        # "this": the July of the reference's year; "next": the first July after the reference's month
        ("this July", day(2023, 3, 1), (day(2023, 7, 1), day(2023, 8, 1))),
        ("next July", day(2023, 7, 10), (day(2024, 7, 1), day(2024, 8, 1))),
        ("next July", day(2023, 6, 10), (day(2023, 7, 1), day(2023, 8, 1))),
        ("in December", day(2024, 1, 5), (day(2023, 12, 1), day(2024, 1, 1))),
        ("since we met in Jan", day(2023, 8, 10), (day(2023, 1, 1), day(2023, 2, 1))),
    ],
)
def test_it_resolves_a_month_alone_against_the_reference(
    query: str, reference: datetime, expected: tuple[datetime, datetime]
) -> None:
    assert span(query, reference) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("early July 2023", (day(2023, 7, 1), day(2023, 7, 11))),
        ("mid-July 2023", (day(2023, 7, 11), day(2023, 7, 21))),
        ("late February 2024", (day(2024, 2, 21), day(2024, 3, 1))),
        ("in late July", (day(2023, 7, 21), day(2023, 8, 1))),
        ("early May", (day(2023, 5, 1), day(2023, 5, 11))),
        ("early 2023", (day(2023, 1, 1), day(2023, 5, 1))),
        ("late 2022", (day(2022, 9, 1), day(2023, 1, 1))),
    ],
)
def test_early_mid_and_late_narrow_the_period(query: str, expected: tuple[datetime, datetime]) -> None:
    assert span(query) == expected


@pytest.mark.parametrize(
    ("query", "reference", "expected"),
    [
        ("what did we eat on 8 May 2023", REFERENCE, day(2023, 5, 8)),
        ("May 8, 2023", REFERENCE, day(2023, 5, 8)),
        ("May 8th 2022", REFERENCE, day(2022, 5, 8)),
        ("8th May 2021", REFERENCE, day(2021, 5, 8)),
        ("2023-05-08", REFERENCE, day(2023, 5, 8)),
        ("2023-05-08T19:30 meeting", REFERENCE, day(2023, 5, 8)),
        # no year: the most recent such date on or before the reference day
        ("May 8th", day(2023, 8, 10), day(2023, 5, 8)),
        ("May 8th", day(2023, 5, 8), day(2023, 5, 8)),
        ("May 8th", day(2023, 5, 7), day(2022, 5, 8)),
        ("on the 8th of May", day(2023, 3, 1), day(2022, 5, 8)),
        ("on 8 May", REFERENCE, day(2023, 5, 8)),
        ("Aug. 3", REFERENCE, day(2023, 8, 3)),
        ("on Feb 29", day(2023, 8, 10), day(2020, 2, 29)),
    ],
)
def test_it_resolves_full_dates_to_one_day(query: str, reference: datetime, expected: datetime) -> None:
    assert span(query, reference) == (expected, expected + timedelta(days=1))


@pytest.mark.parametrize("query", ["2023-02-30", "2023-13-01"])
def test_it_reads_no_impossible_date(query: str) -> None:
    assert resolve_time(query, reference=REFERENCE) is None


def test_an_impossible_day_falls_back_to_its_month() -> None:
    assert span("on 31 April 2023") == (day(2023, 4, 1), day(2023, 5, 1))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("yesterday", (day(2023, 8, 9), day(2023, 8, 10))),
        ("what did I say today", (day(2023, 8, 10), day(2023, 8, 11))),
        ("this morning", (day(2023, 8, 10), day(2023, 8, 11))),
        ("the day before yesterday", (day(2023, 8, 8), day(2023, 8, 9))),
        ("last night", (datetime(2023, 8, 9, 12, tzinfo=UTC), datetime(2023, 8, 10, 12, tzinfo=UTC))),
        # weeks are ISO weeks, Monday to Sunday; the reference is Thursday 10 August
        ("last week", (day(2023, 7, 31), day(2023, 8, 7))),
        ("this week", (day(2023, 8, 7), day(2023, 8, 14))),
        ("last weekend", (day(2023, 8, 5), day(2023, 8, 7))),
        ("last month", (day(2023, 7, 1), day(2023, 8, 1))),
        ("this month", (day(2023, 8, 1), day(2023, 9, 1))),
        ("last year", (day(2022, 1, 1), day(2023, 1, 1))),
        ("this year", (day(2023, 1, 1), day(2024, 1, 1))),
        ("last Friday", (day(2023, 8, 4), day(2023, 8, 5))),
        ("on Thursday", (day(2023, 8, 10), day(2023, 8, 11))),
        ("last Thursday", (day(2023, 8, 3), day(2023, 8, 4))),
        ("recently", (day(2023, 7, 11), day(2023, 8, 11))),
        ("the past 3 days", (day(2023, 8, 7), day(2023, 8, 11))),
        ("in the last week", (day(2023, 8, 3), day(2023, 8, 11))),
        ("last few months", (day(2023, 2, 10), day(2023, 8, 11))),
    ],
)
def test_it_resolves_relative_days_weeks_months_and_years(query: str, expected: tuple[datetime, datetime]) -> None:
    assert span(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # "N units ago": the whole days within half a unit of reference - N units
        ("3 days ago", (day(2023, 8, 7), day(2023, 8, 8))),
        ("three days ago", (day(2023, 8, 7), day(2023, 8, 8))),
        ("a week ago", (day(2023, 7, 31), day(2023, 8, 7))),  # 3 Aug +- 3 days
        ("two weeks ago", (day(2023, 7, 24), day(2023, 7, 31))),  # 27 Jul +- 3 days
        ("a month ago", (day(2023, 6, 25), day(2023, 7, 26))),  # 10 Jul +- 15 days
        ("2 years ago", (day(2021, 2, 9), day(2022, 2, 9))),  # 10 Aug 2021 +- 182 days: 365 days
        ("twelve months ago", (day(2022, 7, 26), day(2022, 8, 26))),
        ("a few days ago", (day(2023, 8, 4), day(2023, 8, 9))),  # 2 to 6 days before
        ("a couple of days ago", (day(2023, 8, 8), day(2023, 8, 9))),
        ("several weeks ago", (day(2023, 6, 26), day(2023, 7, 31))),  # 6 weeks - 3 days to 2 weeks + 3 days
    ],
)
def test_ago_covers_whole_days_half_a_unit_around_the_moment(query: str, expected: tuple[datetime, datetime]) -> None:
    assert span(query) == expected


@pytest.mark.parametrize(
    ("query", "reference", "expected"),
    [
        ("in summer 2023", REFERENCE, (day(2023, 6, 1), day(2023, 9, 1))),
        ("the summer of 2021", REFERENCE, (day(2021, 6, 1), day(2021, 9, 1))),
        ("winter 2023", REFERENCE, (day(2023, 12, 1), day(2024, 3, 1))),
        ("last summer", day(2023, 8, 10), (day(2022, 6, 1), day(2022, 9, 1))),
        ("last summer", day(2023, 9, 10), (day(2023, 6, 1), day(2023, 9, 1))),
        ("last winter", day(2024, 1, 15), (day(2022, 12, 1), day(2023, 3, 1))),
        ("this winter", day(2024, 1, 15), (day(2023, 12, 1), day(2024, 3, 1))),
        ("during the winter", day(2024, 1, 15), (day(2023, 12, 1), day(2024, 3, 1))),
        ("in the fall", day(2023, 10, 2), (day(2023, 9, 1), day(2023, 12, 1))),
        ("last autumn", day(2023, 10, 2), (day(2022, 9, 1), day(2022, 12, 1))),
        ("late spring 2023", REFERENCE, (day(2023, 5, 1), day(2023, 6, 1))),
    ],
)
def test_it_resolves_northern_hemisphere_seasons(
    query: str, reference: datetime, expected: tuple[datetime, datetime]
) -> None:
    assert span(query, reference) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("before May 2023", (day(1923, 8, 10) + timedelta(hours=15, minutes=30), day(2023, 5, 1))),
        ("prior to 2023", (day(1923, 8, 10) + timedelta(hours=15, minutes=30), day(2023, 1, 1))),
        ("until June 2023", (day(1923, 8, 10) + timedelta(hours=15, minutes=30), day(2023, 7, 1))),
        ("since March 2023", (day(2023, 3, 1), REFERENCE + timedelta(days=1))),
        ("after 2022", (day(2023, 1, 1), REFERENCE + timedelta(days=1))),
        ("after the 8th of May", (day(2023, 5, 9), REFERENCE + timedelta(days=1))),
        ("since last week", (day(2023, 7, 31), REFERENCE + timedelta(days=1))),
    ],
)
def test_before_after_since_and_until_leave_one_end_open(query: str, expected: tuple[datetime, datetime]) -> None:
    assert span(query) == expected


def test_an_open_window_still_ends_after_it_starts_when_its_time_is_after_the_reference() -> None:
    start, end = span("after 2030")
    assert (start, end) == (day(2031, 1, 1), day(2031, 1, 2))


@pytest.mark.parametrize(
    "query",
    [
        "two weeks before the trip",
        "what happened 3 days after the launch",
        "a few days later",
        "the week before the wedding",
        # the first time is relative to an event: a later absolute time would name the wrong window
        "two weeks before the trip in May 2023",
    ],
)
def test_it_does_not_place_a_time_relative_to_an_event(query: str) -> None:
    assert resolve_time(query, reference=REFERENCE) is None


@pytest.mark.parametrize(
    "query",
    [
        "I may go to Paris",
        "they march on the capital",
        "this may help",
        "step 8 may fail",
        "Jan said the build broke",
        "what did June say about the trip",  # a person called June
        "April and Ben went hiking",
        "Spring Boot configuration",
        "do not fall behind",
        "summer internship notes",
        "a marathon in Marseille",
        "why did the login fail",
        "the last time we talked",
    ],
)
def test_words_that_only_look_like_times_do_not_resolve(query: str) -> None:
    assert resolve_time(query, reference=REFERENCE) is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("in May", (day(2023, 5, 1), day(2023, 6, 1))),
        ("since March", (day(2023, 3, 1), REFERENCE + timedelta(days=1))),
        ("what did we do this May?", (day(2023, 5, 1), day(2023, 6, 1))),
        ("last March", (day(2023, 3, 1), day(2023, 4, 1))),
        ("May 8", (day(2023, 5, 8), day(2023, 5, 9))),
    ],
)
def test_may_and_march_resolve_with_a_word_that_makes_them_months(
    query: str, expected: tuple[datetime, datetime]
) -> None:
    assert span(query) == expected


@pytest.mark.parametrize(
    ("query", "expression"),
    [
        ("what did she do last July?", "last July"),
        ("notes from the meeting in May 2023", "May 2023"),
        ("before May 2023 we", "before May 2023"),
        ("Two Weeks Ago we met", "Two Weeks Ago"),
    ],
)
def test_it_reports_the_expression_as_written(query: str, expression: str) -> None:
    """Search takes exactly this text out of the query it matches and embeds."""
    assert window(query).expression == expression


def test_the_first_expression_wins() -> None:
    assert window("in 2022 and then last July").expression == "2022"
    assert window("last July, not in 2022").expression == "last July"


def test_windows_are_in_the_reference_zone_with_local_midnights() -> None:
    paris = ZoneInfo("Europe/Paris")
    reference = datetime(2023, 3, 27, 9, 0, tzinfo=paris)  # the day after the clocks went forward
    found = window("yesterday", reference)
    assert (found.start, found.end) == (datetime(2023, 3, 26, tzinfo=paris), datetime(2023, 3, 27, tzinfo=paris))
    assert found.start.utcoffset() == timedelta(hours=1)
    assert found.end.utcoffset() == timedelta(hours=2)


def test_a_fixed_offset_reference_gives_windows_at_that_offset() -> None:
    tokyo = timezone(timedelta(hours=9))
    found = window("in July", datetime(2023, 8, 1, 0, 30, tzinfo=tokyo))
    assert (found.start, found.end) == (datetime(2023, 7, 1, tzinfo=tokyo), datetime(2023, 8, 1, tzinfo=tokyo))


def test_it_refuses_a_naive_reference() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        resolve_time("last July", reference=datetime(2023, 8, 10))  # a naive reference is the point


PAST_TENSE = [
    "last July",
    "last March",
    "last summer",
    "last winter",
    "last week",
    "last weekend",
    "last month",
    "last year",
    "last Sunday",
    "last night",
    "yesterday",
    "the day before yesterday",
    "1 day ago",
    "3 days ago",
    "two weeks ago",
    "a month ago",
    "eleven months ago",
    "5 years ago",
    "a few days ago",
    "a couple of weeks ago",
    "several months ago",
    "recently",
    "the past 3 days",
]
ANY_TENSE = [
    *PAST_TENSE,
    "in July",
    "this July",
    "next July",
    "early May",
    "mid-July 2023",
    "late February 2024",
    "May 8th",
    "on the 29th of February",
    "in summer 2023",
    "this winter",
    "this week",
    "this weekend",
    "next month",
    "this year",
    "on Friday",
    "next Friday",
    "today",
    "before May 2023",
    "since March 2023",
    "after 2022",
    "after 2099",
    "until last week",
    "early 2023",
]


def random_references(count: int) -> list[datetime]:
    generator = random.Random(20230810)
    zones = [UTC, ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York"), timezone(timedelta(hours=-3, minutes=-30))]
    earliest = datetime(1950, 1, 1, tzinfo=UTC)
    references = []
    for _ in range(count):
        moment = earliest + timedelta(seconds=generator.randrange(150 * 365 * 24 * 3600))
        references.append(moment.astimezone(generator.choice(zones)))
    return references


@pytest.mark.parametrize("reference", random_references(300), ids=lambda moment: moment.isoformat())
def test_every_window_is_non_empty_aware_and_past_tense_ones_never_start_after_the_reference(
    reference: datetime,
) -> None:
    for query in ANY_TENSE:
        found = window(query, reference)
        assert found.start < found.end, (query, found)
        assert found.start.tzinfo is reference.tzinfo and found.end.tzinfo is reference.tzinfo, query
    for query in PAST_TENSE:
        assert window(query, reference).start <= reference, query
