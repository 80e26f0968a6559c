"""manage.py recall_eval: the measures on fixed rankings, the BM25 baseline and the whole command on
a ten-turn conversation (recall_tiny.json) against figures computed by hand, the file's validation,
and the teams it loads into (removed afterwards unless --keep)."""

from __future__ import annotations

import copy
import io
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory_app.conversations.models import Message, Session
from memory_app.search.evalset import EvalSetError, load_evalset, message_content, validate_evalset
from memory_app.search.models import SearchItem
from memory_app.search.recall_measures import (
    Bm25Index,
    evidence_hit,
    evidence_recall,
    mean_figures,
    ndcg,
    question_figures,
)
from memory_app.tenancy.models import Team

TINY = Path(__file__).with_name("recall_tiny.json")

# BM25 on recall_tiny.json, by hand. Each turn is indexed as its message, "Speaker: text" (plus
# " [shares a photo: caption]"); its tokens, stopwords dropped, and lengths |D|:
#   t1 ana went surfing sunday (4)          t6 ana look bought shares photo red ukulele (7)
#   t2 ben cool look like (4)               t7 ben pixel broke vase (4)
#   t3 ana huge waves beach much fun (6)    t8 ana poor vase (3)
#   t4 ben adopted cat named pixel (5)      t9 ben start teaching math september (5)
#   t5 ana awesome news (3)                 t10 ana good luck school (4)
# N = 10, avgdl = 45 / 10 = 4.5, so k1 * (1 - b + b * |D| / avgdl) = 1.2 * (0.25 + 0.75 * |D| / 4.5)
# = 0.3 + 0.2 |D|, and a term found once scores idf * 2.2 / (1.3 + 0.2 |D|):
#   idf * 1.157895 (|D| = 3), 1.047619 (4), 0.956522 (5), 0.88 (6), 0.814815 (7).
# idf(n) = ln(1 + (10 - n + 0.5) / (n + 0.5)): a word of one turn 1.992430, "ana" (6 turns) 0.526093.
#
# q1 "What did Ana see at the beach on Sunday?" -> ana, see, beach, sunday ("see" is in no turn)
#   t1 (ana + sunday) = 2.518523 * 1.047619 = 2.638453; t3 (ana + beach) = 2.518523 * 0.88 = 2.216300;
#   then the other Ana turns by "ana" alone, shortest first: t5, t8 (0.609160), t10 (0.551145), t6 (0.428668).
#   Evidence t3 is 2nd: R@1 0, R@5 1, R@10 1; NDCG = (1 / log2 3) / 1 = 0.630930.
# q2 "What hobbies does Ana have?" -> hobbies, ana: only "ana" matches, so the Ana turns shortest first:
#   t5, t8, t1, t10, t3, t6 (ties keep the conversation's order). Evidence t1 (3rd), t6 (6th):
#   R@1 0, R@5 1/2, R@10 1; NDCG = (1/log2 4 + 1/log2 7) / (1 + 1/log2 3) = 0.856207 / 1.630930 = 0.524981.
# q3 "What did Ana do in July 2023?" -> ana, july, 2023: the same ranking; t1 3rd: R 0, 1, 1; NDCG 1/log2 4 = 0.5.
# q4 "Which musical instrument did Ana buy?": the same ranking (the ukulele is only in a caption, and no
#   word of the question is); t6 6th: R 0, 0, 1; NDCG 1/log2 7 = 0.356207.
# q5 "What is the name of the cat Ana adopted?" -> name, cat, ana, adopted ("named" is not "name": no
#   stemming): t4 (cat + adopted) = 2 * 1.992430 * 0.956522 = 3.811606 first: every figure 1.
BM25_RANKINGS = {
    "q1": ["t1", "t3", "t5", "t8", "t10", "t6"],
    "q2": ["t5", "t8", "t1", "t10", "t3", "t6"],
    "q3": ["t5", "t8", "t1", "t10", "t3", "t6"],
    "q4": ["t5", "t8", "t1", "t10", "t3", "t6"],
    "q5": ["t4", "t5", "t8", "t1", "t10", "t3", "t6"],
}
BM25_BY_CATEGORY = {  # R@1, R@5, R@10, hit@1, hit@5, hit@10, NDCG@10 of the one question of each category
    "single-hop": (0, 1, 1, 0, 1, 1, 0.630930),
    "multi-hop": (0, 0.5, 1, 0, 1, 1, 0.524981),
    "temporal": (0, 1, 1, 0, 1, 1, 0.5),
    "open-domain": (0, 0, 1, 0, 0, 1, 0.356207),
    "adversarial": (1, 1, 1, 1, 1, 1, 1),
}
# The means over the five: R@5 = (1 + 0.5 + 1 + 0 + 1) / 5, hit@5 = 4 / 5,
# NDCG = (0.630930 + 0.524981 + 0.5 + 0.356207 + 1) / 5 = 0.602424.
BM25_OVERALL = (0.2, 0.7, 1, 0.2, 0.8, 1, 0.602424)
FIGURES = ("R@1", "R@5", "R@10", "hit@1", "hit@5", "hit@10", "NDCG@10")


def tiny() -> dict[str, Any]:
    return json.loads(TINY.read_text())


def run_eval(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("recall_eval", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_measures_score_a_fixed_ranking_as_computed_by_hand() -> None:
    ranking, evidence = ["a", "b", "c", "d"], {"b", "d", "z"}
    assert evidence_recall(ranking=ranking, evidence=evidence, k=1) == 0
    assert evidence_recall(ranking=ranking, evidence=evidence, k=2) == pytest.approx(1 / 3)
    assert evidence_recall(ranking=ranking, evidence=evidence, k=10) == pytest.approx(2 / 3)
    assert (
        evidence_hit(ranking=ranking, evidence=evidence, k=1),
        evidence_hit(ranking=ranking, evidence=evidence, k=2),
    ) == (0, 1)
    # DCG = 1/log2(3) + 1/log2(5) = 0.630930 + 0.430677; the ideal puts all three first: 1 + 0.630930 + 0.5.
    assert ndcg(ranking=ranking, evidence=evidence) == pytest.approx(1.061606 / 2.130930, abs=1e-6)
    assert ndcg(ranking=["b", "d", "z"], evidence=evidence) == pytest.approx(1.0)
    # Past the 10th place nothing counts, and an empty ranking scores 0 everywhere.
    assert ndcg(ranking=[*"klmnopqrst", "b"], evidence={"b"}) == 0
    assert question_figures(ranking=[], evidence={"b"}) == dict.fromkeys(FIGURES, 0.0)
    perfect = question_figures(ranking=["b"], evidence={"b"})
    assert mean_figures([perfect, question_figures(ranking=[], evidence={"b"})]) == dict.fromkeys(FIGURES, 0.5)


def test_bm25_ranks_the_tiny_conversation_as_computed_by_hand() -> None:
    conversation = load_evalset(TINY)["conversations"][0]
    turns = [(t["id"], message_content(t)) for s in conversation["sessions"] for t in s["turns"]]
    index = Bm25Index.build(turns)

    assert index.average_length == 4.5
    assert index.idf("sunday") == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert index.idf("ana") == pytest.approx(0.526093, abs=1e-6)
    assert index.score({"ana", "see", "beach", "sunday"}, 0) == pytest.approx(2.638453, abs=1e-6)
    assert index.score({"ana", "see", "beach", "sunday"}, 2) == pytest.approx(2.216300, abs=1e-6)
    assert index.score({"name", "cat", "ana", "adopted"}, 3) == pytest.approx(3.811606, abs=1e-6)
    rankings = {q["id"]: index.rank(q["question"], limit=10) for q in conversation["questions"]}
    assert rankings == BM25_RANKINGS


def test_a_turn_becomes_a_message_naming_its_speaker_and_its_photo() -> None:
    assert message_content({"id": "t", "speaker": "Ana", "text": "Look!"}) == "Ana: Look!"
    assert (
        message_content({"id": "t", "speaker": "Ana", "text": "Look!", "image_caption": "a red ukulele"})
        == "Ana: Look! [shares a photo: a red ukulele]"
    )


@pytest.mark.django_db
def test_the_command_reports_the_hand_computed_bm25_figures_beside_memsite_and_dense(tmp_path: Path) -> None:
    out_file = tmp_path / "figures.json"

    printed, progress = run_eval(str(TINY), "--json", str(out_file))

    report = json.loads(out_file.read_text())
    assert report["questions"] == {
        "single-hop": 1, "multi-hop": 1, "temporal": 1, "open-domain": 1, "adversarial": 1, "overall": 5
    }  # fmt: skip
    assert (report["conversations"], report["sessions"], report["turns"]) == (1, 2, 10)
    bm25 = report["figures"]["bm25"]
    for category, expected in {**BM25_BY_CATEGORY, "overall": BM25_OVERALL}.items():
        assert [bm25[category][name] for name in FIGURES] == pytest.approx(expected, abs=1e-6), category
    assert {r["id"]: r["rankings"]["bm25"] for r in report["results"]} == BM25_RANKINGS
    # memsite and the vectors alone answer every question with turns of the conversation, each once.
    turn_ids = {f"t{n}" for n in range(1, 11)}
    for result in report["results"]:
        for system in ("memsite", "dense"):
            ranking = result["rankings"][system]
            assert ranking and set(ranking) <= turn_ids and len(set(ranking)) == len(ranking) <= 10
    for system in ("memsite", "dense"):
        assert all(0 <= value <= 1 for value in report["figures"][system]["overall"].values())
    assert report["setup"]["embedding_model"] == "fake-hashing-64"
    assert report["warnings"] == []
    assert "| **overall** | 5 | bm25 | 0.200 | 0.700 | 1.000 | 0.200 | 0.800 | 1.000 | 0.602 |" in printed
    assert "conversation 1/1 (ana-ben): 5 asked" in progress
    assert not Team.objects.filter(name__startswith="recall-eval").exists()
    assert not Session.objects.exists() and not SearchItem.objects.exists()


@pytest.mark.django_db
def test_keep_leaves_each_conversation_in_a_team_with_one_session_per_dated_session() -> None:
    printed, _ = run_eval(str(TINY), "--keep", "--systems", "memsite")

    team = Team.objects.get(name__startswith="recall-eval")
    assert team.name in printed
    sessions = list(Session.objects.filter(team=team).order_by("external_id"))
    assert [s.metadata for s in sessions] == [
        {"conversation": "ana-ben", "session": "s1", "date": "2023-07-02"},
        {"conversation": "ana-ben", "session": "s2", "date": "2023-08-15T19:30"},
    ]
    photo = Message.objects.get(session=sessions[1], seq=1)
    assert (photo.role, photo.name, photo.content) == (
        "user",
        "Ana",
        "Ana: Look what I bought. [shares a photo: a red ukulele]",
    )
    assert Message.objects.filter(session__team=team).count() == 10
    # Each turn was said at its session's date, a naive date read as UTC (a bare day at its midnight).
    said = {(m.session.metadata["session"], m.occurred_at) for m in Message.objects.filter(session__team=team)}
    assert said == {("s1", datetime(2023, 7, 2, tzinfo=UTC)), ("s2", datetime(2023, 8, 15, 19, 30, tzinfo=UTC))}
    indexed = SearchItem.objects.filter(team=team, state=SearchItem.State.INDEXED)
    assert indexed.count() == 10  # every turn searchable before the first question
    assert {item.occurred_at for item in indexed} == {moment for _, moment in said}


def test_systems_and_limit_choose_what_runs_without_loading_anything_for_bm25(tmp_path: Path) -> None:
    out_file = tmp_path / "figures.json"
    run_eval(str(TINY), "--systems", "bm25", "--limit", "1", "--json", str(out_file))  # no database needed

    report = json.loads(out_file.read_text())
    assert report["systems"] == ["bm25"] and list(report["figures"]) == ["bm25"]
    with pytest.raises(CommandError, match="--systems: choose among memsite, bm25, dense"):
        run_eval(str(TINY), "--systems", "bm25,elastic")
    with pytest.raises(CommandError, match="--limit must be at least 1"):
        run_eval(str(TINY), "--limit", "0")


def problems_of(data: Any) -> list[str]:
    with pytest.raises(EvalSetError) as raised:
        validate_evalset(data)
    return raised.value.problems


def test_validation_names_the_conversation_the_question_and_the_field() -> None:
    data = tiny()
    conversation = data["conversations"][0]
    conversation["questions"][1]["evidence"] = ["t1", "t99"]
    conversation["questions"][2]["category"] = "temporall"
    del conversation["questions"][3]["question"]
    conversation["sessions"][0]["turns"][1]["speaker"] = "Carl"
    conversation["sessions"][1]["turns"][1]["id"] = "t1"  # t7, which no question names
    conversation["sessions"][1]["date"] = "15 August 2023"

    assert problems_of(data) == [
        "conversations[0] (id 'ana-ben') > sessions[0] (id 's1') > turns[1] (id 't2'): speaker: 'Carl' is not "
        "one of the conversation's speakers",
        "conversations[0] (id 'ana-ben') > sessions[1] (id 's2'): date: must be an ISO 8601 date such as 2023-05-08 "
        "(or 2023-05-08T14:30)",
        "conversations[0] (id 'ana-ben') > sessions[1] (id 's2') > turns[1] (id 't1'): id: another turn of this "
        "conversation has the id 't1'",
        "conversations[0] (id 'ana-ben') > questions[1] (id 'q2'): evidence[1]: no turn of this conversation has "
        "the id 't99'",
        "conversations[0] (id 'ana-ben') > questions[2] (id 'q3'): category: 'temporall' is not one of single-hop, "
        "multi-hop, temporal, open-domain, adversarial",
        "conversations[0] (id 'ana-ben') > questions[3] (id 'q4'): question: must be a non-empty string",
    ]


def test_validation_rejects_files_of_another_shape() -> None:
    assert problems_of([]) == ['the file: must be an object with a "conversations" list']
    assert problems_of({"conversations": []}) == ["conversations: the list is empty"]
    twice = tiny()
    twice["conversations"].append(copy.deepcopy(twice["conversations"][0]))
    assert problems_of(twice) == ["conversations[1] (id 'ana-ben'): id: another conversation has the id 'ana-ben'"]
    no_questions = tiny()
    no_questions["conversations"][0]["questions"] = []
    assert problems_of(no_questions) == ["conversations[0] (id 'ana-ben'): questions: must be a non-empty list"]


def test_the_command_refuses_an_invalid_file_with_its_problems(tmp_path: Path) -> None:
    broken = tiny()
    broken["conversations"][0]["questions"][0]["evidence"] = []
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(CommandError, match=r"questions\[0\] \(id 'q1'\): evidence: must be a non-empty list"):
        run_eval(str(path))
    path.write_text("{not json")
    with pytest.raises(CommandError, match="not JSON"):
        run_eval(str(path))
