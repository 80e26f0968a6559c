"""The ops page's throughput chart as geometry for an inline SVG the template draws: no JavaScript,
no chart library, and no inline styles (the CSP allows neither); colours come from ops.css."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from memory_app.ops.selectors import Throughput

CHART_HEIGHT = 48  # SVG units; the width is one unit per bar slot (BAR_SLOT) per bucket
BAR_SLOT = 10
BAR_WIDTH = 8


@dataclass(frozen=True)
class Bar:
    x: int
    done_y: float
    done_height: float
    failed_y: float
    failed_height: float
    title: str  # what the bar counts, shown on hover


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    peak: int  # jobs in the busiest bucket: the top of the scale


@dataclass(frozen=True)
class Window:
    key: str  # the query value
    label: str  # "the last hour"
    bucket: timedelta
    buckets: int
    bucket_label: str  # "minute"
    time_format: str  # strftime of a bucket's start in titles


WINDOWS = {
    "hour": Window("hour", "the last hour", timedelta(minutes=1), 60, "minute", "%H:%M"),
    "day": Window("day", "the last 24 hours", timedelta(hours=1), 24, "hour", "%d %b %H:00"),
}


def _jobs(n: int) -> str:
    return f"{n} job{'' if n == 1 else 's'}"


def throughput_chart(throughput: Throughput, window: Window) -> Chart:
    """Stacked bars per bucket (done below, every other ending above), scaled to the busiest."""
    peak = max((bucket.total for bucket in throughput.buckets), default=0)
    scale = CHART_HEIGHT / peak if peak else 0.0
    bars = []
    for index, bucket in enumerate(throughput.buckets):
        done_height = bucket.done * scale
        failed_height = bucket.failed * scale
        start = timezone.localtime(bucket.start).strftime(window.time_format)
        ended = f"{_jobs(bucket.total)} ended ({bucket.done} done, {bucket.failed} not)"
        title = f"{start}, one {window.bucket_label}: {ended}"
        bars.append(
            Bar(
                x=index * BAR_SLOT + (BAR_SLOT - BAR_WIDTH) // 2,
                done_y=round(CHART_HEIGHT - done_height, 2),
                done_height=round(done_height, 2),
                failed_y=round(CHART_HEIGHT - done_height - failed_height, 2),
                failed_height=round(failed_height, 2),
                title=title,
            )
        )
    return Chart(width=len(bars) * BAR_SLOT, height=CHART_HEIGHT, bars=bars, peak=peak)
