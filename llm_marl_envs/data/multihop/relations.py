"""The facts of the synthetic world: entity kinds, relations and attributes, and how each is asked,
nested into a longer question, stated in a passage, and read back from a passage.

Every relation is functional (one value per subject), so every chain of relations has
one answer. ``question`` asks for the value of the relation for a subject ``{x}``;
``phrase`` names that value inside a longer question ("the mentor of {x}"); ``pattern``
extracts it from the subject's own passage (used by the scripted worker, which reads
only what it retrieved).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PERSON, CITY, ORG = "person", "city", "org"
KINDS = (PERSON, CITY, ORG)

OCCUPATIONS = (
    "cartographer", "glassblower", "astronomer", "shipwright", "archivist", "botanist",
    "clockmaker", "linguist", "surveyor", "composer", "weaver", "apothecary",
)  # fmt: skip
INDUSTRIES = (
    "shipbuilding", "printing", "brewing", "mining", "textile", "optics",
    "ceramics", "navigation", "forestry", "insurance",
)  # fmt: skip
ORG_KINDS = ("Institute", "Guild", "Company", "Society", "Foundry", "Academy", "Collective", "Works")

NAME2 = r"[A-Z][a-z]+ [A-Z][a-z]+"
NAME1 = r"[A-Z][a-z]+"


@dataclass(frozen=True)
class Relation:
    """One functional relation (``target`` is an entity kind) or attribute (``target`` None)."""

    key: str
    source: str
    target: str | None
    question: str
    phrase: str | None
    pattern: str

    def ask(self, subject: str) -> str:
        return self.question.format(x=subject)

    def extract(self, passage_text: str) -> str | None:
        m = re.search(self.pattern, passage_text)
        return m.group("a") if m else None


RELATIONS: dict[str, Relation] = {
    r.key: r
    for r in (
        Relation("mentor", PERSON, PERSON, "Who was the mentor of {x}?", "the mentor of {x}",
                 rf"was mentored by (?P<a>{NAME2})"),
        Relation("born_in", PERSON, CITY, "In which city was {x} born?", "the birthplace of {x}",
                 rf"was born in (?P<a>{NAME1}) in \d{{4}}"),
        Relation("employer", PERSON, ORG, "Which organisation does {x} work for?", "the employer of {x}",
                 rf"works for the (?P<a>{NAME2})"),
        Relation("birth_year", PERSON, None, "In what year was {x} born?", None,
                 rf"was born in {NAME1} in (?P<a>\d{{4}})"),
        Relation("occupation", PERSON, None, "What is the occupation of {x}?", None,
                 rf"^{NAME2} is an? (?P<a>[a-z]+) who"),
        Relation("mayor", CITY, PERSON, "Who is the mayor of {x}?", "the mayor of {x}",
                 rf"The current mayor of {NAME1} is (?P<a>{NAME2})"),
        Relation("river", CITY, None, "Which river flows through {x}?", None,
                 rf"on the banks of the (?P<a>{NAME1} River)"),
        Relation("city_founded", CITY, None, "In what year was the city of {x} founded?", None,
                 r"The city was founded in (?P<a>\d{3,4})"),
        Relation("founder", ORG, PERSON, "Who founded {x}?", "the founder of {x}",
                 rf"It was founded by (?P<a>{NAME2}) in \d{{4}}"),
        Relation("headquarters", ORG, CITY, "In which city is {x} headquartered?",
                 "the headquarters city of {x}", rf"headquartered in (?P<a>{NAME1})"),
        Relation("org_founded", ORG, None, "In what year was {x} founded?", None,
                 rf"It was founded by {NAME2} in (?P<a>\d{{4}})"),
        Relation("industry", ORG, None, "In which industry does {x} work?", None,
                 r"is an? (?P<a>[a-z]+) organisation"),
    )
}  # fmt: skip


def relations_from(kind: str) -> list[Relation]:
    """Relations and attributes whose subject is of ``kind``."""
    return [r for r in RELATIONS.values() if r.source == kind]


def _template_regex(template: str) -> re.Pattern[str]:
    head, _, tail = template.partition("{x}")
    return re.compile("^" + re.escape(head) + r"(?P<x>.+?)" + re.escape(tail) + "$")


_ASK = [(r, _template_regex(r.question)) for r in RELATIONS.values()]


def parse_subquestion(text: str) -> list[tuple[Relation, str]]:
    """Every (relation, subject) whose question template matches ``text`` (stripped)."""
    text = " ".join(text.split())
    out = []
    for rel, rx in _ASK:
        m = rx.match(text)
        if m:
            out.append((rel, m.group("x").strip()))
    return out
