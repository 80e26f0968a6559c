"""The questions of bench/recall_sets.py: from what happened in a conversation (its facts, each with
the turns that tell it), questions of every category, each with its evidence turns.

Single-hop questions are worded ECHO_SHARE of the time with some of their evidence's words, as
people asking about a conversation they read mostly do, else in other words; open-domain ones name
a category ("sports") and never the thing; adversarial ones name another speaker than the one whose
turn holds the evidence, and only about what that speaker has nothing alike of their own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench import recall_vocabulary as V

if TYPE_CHECKING:  # the writer imports this module: its types only, for annotations
    from bench.recall_sets import Fact, Line, Person

QUOTAS = {"single-hop": 9, "multi-hop": 5, "temporal": 6, "open-domain": 4, "adversarial": 4}
ECHO_SHARE = 0.55  # of single-hop questions worded with some of their evidence's words


@dataclass(frozen=True)
class Asked:
    category: str
    question: str
    evidence: tuple[Line, ...]


class QuestionWriter:
    """Asks about one conversation's facts."""

    def __init__(self, rng: random.Random, *, people: Sequence[Person], facts: Sequence[Fact]) -> None:
        self.rng = rng
        self.people = list(people)
        self.facts = list(facts)

    def of(self, kind: str, person: Person | None = None) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind and (person is None or f.person is person)]

    def candidates(self) -> dict[str, list[Asked]]:
        asked: dict[str, list[Asked]] = {category: [] for category in QUOTAS}

        def ask(category: str, question: str, *evidence: Line) -> None:
            asked[category].append(Asked(category, question, tuple(evidence)))

        rng = self.rng
        for person in self.people:
            self.single_hop(person, ask)
            self.multi_hop(person, ask)
            self.temporal(person, ask)
            self.open_domain(person, ask)
            self.adversarial(person, ask)
        pet_owners = [p for p in self.people if self.of("pet", p)]
        if len(pet_owners) >= 2:
            first, second = pet_owners[:2]
            ask(
                "multi-hop",
                f"What pets do {first.name} and {second.name} have?",
                self.of("pet", first)[0].turns["adopt"],
                self.of("pet", second)[0].turns["adopt"],
            )
        for category in asked:
            rng.shuffle(asked[category])
        return asked

    def worded(self, paraphrases: Sequence[str], echoes: Sequence[str]) -> str:
        """A question template: one that shares some of its evidence's words (ECHO_SHARE of the
        time, as people asking about a conversation mostly do), else one in other words."""
        return self.rng.choice(echoes if echoes and self.rng.random() < ECHO_SHARE else paraphrases)

    def single_hop(self, person: Person, ask: Callable[..., None]) -> None:
        rng, w, worded = self.rng, person.words, self.worded
        title = person.job.title.split(" ", 1)[1]
        for fact in self.of("job", person):
            question = worded(
                ("What does {P} do for a living?", "What is {P}'s profession?"), ("Where does {P} work as a {title}?",)
            )
            ask("single-hop", w(question, title=title), fact.turns["role"])
        for fact in self.of("hobby", person):
            ask("single-hop", w(rng.choice(fact.data["hobby"].place_questions)), fact.turns["intro"])
        for fact in self.of("hobby_photo", person):
            ask("single-hop", w(fact.data["question"]), fact.turns["photo"])
        for fact in self.of("pet", person):
            assert person.pet is not None
            species, name = person.pet.species, person.pet_name
            question = worded(V.PET_NAME_QUESTIONS, ("What did {P} name the {desc}?",))
            ask("single-hop", w(question, species=species, desc=person.pet_description), fact.turns["name"])
            if "photo" in fact.turns:
                question = worded(
                    ("What was {P}'s {species} doing in the first photo {subj} shared?",),
                    ("What was {name} doing on day one?",),
                )
                ask("single-hop", w(question, species=species, name=name), fact.turns["photo"])
        for fact in self.of("pet_vet", person):
            assert person.pet is not None
            question = worded(
                ("What health scare did {P}'s {species} have?",), ("Why did {P} have to rush {name} to the vet?",)
            )
            ask("single-hop", w(question, species=person.pet.species, name=person.pet_name), fact.turns["news"])
        for fact in self.of("pet_trick", person):
            assert person.pet is not None
            question = worded(("What new trick can {P}'s {species} do?",), ("What did {name} learn to do?",))
            ask("single-hop", w(question, species=person.pet.species, name=person.pet_name), fact.turns["news"])
        for fact in self.of("trip", person):
            trip: V.Trip = fact.data["trip"]
            ask("single-hop", w(worded(trip.highlight_questions, (fact.data["echo"],))), fact.turns["highlight"])
            if "companion" in fact.turns:
                question = "Who did {P} travel to {dest} with?"
                ask("single-hop", w(question, dest=trip.destination), fact.turns["companion"])
            if "photo" in fact.turns:
                question = worded(
                    ("What did {P} photograph in {dest}?",), ("What was in {P}'s favourite shot from {dest}?",)
                )
                ask("single-hop", w(question, dest=trip.destination), fact.turns["photo"])
        for fact in self.of("purchase", person):
            ask("single-hop", w(rng.choice(fact.data["purchase"].find_questions)), fact.turns["photo"])
        for fact in self.of("wedding", person):
            ask("single-hop", w("Who got married in {P}'s family?"), fact.turns["announce"])
            question = worded(
                ("Which flowers decorated the wedding of {P}'s {kind}?",),
                ("What was the arch made of at the wedding of {P}'s {kind}?",),
            )
            ask("single-hop", w(question, kind=person.sibling_kind), fact.turns["photo"])
        for fact in self.of("baby", person):
            question = worded(("What is the name of {P}'s {relation}?",), ("What is the name of {P}'s {kind}'s baby?",))
            ask(
                "single-hop",
                w(question, relation=fact.data["relation"], kind=person.sibling_kind),
                fact.turns["announce"],
                fact.turns["name"],
            )
        for fact in self.of("grandma", person):
            question = worded(
                ("How old did {P}'s grandmother turn?",), ("How old did {P}'s grandma turn at the surprise party?",)
            )
            ask("single-hop", w(question), fact.turns["party"])
            question = worded(
                ("What shape was the cake at {P}'s family party?",),
                ("What did the cake look like at {P}'s grandma's party?",),
            )
            ask("single-hop", w(question), fact.turns["cake"])
        for fact in self.of("move", person):
            ask(
                "single-hop",
                w(worded(("Where does {P} live now?",), ("Where is {P}'s new place?",))),
                fact.turns["moved"],
            )
        for fact in self.of("book", person):
            ask("single-hop", w(worded(V.BOOK_QUESTIONS, ("What book couldn't {P} put down?",))), fact.turns["read"])
        for fact in self.of("injury", person):
            ask("single-hop", w(fact.data["question"]), fact.turns["told"])
        for fact in self.of("conference", person):
            ask("single-hop", w("What was {P}'s talk in {city} about?", city=fact.data["city"]), fact.turns["talk"])
        for fact in self.of("promotion", person):
            ask(
                "single-hop",
                w(worded(("What is {P}'s new title at work?",), ("What position was {P} promoted to?",))),
                fact.turns["announce"],
            )

    def multi_hop(self, person: Person, ask: Callable[..., None]) -> None:
        rng, w = self.rng, person.words
        hobbies = self.of("hobby", person)
        if len(hobbies) >= 2:
            ask("multi-hop", w(rng.choice(V.LIST_HOBBY_QUESTIONS)), *(f.turns["intro"] for f in hobbies))
        trips = self.of("trip", person)
        if len(trips) >= 2:
            ask("multi-hop", w(rng.choice(V.TRIP_LIST_QUESTIONS)), *(f.turns["announce"] for f in trips))
        named = [f for f in self.facts if f.person is person and f.data.get("names_sibling")]
        for fact in trips:
            if fact.data["companion"] == "sibling" and named:
                ask(
                    "multi-hop",
                    w("Where did {P} travel with {sib}?", sib=person.sibling),
                    named[0].turns["announce"],
                    fact.turns["announce"],
                    fact.turns["companion"],
                )
        for fact in self.of("pet", person):
            ask(
                "multi-hop",
                w("What kind of pet does {P} have, and what is it called?"),
                fact.turns["adopt"],
                fact.turns["name"],
            )
        purchases = self.of("purchase", person)
        if len(purchases) >= 2:
            ask("multi-hop", w("What new things has {P} bought?"), *(f.turns["photo"] for f in purchases))

    def temporal(self, person: Person, ask: Callable[..., None]) -> None:
        rng, w = self.rng, person.words
        for fact in self.of("trip", person):
            ask(
                "temporal",
                w(rng.choice(V.TRIP_WHEN_QUESTIONS), dest=fact.data["trip"].destination),
                fact.turns["announce"],
            )
        for fact in self.of("hobby", person):
            ask("temporal", w(rng.choice(fact.data["hobby"].start_questions)), fact.turns["intro"])
        for fact in self.of("pet", person):
            ask("temporal", w("When did {P} adopt {name}?", name=person.pet_name), fact.turns["adopt"])
        for fact in self.of("promotion", person):
            ask("temporal", w("When did {P} get promoted?"), fact.turns["announce"])
        for fact in self.of("wedding", person):
            ask("temporal", w("When did {P}'s {kind} get married?", kind=person.sibling_kind), fact.turns["announce"])
        for fact in self.of("baby", person):
            ask(
                "temporal", w("When was {P}'s {relation} born?", relation=fact.data["relation"]), fact.turns["announce"]
            )
        for fact in self.of("move", person):
            ask("temporal", w("When did {P} move house?"), fact.turns["moved"])
        for fact in self.of("job", person):
            ask("temporal", w("When did {P} start {pos} current job?"), fact.turns["start"])
        # "What did X do in <month>?": the first turn of each event of that month.
        events = ("trip", "hobby", "pet", "purchase", "wedding", "baby", "grandma", "move", "promotion", "conference")
        by_month: dict[tuple[int, int], list[Line]] = {}
        for fact in self.facts:
            if fact.person is person and fact.kind in events:
                by_month.setdefault((fact.happened.year, fact.happened.month), []).append(
                    next(iter(fact.turns.values()))
                )
        for (year, month), lines in sorted(by_month.items()):
            if 1 <= len(lines) <= 3:
                ask(
                    "temporal",
                    w("What did {P} do in {month} {year}?", month=V.MONTHS[month - 1], year=str(year)),
                    *lines,
                )

    def open_domain(self, person: Person, ask: Callable[..., None]) -> None:
        rng, w = self.rng, person.words
        by_category: dict[str, list[Line]] = {}
        for fact in self.of("hobby", person):
            by_category.setdefault(fact.data["hobby"].category, []).append(fact.turns["intro"])
        for category, lines in by_category.items():
            ask("open-domain", w(rng.choice(V.CATEGORY_QUESTIONS[category])), *lines)
        for fact in self.of("pet", person):
            assert person.pet is not None
            ask("open-domain", w(rng.choice(person.pet.kind_questions)), fact.turns["adopt"])
        for fact in self.of("purchase", person):
            ask("open-domain", w(fact.data["purchase"].category_question), fact.turns["photo"])
        for fact in self.of("job", person):
            ask("open-domain", w("Does {P} work in {field}?", field=person.job.field), fact.turns["role"])
        for fact in self.of("volunteering", person):
            ask("open-domain", w(fact.data["question"]), fact.turns["told"])

    def adversarial(self, person: Person, ask: Callable[..., None]) -> None:
        """Questions naming another speaker than the one who said it: the evidence is this person's turn.
        Only about what the named speaker has nothing alike of their own, so the question has one answer."""
        rng = self.rng
        for wrong in (p for p in self.people if p is not person):
            w = wrong.words
            for fact in self.of("pet", person):
                assert person.pet is not None
                if wrong.pet is None or wrong.pet.species != person.pet.species:
                    ask(
                        "adversarial",
                        w(rng.choice(V.PET_NAME_QUESTIONS), species=person.pet.species),
                        fact.turns["name"],
                    )
            for fact in self.of("trip", person):
                ask(
                    "adversarial",
                    w(rng.choice(V.TRIP_WHEN_QUESTIONS), dest=fact.data["trip"].destination),
                    fact.turns["announce"],
                )
            for fact in self.of("purchase", person):
                ask("adversarial", w(rng.choice(fact.data["purchase"].find_questions)), fact.turns["photo"])
            for fact in self.of("hobby", person):
                if fact.data["hobby"] not in wrong.hobbies:
                    ask("adversarial", w(rng.choice(fact.data["hobby"].place_questions)), fact.turns["intro"])
            for kind in ("book", "injury", "volunteering"):
                if not self.of(kind, wrong):
                    for fact in self.of(kind, person):
                        question = fact.data.get("question") or rng.choice(V.BOOK_QUESTIONS)
                        ask("adversarial", w(question), *fact.turns.values())

    def questions(self) -> list[Asked]:
        """Up to QUOTAS of each category (a third speaker adds a few), no question asked twice."""
        candidates = self.candidates()
        scale = 1.25 if len(self.people) > 2 else 1.0
        chosen: list[Asked] = []
        seen: set[str] = set()
        for category, quota in QUOTAS.items():
            taken = 0
            for asked in candidates[category]:
                if taken >= round(quota * scale):
                    break
                if asked.question not in seen:
                    seen.add(asked.question)
                    chosen.append(asked)
                    taken += 1
        self.rng.shuffle(chosen)
        return chosen
