"""Answer normalization / EM / F1 and tag parsing."""

from llm_marl_envs.search.answers import (
    contains_answer,
    exact_match,
    f1_score,
    normalize_answer,
    score_answer,
)
from llm_marl_envs.search.tags import find_tags


def test_normalize_is_squad_style():
    assert normalize_answer("  The  Draxun, Institute!! ") == "draxun institute"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("") == ""


def test_exact_match_and_f1():
    assert exact_match("the Veiski Guild", ["Veiski Guild"]) == 1.0
    assert exact_match("Veiski", ["Veiski Guild"]) == 0.0
    assert f1_score("Veiski", ["Veiski Guild"]) == 2 * 1 * 0.5 / 1.5
    assert f1_score("nothing", ["Veiski Guild", "nothing here"]) == 2 * 1 * 0.5 / 1.5
    assert f1_score("", ["x"]) == 0.0
    assert score_answer("1902", ["1902"], "f1") == 1.0


def test_contains_answer_uses_whole_tokens():
    assert contains_answer("It was founded in 1902.", "1902")
    assert not contains_answer("It was founded in 19021.", "1902")
    assert contains_answer("works for the Veiski Guild", "the veiski guild")
    assert not contains_answer("anything", "")


def test_find_tags_attributes_case_and_unclosed():
    tags, unclosed = find_tags("<Dispatch worker='1'> a </Dispatch><dispatch worker=0>b</dispatch><dispatch>c", "dispatch")
    assert [(t.attrs.get("worker"), t.content) for t in tags] == [("1", "a"), ("0", "b")]
    assert unclosed == 1
    assert find_tags("no tags at all", "search") == ([], 0)
    tags, _ = find_tags("<search>multi\nline</search>", "search")
    assert tags[0].content == "multi\nline"
