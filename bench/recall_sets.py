"""Seeded synthetic recall sets for `manage.py recall_eval`: long dated conversations between friends
and labelled questions of every category about them (the file format of memory_app/search/evalset.py).

    .venv/bin/python -m bench recall_sets --seed 1 --out bench/data/recall_dev.json    # development set
    .venv/bin/python -m bench recall_sets --seed 2 --out bench/data/recall_test.json   # test set
    # options: --conversations N (default: 6 to 8, from the seed)  --sessions N (default: 19 to 22 each)

Each conversation: two or three invented people (a job, two or three hobbies, maybe a pet, a
sibling, trips, purchases, family news) talking in 19-22 dated sessions of about 15-25 turns, a
week or two apart. What makes recall hard in real conversations is planted on purpose:
- small talk and short generic replies ("Cool! What did it look like?", "That's awesome!") between
  the turns that matter, and the speaker's name at the start of every turn;
- answers in the turn after the one the question's words match (the listener asks "What's the
  name?", the next turn holds it), or split over neighbouring turns;
- the object of a shared photo named only in its caption ("Look what I found!" + a telescope);
- paraphrased questions ("ride waves" for surfing, "furniture" for an armchair) and category
  questions ("What sports does Maya do?");
- list questions whose evidence sits in several sessions, temporal questions whose answer needs
  the session's date ("When did Leo go to Kyoto?": the turn says "last weekend"), and
  adversarial questions naming the other speaker (the evidence is the turn of the one who did it).
Categories, per conversation of two speakers: about 9 single-hop, 5 multi-hop, 6 temporal, 4
open-domain, 4 adversarial.

The same seed always writes the same file (one random.Random, no clock, no hash order).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import recall_vocabulary as V
from bench.recall_questions import QuestionWriter
from memory_app.search.evalset import validate_evalset  # the format's own rules (pure: no Django)

CHATTY_SHARE = 0.35  # of turns with a sentence of chatter before or after what they say
MIN_TURNS, MAX_TURNS = 15, 25  # per session, small talk fills up to a drawn target in this range


@dataclass
class Line:
    """A turn before it has an id (ids are given once the sessions are complete)."""

    speaker: str
    text: str
    caption: str | None = None
    id: str = ""


@dataclass
class Person:
    name: str
    pronoun: str  # a key of V.PRONOUNS
    job: V.Job
    hobbies: list[V.Hobby]
    sibling: str
    sibling_kind: str  # "sister" | "brother"
    pet: V.PetKind | None = None
    pet_name: str = ""
    pet_description: str = ""
    pet_pronoun: str = "she"

    def words(self, template: str, **more: str) -> str:
        """Fill a question template about this person ({P}, {subj}, {obj}, {pos} and `more`)."""
        subj, obj, pos = V.PRONOUNS[self.pronoun]
        return template.format(P=self.name, subj=subj, obj=obj, pos=pos, **more)


@dataclass
class Fact:
    """Something that happened to a person, the turns that tell it, and when it happened."""

    kind: str
    person: Person
    turns: dict[str, Line]
    happened: date
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Planned:
    """An episode placed in a session: `tell(day)` writes its turns and records its facts."""

    session: int
    tell: Callable[[date], list[Line]]


class ConversationWriter:
    """Writes one conversation: who the people are, what happens to them, session by session."""

    def __init__(self, rng: random.Random, *, number: int, seed: int, sessions: int, used: set[str]) -> None:
        self.rng = rng
        self.id = f"c{seed}-{number}"
        self.session_count = sessions
        self.facts: list[Fact] = []
        speakers = 3 if rng.random() < 0.25 else 2
        names = rng.sample([n for n in V.SPEAKER_NAMES if n not in used], speakers)
        used.update(names)
        jobs = rng.sample(V.JOBS, speakers)
        hobbies = rng.sample(V.HOBBIES, 3 * speakers)
        relatives = rng.sample(V.RELATIVE_NAMES, speakers)
        pets = rng.sample(V.PETS, speakers)
        self.people = [
            Person(
                name=names[i],
                pronoun=rng.choice(("she", "he", "she", "he", "they")),
                job=jobs[i],
                hobbies=hobbies[3 * i : 3 * i + rng.choice((2, 3, 3))] if i < 2 else hobbies[3 * i : 3 * i + 1],
                sibling=relatives[i],
                sibling_kind=rng.choice(("sister", "brother")),
            )
            for i in range(speakers)
        ]
        pet_names = rng.sample(V.PET_NAMES, speakers)
        for i, person in enumerate(self.people[:2]):
            if i == 0 or rng.random() < 0.6:
                person.pet = pets[i]
                person.pet_name = pet_names[i]
                person.pet_description = rng.choice(pets[i].descriptions)
                person.pet_pronoun = rng.choice(("she", "he"))
        self.trips = rng.sample(V.TRIPS, 3 * speakers)
        self.purchases = rng.sample(V.PURCHASES, 2 * speakers)
        self.start = date(2023, 1, 1) + timedelta(days=rng.randrange(0, 120))

    # --- people talking -------------------------------------------------------------------------

    def other(self, person: Person) -> Person:
        return self.rng.choice([p for p in self.people if p is not person])

    def say(self, person: Person, text: str, caption: str | None = None) -> Line:
        return Line(speaker=person.name, text=text, caption=caption)

    def when(self, day: date) -> tuple[str, date]:
        """Words for a moment shortly before the session ("last weekend"), and that day."""
        words, days = self.rng.choice(V.RELATIVE_DAYS)
        return words, day - timedelta(days=days)

    def record(self, kind: str, person: Person, happened: date, **turns: Line) -> Fact:
        fact = Fact(kind=kind, person=person, turns=turns, happened=happened)
        self.facts.append(fact)
        return fact

    # --- episodes: each returns its turns and records what happened --------------------------------

    def job_start(self, person: Person, day: date) -> list[Line]:
        listener, job = self.other(person), person.job
        start = self.say(
            person,
            self.rng.choice(
                (
                    "Started my new job this week!",
                    "First week at the new job done!",
                    "So I switched jobs, started on Monday.",
                )
            ),
        )
        ask = self.say(
            listener,
            self.rng.choice(("Congrats!! What are you doing now?", "Ooh, where is it?", "Nice! Tell me about it.")),
        )
        role = self.say(
            person,
            f"I'm {job.title} {job.workplace}. "
            + self.rng.choice(
                ("Still learning where everything is.", "The team seems really nice.", "Long hours but I love it.")
            ),
        )
        self.record("job", person, day - timedelta(days=day.weekday()), start=start, role=role)
        return [start, ask, role]

    def work_day(self, person: Person, day: date) -> list[Line]:
        return [
            self.say(person, self.rng.choice(person.job.days)),
            self.say(self.other(person), self.rng.choice((*V.SYMPATHY, "Haha, classic.", "Hang in there!"))),
        ]

    def promotion(self, person: Person, day: date) -> list[Line]:
        news = self.say(
            person,
            self.rng.choice(
                (
                    f"Guess what, I got promoted to {person.job.promotion} today!",
                    f"Big news: I'm officially {person.job.promotion} as of this morning!",
                )
            ),
        )
        self.record("promotion", person, day, announce=news)
        return [
            news,
            self.say(self.other(person), self.rng.choice(("I'm so happy for you!", "You totally deserve it!"))),
        ]

    def conference(self, person: Person, day: date) -> list[Line]:
        words, happened = self.when(day)
        city, topic = self.rng.choice(V.CONFERENCE_CITIES), self.rng.choice(V.CONFERENCE_TOPICS)
        talk = self.say(person, f"I gave my first conference talk in {city} {words}, about {topic}.")
        fact = self.record("conference", person, happened, talk=talk)
        fact.data.update(city=city)
        return [
            talk,
            self.say(self.other(person), "How did it go?"),
            self.say(person, "People asked questions for twenty minutes, I was so relieved."),
        ]

    def hobby_intro(self, person: Person, day: date, hobby: V.Hobby) -> list[Line]:
        intro = self.say(person, self.rng.choice(hobby.intros).format(place=self.rng.choice(hobby.places)))
        reply = self.say(
            self.other(person),
            self.rng.choice(
                (
                    "That's awesome!",
                    "Since when are you into that?",
                    "Cool! How is it going so far?",
                    "Ha, I can totally see you doing that.",
                )
            ),
        )
        fact = self.record("hobby", person, day, intro=intro)
        fact.data.update(hobby=hobby)
        turns = [intro, reply]
        if self.rng.random() < 0.5:
            turns.append(
                self.say(
                    person,
                    self.rng.choice(
                        (
                            "Just a few weeks, but I'm obsessed.",
                            "It's so fun, honestly.",
                            "I'm terrible at it, but I love it.",
                        )
                    ),
                )
            )
        return turns

    def hobby_update(self, person: Person, day: date, hobby: V.Hobby, photo: bool) -> list[Line]:
        update = self.say(person, self.rng.choice(hobby.updates))
        if not photo:
            return [update, self.say(self.other(person), self.rng.choice(V.GENERIC_REACTIONS))]
        ask = self.say(
            self.other(person), self.rng.choice(("Cool! What did it look like?", "Pics or it didn't happen!"))
        )
        index = self.rng.randrange(len(hobby.captions))
        picture = self.say(person, self.rng.choice(("Here you go.", "Here!", "Look!")), caption=hobby.captions[index])
        fact = self.record("hobby_photo", person, day, update=update, photo=picture)
        fact.data.update(question=hobby.caption_questions[index])
        return [update, ask, picture, self.say(self.other(person), self.rng.choice(V.GENERIC_REACTIONS))]

    def pet_adoption(self, person: Person, day: date) -> list[Line]:
        assert person.pet is not None
        pet, listener = person.pet, self.other(person)
        words, happened = self.when(day)
        adopt = self.say(
            person,
            self.rng.choice(
                (
                    f"Big news: we adopted a {person.pet_description}!",
                    f"So... I brought home a {person.pet_description} {words}.",
                    f"Meet the newest member of the family: a {person.pet_description}!",
                )
            ),
        )
        ask = self.say(
            listener, self.rng.choice(("Omg!! What's the name?", "Noooo way, name??", "Aww! What did you name them?"))
        )
        subj, obj, _ = V.PRONOUNS[person.pet_pronoun]
        named = self.say(
            person,
            self.rng.choice(pet.anecdotes).format(name=person.pet_name, subj=subj, obj=obj, subj_cap=subj.capitalize()),
        )
        turns = {"adopt": adopt, "name": named}
        lines = [adopt, ask, named]
        if self.rng.random() < 0.6:
            turns["photo"] = self.say(
                person,
                f"Here {subj} is on day one.",
                caption=self.rng.choice(pet.captions).format(desc=person.pet_description),
            )
            lines += [self.say(listener, "Aww, I need to meet them."), turns["photo"]]
        self.record("pet", person, happened, **turns)
        return lines

    def pet_news(self, person: Person, day: date, vet: bool) -> list[Line]:
        assert person.pet is not None
        subj, _, _ = V.PRONOUNS[person.pet_pronoun]
        if vet:
            words, happened = self.when(day)
            news = self.say(
                person,
                f"Had to rush {person.pet_name} to the vet {words}, {subj} {self.rng.choice(person.pet.vet_reasons)}.",
            )
            self.record("pet_vet", person, happened, news=news)
            return [
                news,
                self.say(self.other(person), self.rng.choice(V.SYMPATHY)),
                self.say(person, f"{subj.capitalize()}'s fine now, just very dramatic about it."),
            ]
        news = self.say(person, f"{person.pet_name} learned to {self.rng.choice(person.pet.tricks)}!")
        self.record("pet_trick", person, day, news=news)
        return [news, self.say(self.other(person), self.rng.choice(V.GENERIC_REACTIONS))]

    def trip(self, person: Person, day: date, trip: V.Trip) -> list[Line]:
        listener = self.other(person)
        words, happened = self.when(day)
        announce = self.say(person, self.rng.choice(V.TRIP_ANNOUNCEMENTS).format(dest=trip.destination, when=words))
        ask = self.say(
            listener,
            self.rng.choice(
                (
                    "No way! How was it?",
                    "Jealous!! Tell me everything.",
                    "Oh nice, how was it?",
                    "Cool! What did you do there?",
                )
            ),
        )
        chosen = self.rng.randrange(len(trip.highlights))
        highlight = self.say(person, trip.highlights[chosen])
        turns = {"announce": announce, "highlight": highlight}
        lines = [announce, ask, highlight]
        roll = self.rng.random()
        if roll < 0.55:
            companion = self.rng.choice(("sibling", "friends", "solo"))
            said = {
                "sibling": f"Just me and my {person.sibling_kind}, our first trip together since we were kids.",
                "friends": "A couple of friends from work, we rented a tiny apartment.",
                "solo": "Went on my own, which was a first for me.",
            }[companion]
            turns["companion"] = self.say(person, said)
            lines += [self.say(listener, "Who did you go with?"), turns["companion"]]
        elif roll < 0.8:
            lines.append(self.say(listener, "I've always wanted to go there!"))
        if self.rng.random() < 0.5:
            turns["photo"] = self.say(person, "Here's my favourite shot.", caption=self.rng.choice(trip.captions))
            lines += [turns["photo"], self.say(listener, self.rng.choice(V.GENERIC_REACTIONS))]
        fact = self.record("trip", person, happened, **turns)
        fact.data.update(
            trip=trip, echo=trip.highlight_echoes[chosen], companion=companion if "companion" in turns else ""
        )
        return lines

    def purchase(self, person: Person, day: date, purchase: V.Purchase) -> list[Line]:
        shown = self.say(person, purchase.intro, caption=purchase.caption)
        fact = self.record("purchase", person, day, photo=shown)
        fact.data.update(purchase=purchase)
        return [
            shown,
            self.say(
                self.other(person),
                self.rng.choice(
                    ("Ooh, I love it!", "That's so you, haha.", "Okay, I'm jealous.", "Wow, that's gorgeous!")
                ),
            ),
        ]

    def wedding(self, person: Person, day: date) -> list[Line]:
        words, happened = self.when(day)
        news = self.say(person, f"My {person.sibling_kind} {person.sibling} got married {words}!")
        flowers = self.rng.choice(("white peonies", "sunflowers", "wild lavender"))
        photo = self.say(person, "It was perfect. Look at this.", caption=f"the couple under an arch of {flowers}")
        fact = self.record("wedding", person, happened, announce=news, photo=photo)
        fact.data.update(names_sibling=True)
        return [
            news,
            self.say(self.other(person), "Congratulations to them! How was the wedding?"),
            photo,
            self.say(self.other(person), self.rng.choice(V.GENERIC_REACTIONS)),
        ]

    def baby(self, person: Person, day: date) -> list[Line]:
        words, happened = self.when(day)
        child = self.rng.choice(("girl", "boy"))
        role = {"she": "an aunt", "he": "an uncle", "they": "an auntie"}[person.pronoun]
        news = self.say(
            person, f"I'm {role} now! My {person.sibling_kind} {person.sibling} had a baby {child} {words}."
        )
        baby_name = self.rng.choice([n for n in V.RELATIVE_NAMES if n != person.sibling])
        named = self.say(person, f"{baby_name}. Seven pounds of pure screaming, haha.")
        fact = self.record("baby", person, happened, announce=news, name=named)
        fact.data.update(names_sibling=True, relation="niece" if child == "girl" else "nephew")
        return [news, self.say(self.other(person), "Aww! What's the baby's name?"), named]

    def family_party(self, person: Person, day: date) -> list[Line]:
        words, happened = self.when(day)
        party = self.say(person, f"We threw my grandma a surprise party for her 90th {words}.")
        cake = self.say(
            person,
            "She cried! And look at the cake.",
            caption=self.rng.choice(
                ("a cake shaped like a sewing machine with candles on top", "a three-tier cake shaped like a teapot")
            ),
        )
        self.record("grandma", person, happened, party=party, cake=cake)
        return [party, self.say(self.other(person), "That's so sweet! Was she surprised?"), cake]

    def move(self, person: Person, day: date) -> list[Line]:
        moved = self.say(person, f"We finally moved into the new place in {self.rng.choice(V.NEIGHBORHOODS)}!")
        self.record("move", person, day, moved=moved)
        return [
            moved,
            self.say(self.other(person), "Yay! How do you like it?"),
            self.say(person, "Boxes everywhere, but the light in the mornings is amazing."),
        ]

    def book(self, person: Person, day: date) -> list[Line]:
        title, author = self.rng.choice(V.BOOKS)
        read = self.say(person, self.rng.choice(V.BOOK_LINES).format(title=title, author=author))
        self.record("book", person, day, read=read)
        return [read, self.say(self.other(person), "Ooh, add it to my list.")]

    def volunteering(self, person: Person, day: date) -> list[Line]:
        text, question = self.rng.choice(V.VOLUNTEERING)
        told = self.say(person, text)
        fact = self.record("volunteering", person, day, told=told)
        fact.data.update(question=question)
        return [told, self.say(self.other(person), "That's really lovely of you.")]

    def injury(self, person: Person, day: date) -> list[Line]:
        text, question = self.rng.choice(V.INJURIES)
        told = self.say(person, text)
        fact = self.record("injury", person, day, told=told)
        fact.data.update(question=question)
        return [told, self.say(self.other(person), self.rng.choice(V.SYMPATHY))]

    # --- planning the sessions -------------------------------------------------------------------------

    def plan(self) -> list[Planned]:
        """Every episode of every person, each placed in a session after what it builds on."""
        rng, last = self.rng, self.session_count - 1
        plans: list[Planned] = []

        def place(low: int, high: int, tell: Callable[[date], list[Line]]) -> int:
            low = min(max(0, low), last)
            session = rng.randint(low, max(low, min(high, last)))
            plans.append(Planned(session, tell))
            return session

        trips, purchases = list(self.trips), list(self.purchases)
        # The two main speakers share out the kinds of news, so no two people tell the same story.
        family = rng.sample((self.wedding, self.baby, self.family_party, self.move), 4)
        extras = rng.sample((self.conference, self.book, self.volunteering, self.injury), 4)
        for index, person in enumerate(self.people):
            main = index < 2  # a third speaker joins in with less news of their own
            started = place(0, 2, lambda day, p=person: self.job_start(p, day))
            for hobby in person.hobbies:
                begun = place(started + 1, last - 3, lambda day, p=person, h=hobby: self.hobby_intro(p, day, h))
                for photo in (True, False)[: rng.choice((1, 2))]:
                    place(begun + 1, last, lambda day, p=person, h=hobby, ph=photo: self.hobby_update(p, day, h, ph))
            if person.pet is not None:
                adopted = place(1, last - 4, lambda day, p=person: self.pet_adoption(p, day))
                for vet in (True, False):
                    place(adopted + 1, last, lambda day, p=person, v=vet: self.pet_news(p, day, v))
            for _ in range(rng.choice((2, 3)) if main else 1):
                trip = trips.pop()
                place(1, last, lambda day, p=person, t=trip: self.trip(p, day, t))
            for _ in range(2 if main else 1):
                bought = purchases.pop()
                place(1, last, lambda day, p=person, b=bought: self.purchase(p, day, b))
            if main:
                place(started + 4, last, lambda day, p=person: self.promotion(p, day))
                for episode in family[2 * index : 2 * index + 2]:
                    place(1, last, lambda day, p=person, e=episode: e(p, day))
                for episode in extras[2 * index : 2 * index + 2]:
                    place(started + 1, last, lambda day, p=person, e=episode: e(p, day))
            for _ in range(rng.choice((1, 2))):
                place(started + 1, last, lambda day, p=person: self.work_day(p, day))
        return plans

    def write_sessions(self) -> list[dict[str, Any]]:
        plans = self.plan()
        sessions: list[dict[str, Any]] = []
        day = self.start
        for number in range(self.session_count):
            at = datetime(
                day.year, day.month, day.day, self.rng.choice((9, 12, 18, 19, 20, 21)), self.rng.choice((0, 15, 30, 45))
            )
            earlier = list(self.facts)
            episodes = [plan.tell(day) for plan in plans if plan.session == number]
            lines = self.session_lines(episodes, earlier=earlier)
            for position, line in enumerate(lines, start=1):
                line.id = f"s{number + 1}:{position}"
            sessions.append({"id": f"s{number + 1}", "date": at.isoformat(timespec="minutes"), "lines": lines})
            day += timedelta(days=self.rng.randint(6, 20))
        return sessions

    def session_lines(self, episodes: list[list[Line]], *, earlier: list[Fact]) -> list[Line]:
        """Greeting, the episodes in a random order with small talk between them (up to the
        session's drawn length), goodbye."""
        rng = self.rng
        opener = rng.choice(self.people)
        answer = self.other(opener)
        lines = [
            self.say(opener, rng.choice(V.GREETINGS).format(other=answer.name)),
            self.say(answer, rng.choice(V.GREETING_REPLIES)),
        ]
        target = rng.randint(MIN_TURNS, MAX_TURNS)
        room = target - 4 - sum(map(len, episodes))
        blocks: list[list[Line]] = list(episodes)
        for filler in self.fillers(earlier):
            if room < 2:
                break
            blocks.append(filler)
            room -= len(filler)
        rng.shuffle(blocks)
        for block in blocks:
            lines += block
        for line in lines[2:]:
            if rng.random() < CHATTY_SHARE:
                before = len(line.text) > 40 and rng.random() < 0.4  # a head goes before news, not a reply
                line.text = (
                    f"{rng.choice(V.CHATTER_BEFORE)} {line.text}"
                    if before
                    else f"{line.text} {rng.choice(V.CHATTER_AFTER)}"
                )
        closer = rng.choice(self.people)
        said, reply = rng.choice(V.CLOSINGS)
        return [*lines, self.say(closer, said), self.say(self.other(closer), reply)]

    def fillers(self, earlier: list[Fact]) -> list[list[Line]]:
        """Exchanges that tell nothing new, in the order to use them: follow-ups on what was told in
        earlier sessions (they repeat its words without answering anything), then small talk."""
        rng = self.rng
        follow_ups: list[list[Line]] = []
        for fact in rng.sample(earlier, min(len(earlier), 6)):
            owner, asker = fact.person, self.other(fact.person)
            if fact.kind == "hobby":
                key = fact.data["hobby"].key
                reply = rng.choice(
                    ("Slowly, but I'm having fun.", "Better every week!", "Honestly I skipped it this week.")
                )
                follow_ups.append([self.say(asker, f"How's the {key} going?"), self.say(owner, reply)])
            elif fact.kind == "pet":
                name = owner.pet_name
                follow_ups.append(
                    [self.say(asker, f"How's {name} doing?"), self.say(owner, f"{name} is great, still chaotic.")]
                )
            elif fact.kind == "trip":
                destination = fact.data["trip"].destination
                follow_ups.append(
                    [
                        self.say(asker, f"Are you still dreaming about {destination}?"),
                        self.say(owner, "Every day. I want to go back."),
                    ]
                )
            elif fact.kind == "job":
                follow_ups.append(
                    [
                        self.say(asker, "How's the new job treating you?"),
                        self.say(owner, "Good! Busy, but I like the people."),
                    ]
                )
        talk: list[list[Line]] = []
        for said, reply in rng.sample(V.SMALL_TALK, 8):
            talker = rng.choice(self.people)
            talk.append([self.say(talker, said), self.say(self.other(talker), reply)])
        talker = rng.choice(self.people)
        show_said, show_reply = V.SHOW_TALK
        talk.append(
            [self.say(talker, show_said.format(show=rng.choice(V.SHOWS))), self.say(self.other(talker), show_reply)]
        )
        talker = rng.choice(self.people)
        food_said, food_ask, food_answer = V.FOOD_TALK
        talk.append(
            [
                self.say(talker, food_said.format(place=rng.choice(V.FOOD_PLACES))),
                self.say(self.other(talker), food_ask),
                self.say(talker, food_answer),
            ]
        )
        rng.shuffle(talk)
        return follow_ups[: rng.randint(0, 2)] + talk

    def write(self) -> dict[str, Any]:
        sessions = self.write_sessions()
        questions = QuestionWriter(self.rng, people=self.people, facts=self.facts).questions()
        return {
            "id": self.id,
            "speakers": [p.name for p in self.people],
            "sessions": [
                {"id": s["id"], "date": s["date"], "turns": [_turn(line) for line in s["lines"]]} for s in sessions
            ],
            "questions": [
                {
                    "id": f"q{n}",
                    "question": q.question,
                    "evidence": list(dict.fromkeys(line.id for line in q.evidence)),
                    "category": q.category,
                }
                for n, q in enumerate(questions, start=1)
            ],
        }


def _turn(line: Line) -> dict[str, str]:
    turn = {"id": line.id, "speaker": line.speaker, "text": line.text}
    if line.caption:
        turn["image_caption"] = line.caption
    return turn


def generate(*, seed: int, conversations: int | None = None, sessions: int | None = None) -> dict[str, Any]:
    """The set for this seed, checked against the format's rules."""
    rng = random.Random(seed)
    count = conversations or rng.randint(6, 8)
    used: set[str] = set()
    written = [
        ConversationWriter(rng, number=n, seed=seed, sessions=sessions or rng.randint(19, 22), used=used).write()
        for n in range(1, count + 1)
    ]
    data = {"conversations": written}
    validate_evalset(data)
    return data


def summary(data: dict[str, Any]) -> list[str]:
    conversations = data["conversations"]
    turns = [t for c in conversations for s in c["sessions"] for t in s["turns"]]
    questions = [q for c in conversations for q in c["questions"]]
    per_session = [len(s["turns"]) for c in conversations for s in c["sessions"]]
    categories = {q["category"]: 0 for q in questions}
    for q in questions:
        categories[q["category"]] += 1
    return [
        f"{len(conversations)} conversations, {len(per_session)} sessions, {len(turns)} turns "
        f"({min(per_session)}-{max(per_session)} a session), {sum(1 for t in turns if 'image_caption' in t)} photos",
        f"{len(questions)} questions: " + ", ".join(f"{n} {c}" for c, n in sorted(categories.items())),
        f"evidence: {sum(len(q['evidence']) for q in questions)} turns, "
        f"{sum(1 for q in questions if len(q['evidence']) > 1)} questions with several",
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--conversations", type=int, help="how many (default: 6 to 8, drawn from the seed)")
    parser.add_argument("--sessions", type=int, help="per conversation (default: 19 to 22, drawn from the seed)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_args(argv)
    data = generate(seed=arguments.seed, conversations=arguments.conversations, sessions=arguments.sessions)
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"recall set, seed {arguments.seed}: {arguments.out} ({arguments.out.stat().st_size // 1024} KB)")
    print("\n".join(summary(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
