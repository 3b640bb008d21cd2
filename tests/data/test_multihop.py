"""The synthetic multi-hop world generator: seeded, contamination-free, answerable only via passages."""

import re

import pytest

from llm_marl_envs.data.multihop import RELATIONS, WorldConfig, generate_world, parse_subquestion
from llm_marl_envs.search.answers import contains_answer, normalize_answer


@pytest.fixture(scope="module")
def world():
    return generate_world(n_entities=120, n_questions=150, seed=7)


def test_seeded_and_sized():
    a, b = generate_world(n_entities=40, n_questions=10, seed=1), generate_world(n_entities=40, n_questions=10, seed=1)
    assert a.documents == b.documents and a.questions == b.questions
    c = generate_world(n_entities=40, n_questions=10, seed=2)
    assert c.documents != a.documents
    big = generate_world(n_entities=2000, n_questions=5, decoys_per_entity=2, seed=0)
    assert len(big.entities) == 2000 and len(big.documents) == 2000 * 3
    assert len({d.id for d in big.documents}) == len(big.documents)


def test_config_validation():
    with pytest.raises(ValueError):
        WorldConfig(n_entities=5)
    with pytest.raises(ValueError):
        WorldConfig(min_hops=3, max_hops=2)


def test_hops_cover_the_range_and_no_question_contains_its_answer(world):
    assert {q.hops for q in world.questions} == {1, 2, 3, 4}
    for q in world.questions:
        assert not contains_answer(q.question, q.answers[0]), q
        assert len(q.supporting_ids) == q.hops == len(q.decomposition)


def test_name_tokens_belong_to_one_entity(world):
    owner = {}
    for e in world.entities.values():
        for tok in re.findall(r"[A-Z][a-z]+", e.name):
            if tok in {"Institute", "Guild", "Company", "Society", "Foundry", "Academy", "Collective", "Works"}:
                continue
            assert owner.setdefault(tok, e.name) == e.name


def test_decomposition_chains_and_each_step_is_read_off_its_supporting_passage(world):
    docs = {d.id: d for d in world.documents}
    for q in world.questions:
        answers = []
        for k, step in enumerate(q.decomposition):
            text = step.question
            for j in range(k, 0, -1):
                assert f"#{j}" in text or j < k  # each step refers to the previous answer
                text = text.replace(f"#{j}", answers[j - 1])
            readings = parse_subquestion(text)
            passage = docs[step.supporting_ids[0]]
            got = {r.extract(passage.text) for r, subject in readings if normalize_answer(subject) == normalize_answer(passage.title)}
            assert step.answer in got, (text, passage)
            answers.append(step.answer)
        assert answers[-1] == q.answers[0]


def test_relation_patterns_never_fire_on_decoys(world):
    entity_docs = {e.doc_id for e in world.entities.values()}
    decoys = [d for d in world.documents if d.id not in entity_docs]
    assert len(decoys) == len(world.entities)
    for d in decoys:
        # decoys mention entities (and cities, years, people) but state none of the relations
        assert all(r.extract(d.text) is None for r in RELATIONS.values()), d
