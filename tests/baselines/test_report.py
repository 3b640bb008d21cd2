"""``python -m baselines.report``: every saved episode and turn reaches the page, gaps are reported, model text
stays text, and a real headless Chromium renders it (the list, then one episode)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from baselines import evaluate, train
from baselines.report import write_report
from baselines.report.__main__ import main as report_main
from baselines.report.browser import Browser, find_chromium
from baselines.report.render import embed_json, extract

EVIL = '</script><script>window.__pwned = 1</script><b class="injected">bold</b> & \u2028 <!-- x'


@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> Path:
    """A real run of the default game (tiny model, signal game), 2 steps, samples saved."""
    out = tmp_path_factory.mktemp("runs")
    result = train.main(["--steps", "2", "--out", str(out), "--name", "short", "--eval-episodes", "4",
                         "rollout.tasks_per_step=4", "rollout.group_size=2", "log.save_samples=true",
                         "log.tensorboard=false", "log.progress=false", "log.plot=false", "--report"])
    assert Path(result["report"]) == Path(result["run_dir"]) / "report.html"  # --report wrote it at the end
    return Path(result["run_dir"])


@pytest.fixture(scope="module")
def helper_main_eval(tmp_path_factory) -> Path:
    """A real ``baselines.evaluate --out`` of code/helper_main_v0 (tiny BPE model, real sandbox)."""
    from baselines.policies import build_tiny_model
    from baselines.policies.corpus import signal_game_texts

    root = tmp_path_factory.mktemp("eval")
    model = build_tiny_model(root / "bpe", texts=signal_game_texts(episodes=8), tokenizer="bpe", arch="llama",
                             hidden_size=48, seed=1)
    evaluate.main(["--env", "code/helper_main_v0", "--model", str(model), "--episodes", "2", "--samples", "2",
                   "--max-new-tokens", "24", "--test-kwargs", "--no-progress", "--out", str(root / "out"),
                   "--report"])
    assert (root / "out" / "report.html").exists()  # --report wrote it at the end
    return root / "out"


def _page(folder: Path) -> tuple[str, dict]:
    html = write_report(folder).read_text(encoding="utf-8")
    return html, extract(html)


def test_run_report_holds_every_episode_and_turn(short_run):
    html, data = _page(short_run)
    assert data["kind"] == ["training run"] and data["missing"] == []
    assert data["summary"]["task"] == "toy/signal_game_v0" and data["summary"]["steps"] == 2
    assert data["summary"]["held-out reward"] is not None and data["curves"]["steps"] == [1, 2]
    expected = {}  # (step, task, episode) -> [(agent, completion, advantage)]
    for step in (1, 2):
        rows = [json.loads(x) for x in (short_run / "samples" / f"step_{step}.jsonl").read_text().splitlines()]
        texts = [json.loads(x) for x in (short_run / "samples" / f"step_{step}.text.jsonl").read_text().splitlines()]
        assert len(rows) == len(texts) == 4 * 2 * 2  # tasks x group x agents
        for row, text in zip(rows, texts):
            expected.setdefault((step, row["task"], row["episode"]), []).append(
                (row["agent"], text["completion"], text["advantage"]))
    got = {(e["s"], e["task"], e["ep"]): [(t["a"], t["x"], t["adv"]) for t in e["turns"]] for e in data["episodes"]}
    assert got == expected
    assert {t["a"] for e in data["episodes"] for t in e["turns"]} == {"speaker", "listener"}
    assert all(t["obs"] and "candidates:" in t["obs"] for e in data["episodes"] for t in e["turns"])


def test_eval_report_holds_every_episode_and_turn(helper_main_eval):
    _, data = _page(helper_main_eval)
    transcripts = [json.loads(x) for x in
                   (helper_main_eval / "code_helper_main_v0.transcripts.jsonl").read_text().splitlines()]
    assert data["kind"] == ["evaluation"] and data["missing"] == []
    assert len(data["episodes"]) == len(transcripts) == 4
    for ep, tr in zip(data["episodes"], transcripts):
        assert (ep["task"], ep["ep"], ep["r"]) == (tr["task"], tr["sample"], tr["return"])
        assert [(t["a"], t["x"], t["pr"], t["iss"]) for t in ep["turns"]] == \
            [(s["agent"], s["action"], s["prompt"], s["format_issues"]) for s in tr["steps"]]
    assert {t["a"] for e in data["episodes"] for t in e["turns"]} == {"helper", "main"}
    [table] = data["tables"].values()
    assert {r["agent"] for r in table} == {"helper", "main"}
    summary = json.loads((helper_main_eval / "code_helper_main_v0.summary.json").read_text())
    for row in table:  # the same rates baselines.evaluate printed
        assert row["format-error rate"] == pytest.approx(summary[f"format_error_rate/{row['agent']}"])
        assert row["issue kinds"] == summary["issue_kinds"][row["agent"]]


def test_missing_pieces_are_reported_not_raised(short_run, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert Path(report_main([str(empty)])).exists()
    _, data = _page(empty)
    assert data["episodes"] == [] and "nothing to show" in data["missing"][0]
    no_samples = tmp_path / "no_samples"
    shutil.copytree(short_run, no_samples, ignore=shutil.ignore_patterns("samples", "team", "checkpoints"))
    _, data = _page(no_samples)
    assert data["episodes"] == [] and any("log.save_samples=true" in m for m in data["missing"])
    assert data["curves"]["steps"] == [1, 2]
    truncated = tmp_path / "truncated"
    shutil.copytree(short_run, truncated, ignore=shutil.ignore_patterns("team", "checkpoints"))
    text = (truncated / "metrics.jsonl").read_text()
    (truncated / "metrics.jsonl").write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])
    _, data = _page(truncated)
    assert any("metrics.jsonl: 1 unreadable line" in m for m in data["missing"])
    assert any("no held-out evaluation" in m for m in data["missing"])
    assert data["curves"]["steps"] == [1, 2] and len(data["episodes"]) == 16
    (truncated / "samples" / "step_2.text.jsonl").unlink()
    _, data = _page(truncated)
    assert any("step(s) [2]" in m for m in data["missing"])
    assert all(t["x"] is None for e in data["episodes"] if e["s"] == 2 for t in e["turns"])
    (truncated / "samples" / "step_1.jsonl").write_text('{"task": "t", "reward_components": 3}\n')
    (truncated / "x.transcripts.jsonl").write_text('{"steps": "oops"}\n[1]\n')
    _, data = _page(truncated)  # foreign content: reported, the rest still shown
    assert any("step_1.jsonl: unexpected content" in m for m in data["missing"])
    assert any("x.transcripts.jsonl: unexpected content" in m for m in data["missing"])
    assert any("x.transcripts.jsonl: 1 unreadable line" in m for m in data["missing"])
    assert {e["s"] for e in data["episodes"]} == {2}
    with pytest.raises(SystemExit):
        report_main([str(tmp_path / "absent")])
    assert "no such folder" in capsys.readouterr().err


def _evil_eval(folder: Path) -> Path:
    folder.mkdir()
    step = {"turn": 0, "agent": "main", "prompt": [{"role": "user", "content": EVIL}], "action": EVIL,
            "format_issues": [EVIL], "reward": 0.0, "reward_components": {EVIL: 1.0}}
    (folder / "x.transcripts.jsonl").write_text(json.dumps({"task": EVIL, "sample": 0, "return": 0.0,
                                                            "steps": [step]}) + "\n")
    (folder / "x.summary.json").write_text(json.dumps({"env": "x", "ci95": float("nan")}))
    return folder


def test_model_text_stays_text(tmp_path):
    assert not set(embed_json({"a": EVIL})) & {"<", ">", "&", "\u2028", "\u2029"}
    html, data = _page(_evil_eval(tmp_path / "evil"))
    assert html.count("</script>") == 2  # the data block's and the page script's own
    assert "__pwned" not in html.split('id="report-data">')[0] and html.count("<b class=") == 0
    turn = data["episodes"][0]["turns"][0]
    assert data["episodes"][0]["task"] == turn["x"] == turn["iss"][0] == EVIL and list(turn["rc"]) == [EVIL]
    assert data["evals"][0]["ci95"] is None  # NaN from the summary is not invalid JSON in the page


def _browser_or_skip() -> str:
    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI: chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("no chromium on PATH (apt-get install chromium); CI runs this test")
    return binary


def test_browser_renders_list_and_episode(short_run, helper_main_eval, tmp_path):
    """Chromium opens the short run's report: no console error, the list renders, a click shows the turns.
    Screenshots go to $REPORT_SCREENSHOTS (docs/img for the docs) or the test's tmp folder."""
    binary = _browser_or_skip()
    shots = Path(os.environ.get("REPORT_SCREENSHOTS") or tmp_path)
    path = write_report(short_run)
    data = extract(path.read_text(encoding="utf-8"))
    with Browser(binary) as b:
        b.open(path)
        assert b.wait_for("document.body.dataset.ready") == "1"
        b.js("document.querySelector('#tabs button[data-id=episodes]').click()")
        assert b.js("document.querySelectorAll('#ep-list tbody tr').length") == len(data["episodes"]) == 16
        assert b.js("document.getElementById('episodes').classList.contains('on')")
        b.screenshot(shots / "report_episodes.png")
        b.js("document.querySelectorAll('#ep-list tbody tr')[1].click()")
        assert b.js("location.hash") == "#ep=1"
        assert b.wait_for("document.querySelectorAll('#episode .turn').length") == len(data["episodes"][1]["turns"])
        turns = b.js("[...document.querySelectorAll('#episode .turn pre')].map(p => p.textContent)")
        assert b.js("document.querySelectorAll('#episode .turn').length") == len(data["episodes"][1]["turns"])
        for t in data["episodes"][1]["turns"]:
            assert (t["x"] or "(empty)") in turns and t["obs"] in turns
        b.screenshot(shots / "report_episode.png")
        assert b.console_errors() == []
        ev = write_report(helper_main_eval)  # an evaluation's page: code actions, prompts as messages
        ev_data = extract(ev.read_text(encoding="utf-8"))
        b.open(ev)
        assert b.wait_for("document.body.dataset.ready") == "1"
        b.js("location.hash = 'ep=0'")
        assert b.wait_for("document.querySelectorAll('#episode .turn').length") == len(ev_data["episodes"][0]["turns"])
        b.screenshot(shots / "report_eval_episode.png")
        assert b.console_errors() == []
        packed = write_report(short_run, tmp_path / "packed.html", compress_above=0)  # gzip+base64 data
        assert 'data-encoding="gzip+base64"' in packed.read_text() and extract(packed.read_text()) == data
        b.open(packed)
        assert b.wait_for("document.body.dataset.ready") == "1"
        b.js("location.hash = 'ep=1'")
        assert b.wait_for("document.querySelectorAll('#episode .turn').length") == len(data["episodes"][1]["turns"])
        evil = write_report(_evil_eval(tmp_path / "evil"))  # hostile model text, in the real browser
        b.open(evil)
        assert b.wait_for("document.body.dataset.ready") == "1"
        b.js("location.hash = 'ep=0'")
        b.wait_for("document.querySelector('#episode .turn')")
        assert EVIL in b.js("document.getElementById('episode').textContent")
        assert b.js("typeof window.__pwned") == "undefined"
        assert b.js("document.querySelectorAll('.injected').length") == 0
        assert b.console_errors() == []


def test_joint_tree_run_reports_trees(tmp_path):
    """A MAGRPO (joint_tree) run: each saved episode is one tree; every node's parent is in it or the root."""
    result = train.main(["--config", "baselines/configs/signal_game_magrpo.yaml", "--steps", "1", "--out",
                         str(tmp_path), "--name", "tree", "--no-eval", "rollout.tasks_per_step=2",
                         "log.save_samples=true", "log.tensorboard=false", "log.progress=false", "log.plot=false"])
    _, data = _page(Path(result["run_dir"]))
    rows = [json.loads(x) for x in (tmp_path / "tree" / "samples" / "step_1.jsonl").read_text().splitlines()]
    assert len(data["episodes"]) == 2 and sum(len(e["turns"]) for e in data["episodes"]) == len(rows)
    for e in data["episodes"]:
        nodes = {t["n"] for t in e["turns"]}
        assert e["tree"] and len(nodes) > 1 and all(t["p"] in nodes or t["p"] == -1 for t in e["turns"])
        assert any(t["p"] != -1 for t in e["turns"]) and all(t["rtg"] is not None for t in e["turns"])


def test_the_main_job_leaves_a_report_with_a_bounded_sample_of_episodes(tmp_path, capsys):
    """``python -m baselines.train`` as the README runs it (no report or sample flags) writes report.html with
    the first log.sample_episodes episodes of log.sample_steps steps spread over the run, and prints its path."""
    result = train.main(["--steps", "5", "--out", str(tmp_path), "--name", "main", "--no-eval",
                         "rollout.tasks_per_step=4", "rollout.group_size=4",  # 16 episodes a step
                         "log.tensorboard=false", "log.progress=false", "log.plot=false"])
    report = Path(result["report"])
    assert report == tmp_path / "main" / "report.html" and f"report: {report}" in capsys.readouterr().out
    data = extract(report.read_text(encoding="utf-8"))
    assert not [m for m in data["missing"] if "samples" in m]  # (--no-eval: no held-out line, reported)
    steps = sorted({e["s"] for e in data["episodes"]})
    assert steps == [1, 2, 4, 5] and len(data["episodes"]) == 4 * 8  # 4 steps (first and last), 8 episodes each
    assert all(t["x"] is not None and t["adv"] is not None for e in data["episodes"] for t in e["turns"])
    assert not train.main(["--steps", "1", "--out", str(tmp_path), "--name", "off", "--no-eval", "--no-report",
                           "log.tensorboard=false", "log.progress=false", "log.plot=false"]).get("report")
