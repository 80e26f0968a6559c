"""The compaction parts of the session page, as data its template reads: the token gauge, the
panel ("Compact now", offered only when the service would accept it, and the live status of the
current run), the session's memory_config in plain words, and the ledger of runs, each with the
raw messages it covered beside the summary that stands in for them. The session page (a
conversations page) shows them; compaction's own pages (the panel partial it polls, the actions)
use them too, so they live below the pages: no domain imports another domain's pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_app.compaction import pipeline
from memory_app.compaction import selectors as compaction_selectors
from memory_app.compaction import services as compaction
from memory_app.compaction.config import ManagedMemoryConfig
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import MemoryType, Session
from memory_app.dashboard.message_content import COMPACT_FIELDS, CompactMessage, compact_message

# While a run is pending or running the panel polls this often; otherwise it still looks now
# and then, so a compaction an agent's append queued shows up too.
POLL_ACTIVE_SECONDS = 2
POLL_IDLE_SECONDS = 15


@dataclass(frozen=True)
class TokenGauge:
    """The session's active context (Session.active_tokens) against its threshold."""

    tokens: int
    threshold: int | None
    target: int | None  # what a compaction aims to bring it down to
    # Why "Compact now" would do nothing (None: it is offered), and why no compaction is queued
    # automatically although one is due (a revert's hold, runs without progress).
    blocker: str | None = None
    hold: str | None = None

    @property
    def percent(self) -> float:
        return 100 * self.tokens / self.threshold if self.threshold else 0.0

    @property
    def bar_percent(self) -> float:
        return min(self.percent, 100.0)

    @property
    def target_percent(self) -> float:
        return 100 * self.target / self.threshold if self.threshold and self.target else 0.0

    @property
    def level(self) -> str:
        return "over" if self.percent >= 100 else "high" if self.percent >= 80 else "ok"

    @property
    def figures(self) -> dict[str, str]:
        """The numbers as read: 150,000 rather than 150000."""
        return {name: f"{value:,}" for name, value in vars(self).items() if isinstance(value, int)}


def token_gauge(session: Session, *, run_active: bool = False) -> TokenGauge:
    """The gauge, with why "Compact now" is not offered. With a run active that is not asked:
    the run is what compaction_request would return."""
    if session.memory_type != MemoryType.MANAGED_CONVERSATION:
        return TokenGauge(tokens=session.active_tokens, threshold=None, target=None)
    config = compaction.session_config(session)
    if not config.active_context.enabled:
        return TokenGauge(tokens=session.active_tokens, threshold=None, target=None)
    # The service's own rule: "Compact now" is offered exactly when compaction_request accepts it.
    blocker = None if run_active else compaction.compaction_blocker(session=session)
    over = session.active_tokens > config.threshold_tokens
    hold = compaction.auto_compaction_hold(session) if over and blocker is None and not run_active else None
    return TokenGauge(
        tokens=session.active_tokens,
        threshold=config.threshold_tokens,
        target=config.compaction_target_tokens,
        blocker=blocker,
        hold=hold,
    )


# --- the panel ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPanel:
    gauge: TokenGauge
    current: CompactionRun | None  # the newest run: pending or running, or how the last one ended

    @property
    def active(self) -> bool:
        return self.current is not None and self.current.status in CompactionRun.ACTIVE

    @property
    def poll_seconds(self) -> int:
        return POLL_ACTIVE_SECONDS if self.active else POLL_IDLE_SECONDS


def compaction_panel(session: Session) -> CompactionPanel:
    """The gauge and the newest run, read now (the partial the page polls)."""
    return panel_for(session, compaction_selectors.compaction_runs(session=session).first())


def panel_for(session: Session, newest: CompactionRun | None) -> CompactionPanel:
    """The panel around `newest`, the session's newest run."""
    active = newest is not None and newest.status in CompactionRun.ACTIVE
    return CompactionPanel(gauge=token_gauge(session, run_active=active), current=newest)


def session_compaction_context(session: Session, *, newest: CompactionRun | None) -> dict[str, object]:
    """What the session page adds for its compaction panel and memory_config (`newest`: the
    ledger's newest run, read once for both)."""
    managed = session.memory_type == MemoryType.MANAGED_CONVERSATION
    panel = panel_for(session, newest)
    return {
        "panel": panel,
        "gauge": panel.gauge,
        "config_lines": memory_config_lines(compaction.session_config(session)) if managed else [],
    }


# --- memory_config in plain words -----------------------------------------------------------


@dataclass(frozen=True)
class ConfigLine:
    label: str
    value: str  # in words, with units
    setting: str  # the memory_config key(s) it reads, for whoever writes the JSON


def _rounds(count: int) -> str:
    count = max(count, 1)  # 0 protects the newest round too (pipeline.protected_tail_start)
    return "the newest assistant turn" if count == 1 else f"the newest {count} assistant turns"


_TRIGGERS = {"add": "an append", "get_messages": "a context read"}


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def memory_config_lines(config: ManagedMemoryConfig) -> list[ConfigLine]:
    """The session's managed-context settings as a person reads them: what each one does, with
    its unit. Figures derived by the services (target, summary budget) come from them."""
    policy = config.active_context
    running = pipeline.chain(config)
    truncation, summarization = policy.tool_truncation, policy.summarization
    triggers = " or ".join(_TRIGGERS[event] for event in config.trigger_events if event in _TRIGGERS)
    lines = [
        ConfigLine(
            "Compaction threshold",
            f"{config.threshold_tokens:,} tokens of active context; "
            + (
                f"passing it queues a compaction after {triggers}"
                if triggers
                else "no event queues a compaction automatically (Compact now only)"
            ),
            "threshold_tokens, trigger_events",
        ),
        ConfigLine(
            "Compaction target",
            f"{config.compaction_target_tokens:,} tokens (the threshold less "
            f"{policy.min_reduction_ratio:.0%}); an automatic compaction runs only if it saves at least that share",
            "active_context.min_reduction_ratio",
        ),
        ConfigLine(
            "Managed context",
            f"{_on(policy.enabled)}, mode “{policy.mode.replace('_', ' ')}”",
            "active_context.enabled, active_context.mode",
        ),
        ConfigLine(
            "Processors, in order",
            " → ".join(name.replace("_", " ") for name in running) or "none",
            "active_context.processor_order, excluded_processors",
        ),
    ]
    if policy.mode == pipeline.SLIDING_WINDOW:
        lines.append(
            ConfigLine(
                "Sliding window",
                f"{_on(policy.sliding_window.enabled)}; serves at most "
                f"{int(config.compaction_target_tokens * (1 - policy.sliding_window.headroom_percent)):,} tokens "
                f"({policy.sliding_window.headroom_percent:.0%} headroom below the target)",
                "active_context.sliding_window",
            )
        )
    lines += [
        ConfigLine(
            "Tool truncation",
            f"{_on(truncation.enabled and 'tool_truncation' in running)}; tool outputs over "
            f"{truncation.max_tool_message_tokens:,} tokens are cut to that and marked "
            f"“{truncation.append_marker.strip()}”, "
            f"except in {_rounds(truncation.grace_recent_messages)}",
            "active_context.tool_truncation",
        ),
        ConfigLine(
            "Summarization",
            f"{_on(pipeline.summarization_usable(config))}; {_rounds(summarization.grace_recent_messages)} "
            f"and what follows are never summarised; a summary is at most "
            f"{compaction.summary_budget(config):,} tokens"
            + ("; the first user message is kept word for word" if summarization.include_original_instruction else "")
            + (
                f"; keeps at most {summarization.max_retained_images} image(s)"
                if summarization.max_retained_images is not None
                else ""
            ),
            "active_context.summarization",
        ),
        ConfigLine(
            "Backward packing",
            f"{_on('backward_packing' in running)}; over the threshold, keeps "
            f"{_rounds(policy.backward_packing.grace_recent_messages)} "
            "whatever its size, then older turns while they fit",
            "active_context.backward_packing",
        ),
        ConfigLine("Images", f"each image counts as {config.image_token_estimate:,} tokens", "image_token_estimate"),
    ]
    return lines


# --- the ledger: each run's covered messages beside its summary -----------------------------

RUNS_SHOWN = 10
DIFF_MESSAGES_SHOWN = 40


def session_ledger(*, session: Session) -> compaction_selectors.CompactionLedger:
    """The session's newest runs, each with the first raw messages it covered (the page's share)."""
    return compaction_selectors.compaction_ledger(
        session=session, limit=RUNS_SHOWN, messages_per_run=DIFF_MESSAGES_SHOWN
    )


@dataclass(frozen=True)
class Change:
    """A before -> after figure as a signed percentage (a summary of a small range can grow)."""

    percent: int

    @classmethod
    def between(cls, before: int, after: int) -> Change | None:
        return cls(round(100 * (after - before) / before)) if before else None

    @property
    def label(self) -> str:
        sign = "+" if self.percent > 0 else "\N{MINUS SIGN}" if self.percent < 0 else "\N{PLUS-MINUS SIGN}"
        return f"{sign}{abs(self.percent)}%"

    @property
    def kind(self) -> str:
        return "growth" if self.percent > 0 else "saving"


@dataclass(frozen=True)
class RunView:
    run: CompactionRun
    before: list[CompactMessage]  # raw messages of its range (the first DIFF_MESSAGES_SHOWN)
    more_before: bool
    after: list[CompactMessage]  # the summary that stands in for them
    revertable: bool  # the latest done run: the only one compaction_revert accepts
    first_seq: int | None

    @property
    def token_change(self) -> Change | None:
        return Change.between(self.run.pre_tokens, self.run.post_tokens)

    @property
    def byte_change(self) -> Change | None:
        return Change.between(self.run.pre_bytes, self.run.post_bytes)


def _run_view(item: compaction_selectors.LedgerRun, *, latest: CompactionRun | None, on_page: set[int]) -> RunView:
    run = item.run
    return RunView(
        run=run,
        before=[
            compact_message(
                {name: getattr(message, name) for name in COMPACT_FIELDS},
                on_page=on_page,
                seq=message.seq,
                tokens=message.token_count,
                kind="raw",
            )
            for message in item.covered
        ],
        more_before=item.more_covered,
        after=[
            compact_message(
                message,
                on_page=on_page,
                seq=message.get("seq") if message.get("kind") == "instruction" else None,
                tokens=message.get("token_count"),
                kind="instruction" if message.get("kind") == "instruction" else "summary",
            )
            for message in run.summary or []
            if isinstance(message, dict)
        ],
        revertable=latest is not None and latest.pk == run.pk,
        first_seq=run.covered_from_seq + 1 if run.covered_to_seq is not None else None,
    )


def run_views(
    ledger: compaction_selectors.CompactionLedger, *, latest: CompactionRun | None, on_page: set[int]
) -> list[RunView]:
    """The ledger's runs as the page shows them (`latest`: the run the active context stands on,
    the only one a revert accepts; `on_page`: the seqs the timeline shows, linked in place)."""
    return [_run_view(item, latest=latest, on_page=on_page) for item in ledger.runs]
