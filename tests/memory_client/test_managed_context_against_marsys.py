"""Differential test of managed-context compaction: marsys 0.2.1 against the server.

Each row of CASES is a memory_config (the JSON a session stores; marsys builds its
ManagedMemoryConfig from the same names). The same conversation -- tool calls, long tool
outputs, a user message carrying a tool result, a user message with two images -- goes to both:

- marsys: ManagedConversationMemory.add() for each message, then `_run_compaction` with a
  compaction model that answers the summary below (marsys_driver.py, in marsys's own venv);
- the server: a managed session created with that config and the messages appended through the
  API. An append over the threshold queues a compaction when summarization can run; the queued
  run is executed as a worker does, the scripted LLM answering the same summary. Then
  GET .../context/ and the run's stages_run from GET .../compactions/ (without a run -- the
  server queues none when summarization is off -- the processors are those the read applied).

Compared: which processors ran (marsys's CompactionEvent stages_run) and the shape of the
context afterwards: which of the conversation's messages are left (role, tool call ids), which
tool outputs end with the truncation marker, where the summary stands and how many images are
left (see `label`).

Token counts: every word of the texts is one cl100k_base token of four characters, which is
marsys's estimate too (4 characters a token); an image counts 800 in both. The overheads of a
message still differ by a few tokens, so every gate is checked to be clear of its
min_reduction_ratio in both libraries, and the budgets leave hundreds of tokens to spare.

Where the server deliberately differs, the row names the deviation: a function below that
removes exactly that difference, and that must change something in the row naming it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from memory_app.compaction import pipeline
from memory_app.compaction import services as compaction
from memory_app.compaction.config import parse_config
from memory_app.conversations import context as served_context
from memory_app.conversations.models import Session
from tests.llm_server import Reply
from tests.memory_app.compaction.test_compaction import SUMMARY
from tests.memory_client.test_against_marsys import ask_marsys

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 3000
MAX_TOOL_TOKENS = 100
MARKER = " [truncated]"
# What the compaction model answers in both libraries: SUMMARY, from the compaction tests.
KEEP_BOTH_IMAGES = [{"image_id": "img_0000", "context": "the map"}, {"image_id": "img_0001", "context": "the hotel"}]
KEEP_INSTRUCTION_AND_LATER_IMAGE = [
    {"image_id": "img_0000", "context": "the brief"},
    {"image_id": "img_0002", "context": "the map"},
]
KEEP_ALL_FOUR_IMAGES = [{"image_id": f"img_{i:04d}", "context": f"picture {i}"} for i in range(4)]
# A gate decision counts as clear when the estimated saving is this far (as a fraction of the
# threshold) from min_reduction_ratio in both libraries.
CLEARANCE = 0.05

# Three-letter words: with its leading space each is one cl100k_base token and four characters.
WORDS = "cat dog sun red big box car cup hat pen map key bus fan ice jam kit log mud net owl pig rat sea".split()


def text(tag: str, tokens: int) -> str:
    """About `tokens` tokens in both libraries, starting with the message's tag ("m05")."""
    return tag + " " + " ".join(WORDS[(index * 7) % len(WORDS)] for index in range(tokens))


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"q": "oslo"}'}}


LONG = 700  # a long tool output, far over MAX_TOOL_TOKENS
# Each text starts with its message's index ("mNN"), so a message is recognised in either
# library's context; "images" are seeds of distinct PNG images.
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": text("m00", 40)},  # the original instruction
    {"role": "assistant", "content": None, "tool_calls": [call("call_a", "search")]},
    {"role": "tool", "content": text("m02", LONG), "tool_call_id": "call_a", "name": "search"},
    {"role": "assistant", "content": text("m03", 8)},
    {"role": "user", "content": "Tool fetch returned: " + text("m04", LONG)},  # a tool result in a user message
    {"role": "assistant", "content": text("m05", 900)},
    {"role": "user", "content": text("m06", 30), "images": [1, 2]},
    {"role": "assistant", "content": None, "tool_calls": [call("call_b", "hotels"), call("call_c", "weather")]},
    {"role": "tool", "content": text("m08", LONG), "tool_call_id": "call_b", "name": "hotels"},
    {"role": "tool", "content": text("m09", 30), "tool_call_id": "call_c", "name": "weather"},
    {"role": "assistant", "content": text("m10", 40)},
    {"role": "user", "content": text("m11", 30)},
    {"role": "assistant", "content": None, "tool_calls": [call("call_d", "book")]},
    {"role": "tool", "content": text("m13", LONG), "tool_call_id": "call_d", "name": "book"},
    {"role": "assistant", "content": text("m14", 40)},
]
CALLER = {c["id"]: index for index, m in enumerate(CONVERSATION) for c in m.get("tool_calls") or []}
LATEST_USER = max(index for index, m in enumerate(CONVERSATION) if m["role"] == "user")


def png(seed: int) -> bytes:
    # The server checks an image's magic bytes; the rest makes each image distinct.
    return b"\x89PNG\r\n\x1a\n" + bytes([seed]) * 64


# --- the table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    config: dict[str, Any]  # merged over BASE
    keep_images: list[dict[str, str]] = field(default_factory=list)  # what the summary asks to keep
    instruction_images: tuple[int, ...] = ()  # images the first user message carries (seeds)
    deviations: tuple[str, ...] = ()  # names of DEVIATIONS this row shows


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


BASE: dict[str, Any] = {
    "threshold_tokens": THRESHOLD,
    "active_context": {"tool_truncation": {"max_tool_message_tokens": MAX_TOOL_TOKENS}},
}
# Rows about which outputs are truncated (summarization excluded): a threshold and target the
# truncated conversation fits in, so nothing is packed away (5600 tokens before truncation, at
# most 3850 after; target 4250).
ROOMY = {
    "threshold_tokens": 5000,
    "active_context": {"min_reduction_ratio": 0.15, "excluded_processors": ["summarization"]},
}
# Rows about packing (summarization excluded): a target of 300 tokens, and tool truncation below
# its ratio (it would save 0.79 of the threshold), so long outputs are packed, not shortened.
TIGHT = {"min_reduction_ratio": 0.9, "excluded_processors": ["summarization"]}


def policy(**active_context: Any) -> dict[str, Any]:
    return {"active_context": active_context}


def roomy(**active_context: Any) -> dict[str, Any]:
    return merged(ROOMY, policy(**active_context))


def grace(n: int) -> dict[str, int]:
    return {"grace_recent_messages": n}


CASES: dict[str, Case] = {
    # The default chain: truncation saves 0.8 of the threshold, summarizing the truncated
    # prefix 0.54, and packing (last) always runs.
    "defaults": Case({}, deviations=("kept_instruction",)),
    "tool_truncation_excluded": Case(policy(excluded_processors=["tool_truncation"]), deviations=("kept_instruction",)),
    # Without summarization the server queues no compaction: the read truncates and packs.
    "summarization_disabled": Case(policy(summarization={"enabled": False}), deviations=("packing_stops",)),
    "summarization_excluded": Case(policy(excluded_processors=["summarization"]), deviations=("packing_stops",)),
    "order_without_summarization": Case(
        policy(processor_order=["tool_truncation", "backward_packing"]), deviations=("packing_stops",)
    ),
    # Packing first leaves too little for a summary to save: summarization is skipped.
    "order_reversed": Case(
        policy(processor_order=["backward_packing", "summarization", "tool_truncation"]),
        deviations=("packing_stops",),
    ),
    # After the summary no long output is left to truncate.
    "order_summarization_first": Case(
        policy(processor_order=["summarization", "tool_truncation", "backward_packing"]),
        deviations=("kept_instruction",),
    ),
    "order_summarization_last": Case(
        policy(processor_order=["tool_truncation", "backward_packing", "summarization"]),
        deviations=("kept_instruction",),
    ),
    "ratio_low": Case(policy(min_reduction_ratio=0.2), deviations=("kept_instruction",)),
    # Truncation (0.8) clears 0.65, the summary (0.54) does not: packing to 1050 tokens follows.
    "ratio_high": Case(policy(min_reduction_ratio=0.65), deviations=("packing_stops",)),
    "summarization_grace_2": Case(
        policy(summarization=grace(2), tool_truncation=grace(2)), deviations=("kept_instruction",)
    ),
    "summarization_grace_3": Case(
        policy(summarization=grace(3), tool_truncation=grace(3)), deviations=("kept_instruction",)
    ),
    # Truncation protects one round, the summary two: the kept tail holds a long output.
    "summarization_grace_2_truncation_grace_1": Case(
        policy(summarization=grace(2)), deviations=("kept_instruction", "tail_served_whole")
    ),
    "packing_grace_1": Case(policy(**TIGHT, backward_packing=grace(1)), deviations=("packing_stops",)),
    "packing_grace_2": Case(policy(**TIGHT, backward_packing=grace(2))),
    "packing_grace_3": Case(policy(**TIGHT, backward_packing=grace(3))),
    "truncation_grace_1": Case(roomy(tool_truncation=grace(1))),
    "truncation_grace_2": Case(roomy(tool_truncation=grace(2))),
    "truncation_grace_3": Case(roomy(tool_truncation=grace(3))),
    "truncation_grace_beyond_the_rounds": Case(
        policy(tool_truncation=grace(9)), deviations=("kept_instruction", "fewer_rounds_than_grace")
    ),
    "tool_payload_user_messages_off": Case(roomy(tool_truncation={"include_tool_payload_user_messages": False})),
    # More than twice the threshold: the server plans from the newest turns up to twice the
    # threshold (marsys from all), and truncation clears the ratio either way (0.6 and 1.2).
    "long_history": Case(
        merged({"threshold_tokens": 2000}, policy(excluded_processors=["summarization"])), deviations=("packing_stops",)
    ),
    "images_kept": Case({}, keep_images=KEEP_BOTH_IMAGES, deviations=("kept_instruction",)),
    "images_capped": Case(
        policy(summarization={"max_retained_images": 1}), keep_images=KEEP_BOTH_IMAGES, deviations=("kept_instruction",)
    ),
    # The first user message carries two images too (img_0000, img_0001; m06's are img_0002 and
    # img_0003): they are choices like the others, and the kept instruction serves none itself.
    "instruction_images_kept": Case(
        {}, keep_images=KEEP_INSTRUCTION_AND_LATER_IMAGE, instruction_images=(3, 4), deviations=("kept_instruction",)
    ),
    # The cap keeps the newest first: the instruction's images are the first to go.
    "instruction_images_capped": Case(
        policy(summarization={"max_retained_images": 2}),
        keep_images=KEEP_ALL_FOUR_IMAGES,
        instruction_images=(3, 4),
        deviations=("kept_instruction",),
    ),
}


def memory_config(case: Case) -> dict[str, Any]:
    return merged(BASE, case.config)


def summary_for(case: Case) -> dict[str, Any]:
    return {**SUMMARY, "keep_images": case.keep_images}


# --- shapes -----------------------------------------------------------------------------------------

_TAG = re.compile(r"\bm(\d\d)\b")
# The summary's messages: the user's requests (a user message), the summary (an assistant
# message) and one user message per retained image.
SUMMARY_PARTS = {
    "[User Requests Summary]": "requests",
    "[Compacted Context Summary]": "summary",
    "[Retained image": "image",
}


def label(message: dict[str, Any]) -> str:
    """A message of a context as a label: "m07(call_b,call_c)", "m02(call_a)~" (a tool output
    ending with the truncation marker), "m06[2 images]", "requests", "summary", "image(img_0002)"
    (a retained image, with its one image); a summary message in an unexpected role says so."""
    content = message.get("content")
    parts = content if isinstance(content, list) else []
    body = " ".join(str(p.get("text", "")) for p in parts if p.get("type") == "text") if parts else str(content or "")
    images = sum(1 for part in parts if part.get("type") == "image_url")
    summary_part = next((name for prefix, name in SUMMARY_PARTS.items() if body.startswith(prefix)), None)
    if summary_part is not None:
        role = {"summary": "assistant"}.get(summary_part, "user")
        name = summary_part if message["role"] == role else f"{summary_part}({message['role']}!)"
        if summary_part == "image":  # which one: "[Retained image img_0003]: ..." in both libraries
            name += "(" + body.removeprefix("[Retained image ").split("]")[0] + ")"
        expected_images = 1 if summary_part == "image" else 0
        return name + (f"[{images} images]" if images != expected_images else "")
    if message.get("tool_calls"):
        ids = [c["id"] for c in message["tool_calls"]]
        name = f"m{CALLER[ids[0]]:02d}({','.join(ids)})"
    else:
        found = _TAG.search(body)
        name = f"m{found.group(1)}" if found else f"?{message['role']}"
        if message.get("tool_call_id"):
            name += f"({message['tool_call_id']})"
    if isinstance(content, str) and content.endswith(MARKER):
        name += "~"
    if images:
        name += f"[{images} images]"
    return name


def index_of(name: str) -> int | None:
    found = re.fullmatch(r"m(\d\d)\b.*", name)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Outcome:
    stages_run: list[str]
    shape: list[str]


# --- deviations: each removes one documented difference ------------------------------------------


def kept_instruction(theirs: Outcome, ours: Outcome) -> tuple[Outcome, Outcome]:
    """The server keeps the original instruction verbatim in front of the summary (stored with
    it and counted); marsys keeps only what the summary says of it. Drops the server's copy."""
    shape = list(ours.shape)
    heads = [at for at, name in enumerate(shape) if name in ("requests", "summary")]
    if heads and heads[0] > 0 and index_of(shape[heads[0] - 1]) == 0:
        del shape[heads[0] - 1]
    return theirs, Outcome(ours.stages_run, shape)


def packing_stops(theirs: Outcome, ours: Outcome) -> tuple[Outcome, Outcome]:
    """marsys's backward packing skips a unit that does not fit and fills the rest of the budget
    with older ones; the server's stops at the first unit that does not fit, so what it serves is
    one stretch of the conversation. Keeps marsys's newest unbroken stretch, led (as both do when
    packing leaves no user message) by the latest user message."""
    shape = list(theirs.shape)
    start = len(shape) - 1
    while start > 0:
        older, newer = index_of(shape[start - 1]), index_of(shape[start])
        if older is None or newer is None or older != newer - 1:
            break
        start -= 1
    stretch = shape[start:]
    if not any(CONVERSATION[i]["role"] == "user" for i in map(index_of, stretch) if i is not None):
        stretch.insert(0, f"m{LATEST_USER:02d}")
    return Outcome(theirs.stages_run, stretch), ours


def tail_served_whole(theirs: Outcome, ours: Outcome) -> tuple[Outcome, Outcome]:
    """marsys truncates the long tool outputs of the tail it keeps after the summary (truncation
    ran first, with fewer grace rounds); the server serves a context within threshold_tokens
    whole: truncation and packing apply only over it. Counts marsys's tail outputs as whole."""
    shape = list(theirs.shape)
    if "summary" in shape:
        after = shape.index("summary") + 1
        shape[after:] = [name.removesuffix("~") for name in shape[after:]]
    return Outcome(theirs.stages_run, shape), ours


def fewer_rounds_than_grace(theirs: Outcome, ours: Outcome) -> tuple[Outcome, Outcome]:
    """With fewer assistant messages than grace_recent_messages marsys protects nothing (its
    search for the N-th newest assistant message gives up) and truncates every long output; the
    server protects from the oldest assistant message, so nothing is left to truncate here.
    Drops tool_truncation from marsys's stages."""
    return Outcome([s for s in theirs.stages_run if s != pipeline.TOOL_TRUNCATION], theirs.shape), ours


DEVIATIONS: dict[str, Callable[[Outcome, Outcome], tuple[Outcome, Outcome]]] = {
    "kept_instruction": kept_instruction,
    "packing_stops": packing_stops,
    "tail_served_whole": tail_served_whole,
    "fewer_rounds_than_grace": fewer_rounds_than_grace,
}

TT, SUM, BP = pipeline.TOOL_TRUNCATION, pipeline.SUMMARIZATION, pipeline.BACKWARD_PACKING
# One row of each deviation as both libraries answer it, before any normalisation:
# (marsys, server).
SHOWN: dict[str, tuple[Outcome, Outcome]] = {
    "defaults": (
        Outcome([TT, SUM, BP], ["requests", "summary", "m14"]),
        Outcome([TT, SUM, BP], ["m00", "requests", "summary", "m14"]),
    ),
    # Budget 300: the last round (44 tokens) is kept and the newest turn before it (725) does not
    # fit. marsys skips it and packs older messages that fit; the server stops and borrows the
    # latest user message, which marsys packed anyway.
    "packing_grace_1": (Outcome([BP], ["m00", "m03", "m10", "m11", "m14"]), Outcome([BP], ["m11", "m14"])),
    "summarization_grace_2_truncation_grace_1": (
        Outcome([TT, SUM, BP], ["requests", "summary", "m12(call_d)", "m13(call_d)~", "m14"]),
        Outcome([TT, SUM, BP], ["m00", "requests", "summary", "m12(call_d)", "m13(call_d)", "m14"]),
    ),
    "truncation_grace_beyond_the_rounds": (
        Outcome([TT, SUM, BP], ["requests", "summary", "m14"]),
        Outcome([SUM, BP], ["m00", "requests", "summary", "m14"]),
    ),
    # The kept instruction serves its two images by their ids only; the cap keeps m06's two.
    "instruction_images_capped": (
        Outcome([TT, SUM, BP], ["requests", "summary", "image(img_0003)", "image(img_0002)", "m14"]),
        Outcome([TT, SUM, BP], ["m00", "requests", "summary", "image(img_0003)", "image(img_0002)", "m14"]),
    ),
}


# --- running both -----------------------------------------------------------------------------------


def messages_with_images(image: Callable[[int], str], case: Case) -> list[dict[str, Any]]:
    out = []
    for index, message in enumerate(CONVERSATION):
        fields = {key: value for key, value in message.items() if key != "images"}
        seeds = case.instruction_images if index == 0 else message.get("images", ())
        if seeds:
            fields["images"] = [image(seed) for seed in seeds]
        out.append(fields)
    return out


@pytest.fixture(scope="module")
def marsys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every row on marsys, in one subprocess (images as files: marsys opens paths)."""
    image_dir = tmp_path_factory.mktemp("images")

    def path(seed: int) -> str:
        file = image_dir / f"image-{seed}.png"
        file.write_bytes(png(seed))
        return str(file)

    cases = {
        name: {
            "config": memory_config(case),
            "messages": messages_with_images(path, case),
            "summary": summary_for(case),
        }
        for name, case in CASES.items()
    }
    answer = ask_marsys({"tmp": str(image_dir), "compaction_cases": cases})
    results: dict[str, dict[str, Any]] = answer["compaction_results"]
    return results


def data_url(seed: int) -> str:
    return "data:image/png;base64," + base64.b64encode(png(seed)).decode()


def run_on_server(api, llm_server, sent_tasks, case: Case) -> dict[str, Any]:
    body = {"memory_type": "managed_conversation", "memory_config": memory_config(case)}
    created = api.post("/api/v1/sessions/", body, format="json")
    assert created.status_code == 201, created.content
    session_id = created.json()["id"]
    appended = api.post(
        f"/api/v1/sessions/{session_id}/messages/", {"messages": messages_with_images(data_url, case)}, format="json"
    )
    assert appended.status_code == 201, appended.content
    for run_id in sent_tasks.ids:  # the run the append queued, if any
        llm_server.script(Reply(json.dumps(summary_for(case)), prompt_tokens=500, completion_tokens=60))
        compaction.compaction_execute(run_id=run_id)
    runs = api.get(f"/api/v1/sessions/{session_id}/compactions/").json()
    served = api.get(f"/api/v1/sessions/{session_id}/context/")
    assert served.status_code == 200, served.content
    read = served_context.served_context(session=Session.objects.get(pk=session_id))
    return {"runs": runs, "messages": served.json()["messages"], "read_stages": read.stages}


def server_stages(ours: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The processors that ran and the estimates they made: the run's, or without a run the read's."""
    runs = ours["runs"]
    assert len(runs) <= 1
    if runs:
        run = runs[0]
        assert run["status"] in ("done", "skipped"), run
        if run["status"] == "skipped":  # no summary: the read applies the same processors
            assert pipeline.stages_run(ours["read_stages"]) == run["stages_run"]
        stages = compaction.CompactionRun.objects.get(pk=run["id"]).stages
        return run["stages_run"], stages
    return pipeline.stages_run(ours["read_stages"]), [s.to_json() for s in ours["read_stages"]]


def assert_clear_of_boundaries(config: dict[str, Any], estimates: list[dict[str, Any]], who: str) -> None:
    """Every processor gated by min_reduction_ratio (all but the last) decided far from it."""
    parsed = parse_config(config)
    last = pipeline.chain(parsed)[-1]
    ratio = parsed.active_context.min_reduction_ratio
    for estimate in estimates:
        if estimate["processor"] == last or estimate.get("estimated_savings") is None:
            continue
        share = estimate["estimated_savings"] / parsed.threshold_tokens
        assert abs(share - ratio) >= CLEARANCE, f"{who}: {estimate} is {share:.2f} of the threshold, near {ratio}"


@pytest.mark.parametrize("name", list(CASES))
def test_compaction_matches_marsys(name, marsys, api, llm_server, sent_tasks):
    case = CASES[name]
    config = memory_config(case)
    theirs_raw = marsys[name]
    ours_raw = run_on_server(api, llm_server, sent_tasks, case)

    # Both compacted (marsys's started/completed events) from over the threshold, and asked
    # the model for a summary exactly when summarization ran.
    assert [e["status"] for e in theirs_raw["events"]] == ["started", "completed"]
    their_stages = theirs_raw["events"][-1]["stages_run"]
    our_stages, our_estimates = server_stages(ours_raw)
    assert theirs_raw["model_calls"] == int(pipeline.SUMMARIZATION in their_stages)
    assert len(llm_server.requests) == int(pipeline.SUMMARIZATION in our_stages)
    assert_clear_of_boundaries(config, theirs_raw["estimates"], "marsys")
    assert_clear_of_boundaries(config, our_estimates, "server")

    theirs = Outcome(their_stages, [label(m) for m in theirs_raw["messages"]])
    ours = Outcome(our_stages, [label(m) for m in ours_raw["messages"] if m["role"] != "system"])
    if name in SHOWN:
        assert (theirs, ours) == SHOWN[name]
    for deviation in case.deviations:
        normalised = DEVIATIONS[deviation](theirs, ours)
        # A row naming a deviation shows it: marsys and the server differ in exactly that way.
        assert normalised != (theirs, ours), f"{deviation} changes nothing in {name}"
        theirs, ours = normalised
    assert ours == theirs


def test_every_deviation_is_shown_by_a_row():
    shown = {deviation for case in CASES.values() for deviation in case.deviations}
    assert shown == set(DEVIATIONS)
    pinned = {deviation for name in SHOWN for deviation in CASES[name].deviations}
    assert pinned == set(DEVIATIONS)
