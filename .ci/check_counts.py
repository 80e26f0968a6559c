"""Print how many checks ran in each group of the suite per CI leg, and each leg's slowest tests.

Reads the JUnit XML files `make test` wrote (PYTEST_ARGS=--junitxml=...). A group is a set of
test modules; everything else counts as "other". Exits 1 if a group ran no check in any leg, so
a suite that silently stopped being collected fails CI instead of printing zeros. The slowest
tests are timed as JUnit records them: set-up, call and teardown together.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET  # our own pytest output, not untrusted input
from collections import Counter
from pathlib import Path

# group -> module prefixes (JUnit classnames are dotted module paths + class)
GROUPS: dict[str, tuple[str, ...]] = {
    "security": ("tests.security.", "tests.memory_app.tenancy.test_isolation"),
    "faults (chaos)": ("tests.chaos.",),
    "cost control and usage": ("tests.memory_app.usage.test_usage",),
}


def group_of(classname: str) -> str:
    for group, prefixes in GROUPS.items():
        if classname.startswith(prefixes):
            return group
    return "other"


def outcome_of(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return {"failure": "failed", "error": "errors", "skipped": "skipped"}[tag]
    return "passed"


SLOWEST = 40


def print_slowest(path: str) -> None:
    cases = ET.parse(path).getroot().iter("testcase")  # noqa: S314
    timed = sorted(
        ((float(case.get("time", 0)), f"{case.get('classname', '')}::{case.get('name', '')}") for case in cases),
        reverse=True,
    )
    total = sum(seconds for seconds, _ in timed)
    print(f"\nthe {SLOWEST} slowest tests in {Path(path).stem} ({len(timed)} tests, {total:.0f} s in all):")
    for seconds, name in timed[:SLOWEST]:
        print(f"  {seconds:8.2f} s  {name}")


def main(paths: list[str]) -> int:
    ran: Counter[str] = Counter()
    for path in paths:
        counts: dict[str, Counter[str]] = {group: Counter() for group in [*GROUPS, "other"]}
        for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314
            counts[group_of(case.get("classname", ""))][outcome_of(case)] += 1
        print(f"\nchecks per group in {Path(path).stem}:")
        print(f"  {'group':<26}{'passed':>8}{'failed':>8}{'errors':>8}{'skipped':>8}{'total':>8}")
        for group, counter in counts.items():
            total = sum(counter.values())
            ran[group] += total
            row = "".join(f"{counter[name]:>8}" for name in ("passed", "failed", "errors", "skipped"))
            print(f"  {group:<26}{row}{total:>8}")
    for path in paths:
        print_slowest(path)
    empty = [group for group in GROUPS if not ran[group]]
    if empty:
        print(f"no check ran in {', '.join(empty)}: its tests were not collected", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
