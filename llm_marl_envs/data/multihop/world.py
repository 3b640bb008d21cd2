"""Generating a synthetic multi-hop world: entities, their encyclopedia passages (with decoys), and questions.

``generate_world(WorldConfig(...))`` invents people, cities and organisations with
attributes and functional relations (see :mod:`.relations`), renders one encyclopedia-style
passage per entity plus ``decoys_per_entity`` decoy passages that mention the entity
(named after it, with other cities, years and people in them -- traps for a careless
reader), and draws questions of ``min_hops`` .. ``max_hops`` hops: a start entity, a chain
of ``hops - 1`` relations to other entities, and a final relation or attribute. Each
question carries its gold answer, the ordered gold chain of supporting passages (the
passage of each hop's subject) and a gold decomposition whose ``#k`` placeholders chain.

Guarantees (tested): seeded (same config -> same world); no question contains its answer
(so nothing is answerable without reading passages); every name token belongs to one
entity only; chains never revisit an entity.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from llm_marl_envs.data.multihop.names import NameMaker
from llm_marl_envs.data.multihop.relations import (
    CITY,
    INDUSTRIES,
    OCCUPATIONS,
    ORG,
    ORG_KINDS,
    PERSON,
    RELATIONS,
    Relation,
    relations_from,
)
from llm_marl_envs.data.qa_formats import QAExample, SubQuestion
from llm_marl_envs.retrieval.types import Document
from llm_marl_envs.search.answers import contains_answer


@dataclass(frozen=True)
class WorldConfig:
    """Size and shape of a synthetic world."""

    n_entities: int = 300  #: people + cities + organisations (split 50% / 25% / 25%)
    n_questions: int = 200
    min_hops: int = 1
    max_hops: int = 4
    decoys_per_entity: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_entities < 12:
            raise ValueError(f"n_entities must be >= 12 (a few of each kind), got {self.n_entities}")
        if not 1 <= self.min_hops <= self.max_hops <= 6:
            raise ValueError(f"need 1 <= min_hops <= max_hops <= 6, got {self.min_hops}, {self.max_hops}")
        if self.n_questions < 0 or self.decoys_per_entity < 0:
            raise ValueError("n_questions and decoys_per_entity must be >= 0")


@dataclass
class Entity:
    """One invented entity; ``facts`` maps a relation key to a value (an entity name or a string)."""

    name: str
    kind: str
    facts: dict[str, str] = field(default_factory=dict)
    pronoun: str = "It"
    doc_id: str = ""

    @property
    def display(self) -> str:
        """How questions refer to it ("the Draxun Institute" for organisations)."""
        return f"the {self.name}" if self.kind == ORG else self.name


@dataclass
class World:
    """A generated world: entities by name, the corpus, and the questions."""

    config: WorldConfig
    entities: dict[str, Entity]
    documents: list[Document]
    questions: list[QAExample]

    def passage_of(self, name: str) -> Document:
        e = self.entities[name]
        return next(d for d in self.documents if d.id == e.doc_id)


def generate_world(config: WorldConfig | None = None, **overrides) -> World:
    """Generate a world (``generate_world(n_entities=50, seed=3)`` works too)."""
    if config is None:
        config = WorldConfig(**overrides)
    elif overrides:
        config = WorldConfig(**{**config.__dict__, **overrides})
    rng = random.Random(config.seed)
    names = NameMaker(rng)
    entities = _invent_entities(config, rng, names)
    documents = _render_corpus(entities, config, rng, names)
    pool = list(entities.values())
    questions = [_question(i, entities, pool, config, rng) for i in range(config.n_questions)]
    return World(config, entities, documents, questions)


# ---------------------------------------------------------------------- entities
def _invent_entities(config: WorldConfig, rng: random.Random, names: NameMaker) -> dict[str, Entity]:
    n_city = max(3, config.n_entities // 4)
    n_org = max(3, config.n_entities // 4)
    n_person = max(4, config.n_entities - n_city - n_org)
    people = [Entity(f"{names.word()} {names.word()}", PERSON, pronoun=rng.choice(("She", "He"))) for _ in range(n_person)]
    cities = [Entity(names.word(), CITY) for _ in range(n_city)]
    orgs = [Entity(f"{names.word()} {rng.choice(ORG_KINDS)}", ORG) for _ in range(n_org)]
    for p in people:
        p.facts["mentor"] = _other(people, p, rng)
        p.facts["born_in"] = rng.choice(cities).name
        p.facts["employer"] = rng.choice(orgs).name
        p.facts["birth_year"] = str(rng.randint(1700, 1990))
        p.facts["occupation"] = rng.choice(OCCUPATIONS)
    for c in cities:
        c.facts["mayor"] = rng.choice(people).name
        c.facts["river"] = f"{names.word()} River"
        c.facts["city_founded"] = str(rng.randint(900, 1800))
    for o in orgs:
        o.facts["founder"] = rng.choice(people).name
        o.facts["headquarters"] = rng.choice(cities).name
        o.facts["org_founded"] = str(rng.randint(1600, 1990))
        o.facts["industry"] = rng.choice(INDUSTRIES)
    return {e.name: e for e in (*people, *cities, *orgs)}


# ---------------------------------------------------------------------- passages
def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _main_passage(e: Entity, rng: random.Random, fillers: list[str]) -> str:
    f = e.facts
    if e.kind == PERSON:
        lines = [
            f"{e.name} is {_a(f['occupation'])} who was born in {f['born_in']} in {f['birth_year']}.",
            f"{e.pronoun} works for the {f['employer']}.",
            f"{e.pronoun} was mentored by {f['mentor']}.",
            f"{e.pronoun} is remembered for a study of {rng.choice(fillers).lower()} {rng.choice(('maps', 'tides', 'songs', 'lenses'))}.",
        ]
    elif e.kind == CITY:
        lines = [
            f"{e.name} is a city on the banks of the {f['river']}.",
            f"The city was founded in {f['city_founded']}.",
            f"The current mayor of {e.name} is {f['mayor']}.",
            f"Its markets are known for {rng.choice(('salt', 'amber', 'wool', 'pepper'))} from the {rng.choice(fillers)} hills.",
        ]
    else:
        lines = [
            f"The {e.name} is {_a(f['industry'])} organisation headquartered in {f['headquarters']}.",
            f"It was founded by {f['founder']} in {f['org_founded']}.",
            f"Its archives hold the {rng.choice(fillers)} papers.",
        ]
    head, rest = lines[0], lines[1:]
    rng.shuffle(rest)  # fact order varies; extraction never relies on position
    return " ".join([head, *rest])


def _other(pool: list[Entity], e: Entity, rng: random.Random) -> str:
    while True:
        pick = rng.choice(pool)
        if pick is not e:
            return pick.name


def _decoy(e: Entity, by_kind: dict[str, list[Entity]], rng: random.Random, names: NameMaker) -> tuple[str, str]:
    place = _other(by_kind[CITY], e, rng)
    person = _other(by_kind[PERSON], e, rng)
    year = rng.randint(1700, 1990)
    if e.kind == PERSON:
        surname = e.name.split()[-1]
        title = f"{surname} Hall"
        text = (f"{surname} Hall is a lecture hall in {place}, named in honour of {e.name}. "
                f"It opened in {year} and was designed by {person}.")  # fmt: skip
    elif e.kind == CITY:
        title = f"{e.name} Gazette"
        text = (f"The {e.name} Gazette is a newspaper printed in {place} since {year}. "
                f"Its first editor was {person}, {_a(rng.choice(OCCUPATIONS))}.")  # fmt: skip
    else:
        title = f"{e.name.split()[0]} Prize"
        text = (f"The {e.name.split()[0]} Prize is awarded by the {e.name} to {_a(rng.choice(OCCUPATIONS))}. "
                f"It was first awarded in {year} in {place} to {person}.")  # fmt: skip
    return title, text


def _render_corpus(
    entities: dict[str, Entity], config: WorldConfig, rng: random.Random, names: NameMaker
) -> list[Document]:
    pool = list(entities.values())
    by_kind = {kind: [e for e in pool if e.kind == kind] for kind in (PERSON, CITY, ORG)}
    fillers = [names.word() for _ in range(64)]  # invented words for colour, owned by no entity
    drafts: list[tuple[Entity | None, str, str]] = []
    for e in pool:
        drafts.append((e, e.name, _main_passage(e, rng, fillers)))
        for _ in range(config.decoys_per_entity):
            drafts.append((None, *_decoy(e, by_kind, rng, names)))
    rng.shuffle(drafts)  # ids carry no hint of which passage is an entity's own
    docs = []
    for i, (e, title, text) in enumerate(drafts):
        doc_id = f"w{config.seed}-{i}"
        if e is not None:
            e.doc_id = doc_id
        docs.append(Document(doc_id, title, text))
    return docs


# ---------------------------------------------------------------------- questions
def _question(
    i: int, entities: dict[str, Entity], pool: list[Entity], config: WorldConfig, rng: random.Random
) -> QAExample:
    for _ in range(1000):
        hops = rng.randint(config.min_hops, config.max_hops)
        chain = [rng.choice(pool)]
        rels: list[Relation] = []
        ok = True
        for h in range(hops):
            options = relations_from(chain[-1].kind)
            if h < hops - 1:
                options = [r for r in options if r.target is not None]
            rng.shuffle(options)
            for rel in options:
                value = chain[-1].facts[rel.key]
                if rel.target is None or value not in {c.name for c in chain}:
                    break
            else:
                ok = False
                break
            rels.append(rel)
            if rel.target is not None:
                chain.append(entities[value])
        if not ok:
            continue
        answer = chain[len(rels) - 1].facts[rels[-1].key]
        question = _compose(chain[0].display, rels)
        if contains_answer(question, answer):
            continue
        return QAExample(
            id=f"q{i}",
            question=question,
            answers=(answer,),
            supporting_ids=tuple(c.doc_id for c in chain[: len(rels)]),
            supporting_titles=tuple(c.name for c in chain[: len(rels)]),
            decomposition=_decompose(chain, rels),
            hops=len(rels),
            source="synthetic",
        )
    raise RuntimeError("could not draw a question; the world is too small")  # pragma: no cover


def _compose(start: str, rels: list[Relation]) -> str:
    subject = start
    for rel in rels[:-1]:
        subject = rel.phrase.format(x=subject)
    return rels[-1].ask(subject)


def _decompose(chain: list[Entity], rels: list[Relation]) -> tuple[SubQuestion, ...]:
    steps = []
    for k, rel in enumerate(rels):
        subject = chain[0].display if k == 0 else f"#{k}"
        value = chain[k].facts[rel.key]
        steps.append(SubQuestion(rel.ask(subject), value, (chain[k].doc_id,)))
    return tuple(steps)


__all__ = ["RELATIONS", "Entity", "World", "WorldConfig", "generate_world"]
