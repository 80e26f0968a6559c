"""The compaction ledger of a session: its runs, the latest done one, and their before/after figures."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memsite.errors import NotFound


def covered_through(run: CompactionRun | None) -> int:
    """The last seq a done run's summary stands for; 0 without a done run (nothing summarised)."""
    if run is None:
        return 0
    if run.covered_to_seq is None:  # set in the same write that marks a run done
        raise ValueError(f"compaction {run.pk} is done but covers no range")
    return run.covered_to_seq


def latest_done_run(session_id: Any) -> CompactionRun | None:
    """The compaction whose summary the active context starts from (reverted ones excluded)."""
    return (
        CompactionRun.objects.filter(session_id=session_id, status=CompactionRun.Status.DONE)
        .order_by("-covered_to_seq")
        .first()
    )


def compaction_runs(*, session: Session) -> QuerySet[CompactionRun]:
    return CompactionRun.objects.filter(session=session).order_by("-created_at")


def compaction_run_get(*, session: Session, run_id: uuid.UUID | str) -> CompactionRun:
    try:
        return CompactionRun.objects.get(session=session, pk=run_id)
    except (CompactionRun.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Compaction run not found.") from exc


@dataclass(frozen=True)
class LedgerRun:
    run: CompactionRun
    covered: list[Message]  # the first raw messages of its range, seq order
    more_covered: bool  # the range holds more than `covered`


@dataclass(frozen=True)
class CompactionLedger:
    runs: list[LedgerRun]  # newest first
    more_runs: bool

    @property
    def newest(self) -> CompactionRun | None:
        return self.runs[0].run if self.runs else None


def compaction_ledger(*, session: Session, limit: int, messages_per_run: int) -> CompactionLedger:
    """The session's latest compactions, each with the raw messages its summary stands in for.

    One query for the runs and one per run that covers a range (at most `limit`), each
    reading at most `messages_per_run` + 1 rows.
    """
    runs = list(compaction_runs(session=session)[: limit + 1])
    ledger: list[LedgerRun] = []
    for run in runs[:limit]:
        covered: list[Message] = []
        if run.covered_to_seq is not None:
            covered = list(
                Message.objects.filter(
                    session=session, seq__gt=run.covered_from_seq, seq__lte=run.covered_to_seq
                ).order_by("seq")[: messages_per_run + 1]
            )
        ledger.append(
            LedgerRun(run=run, covered=covered[:messages_per_run], more_covered=len(covered) > messages_per_run)
        )
    return CompactionLedger(runs=ledger, more_runs=len(runs) > limit)
