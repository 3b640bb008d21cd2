"""Gather what a run folder or an evaluation folder holds into the report's data (plain JSON types).

A training run folder (``python -m baselines.train``) gives ``config.yaml``, ``metrics.jsonl`` and,
with ``log.save_samples``, ``samples/step_<k>.jsonl`` (+ ``step_<k>.text.jsonl``, the decoded text and
advantages, :mod:`baselines.report.capture`). An evaluation folder (``baselines.evaluate --out``)
gives ``<env>.transcripts.jsonl`` and ``<env>.summary.json``. Whatever is absent, unreadable or
truncated is listed in ``missing`` (the report shows it); nothing here raises on a bad file.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

_TAG = re.compile(r"<\|[^<>|\s]{1,30}\|>|</?s>")
_ROLE = re.compile(r"^\s*(system|user|assistant)\s*\n", re.IGNORECASE)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def read_lines(path: Path, missing: list[str]) -> list[dict]:
    """The JSON objects of a JSONL file; bad lines are skipped and reported in ``missing``."""
    out, bad = [], []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        missing.append(f"{path.name}: cannot be read ({exc})")
        return out
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            bad.append(i)
            continue
        if isinstance(rec, dict):
            out.append(rec)
        else:
            bad.append(i)
    if bad:
        missing.append(f"{path.name}: {len(bad)} unreadable line(s) skipped (truncated?), first at line {bad[0]}")
    return out


def last_message(prompt: Any) -> str:
    """What a turn was just told: the last message of a prompt (a message list or a chat-templated string)."""
    if isinstance(prompt, list):
        return str(prompt[-1].get("content", "")) if prompt and isinstance(prompt[-1], dict) else ""
    parts = [_ROLE.sub("", p).strip() for p in _TAG.split(str(prompt))]
    parts = [p for p in parts if p and p.lower() not in ("system", "user", "assistant")]
    return parts[-1] if parts else ""


# ------------------------------------------------------------------------------------ training runs
def _curves(records: list[dict]) -> dict[str, Any]:
    steps = sorted({int(r["step"]) for r in records if isinstance(r.get("step"), (int, float))})
    index = {s: i for i, s in enumerate(steps)}
    series: dict[str, list] = {}
    for r in records:
        if not isinstance(r.get("step"), (int, float)):
            continue
        i = index[int(r["step"])]
        for k, v in r.items():
            if k != "step" and _num(v) is not None:
                series.setdefault(k, [None] * len(steps))[i] = _num(v)
    return {"steps": steps, "series": series}


def _train_turn(row: dict, text: dict | None) -> dict[str, Any]:
    prompt = text.get("prompt") if text else None
    return {
        "a": str(row.get("agent", "?")), "t": row.get("turn", 0), "n": row.get("node", -1),
        "p": row.get("parent", -1), "d": row.get("depth", 0), "b": row.get("branch", -1),
        "pr": prompt, "obs": last_message(prompt) if prompt is not None else None,
        "x": text.get("completion") if text else None, "tok": len(row.get("completion_ids") or []),
        "r": _num(row.get("reward")), "rc": {k: _num(v) for k, v in (row.get("reward_components") or {}).items()},
        "rtg": _num(row.get("return_to_go")), "adv": _num(text.get("advantage")) if text else None,
        "keep": text.get("keep") if text else None, "g": text.get("group") if text else None,
        "iss": [],
    }


def _train_episodes(run: Path, missing: list[str]) -> list[dict]:
    files = sorted(run.glob("samples/step_*.jsonl"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    files = [f for f in files if not f.name.endswith(".text.jsonl")]
    if not files:
        missing.append("samples/: no saved samples, so no episodes (train with log.save_samples=true)")
        return []
    episodes: list[dict] = []
    no_text: list[int] = []
    for f in files:
        try:
            episodes.extend(_step_episodes(f, missing, no_text))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a hand-edited or foreign file
            missing.append(f"{f.name}: unexpected content ({exc}); skipped")
    if no_text:
        missing.append(f"samples/step_<k>.text.jsonl missing or not matching for step(s) {no_text[:10]}: "
                       "those turns show token counts, not text or advantages")
    return episodes


def _step_episodes(f: Path, missing: list[str], no_text: list[int]) -> list[dict]:
    """The episodes of one saved step (rows grouped by task and episode, in saved order)."""
    episodes: list[dict] = []
    step = int(re.sub(r"\D", "", f.stem))
    rows = read_lines(f, missing)
    tpath = f.with_name(f"step_{step}.text.jsonl")
    texts = read_lines(tpath, missing) if tpath.exists() else []
    if len(texts) != len(rows):
        no_text.append(step)
        texts = []
    eps: dict[tuple, dict] = {}
    for i, row in enumerate(rows):
        key = (str(row.get("task", "?")), row.get("episode", 0))
        ep = eps.get(key)
        if ep is None:
            ep = eps[key] = {"s": step, "env": "", "task": key[0], "ep": key[1], "turns": []}
            episodes.append(ep)
        ep["turns"].append(_train_turn(row, texts[i] if texts else None))
    for ep in eps.values():
        ep["tree"] = any(t["n"] >= 0 for t in ep["turns"])
        rewards = [t["r"] for t in ep["turns"] if t["r"] is not None]
        ep["r"] = max(rewards) if rewards else None
    return episodes


def train_data(run: Path, missing: list[str]) -> dict[str, Any]:
    """Config, summary, curves and episodes of a training run folder."""
    config_text, config = "", {}
    if (run / "config.yaml").exists():
        config_text = (run / "config.yaml").read_text(encoding="utf-8", errors="replace")
        try:
            import yaml

            config = yaml.safe_load(config_text) or {}
        except Exception as exc:  # noqa: BLE001 - a broken config is reported, not raised
            missing.append(f"config.yaml: not valid YAML ({str(exc).splitlines()[0]})")
    else:
        missing.append("config.yaml: absent")
    records = read_lines(run / "metrics.jsonl", missing) if (run / "metrics.jsonl").exists() else []
    if not (run / "metrics.jsonl").exists():
        missing.append("metrics.jsonl: absent, so no curves")
    curves = _curves(records)
    trained = [r for r in records if _num(r.get("reward")) is not None]
    evals = [r for r in records if _num(r.get("eval/reward")) is not None]
    during = [r for r in records if _num(r.get("eval/heldout_reward")) is not None]
    walls = [r["time/elapsed_s"] for r in records if _num(r.get("time/elapsed_s")) is not None]
    env = config.get("env", {}) if isinstance(config, dict) else {}
    summary = {
        "task": env.get("name") if isinstance(env, dict) else None,
        "scheme": config.get("scheme") if isinstance(config, dict) else None,
        "steps": int(trained[-1]["step"]) if trained else None,
        "planned steps": config.get("steps") if isinstance(config, dict) else None,
        "wall time (s)": round(max(walls), 1) if walls else None,
        "final train reward": _num(trained[-1]["reward"]) if trained else None,
        "held-out reward": _num(evals[-1]["eval/reward"]) if evals else None,
        "chance": _num(evals[-1].get("eval/chance")) if evals else None,
        "held-out during training (fixed split)": " -> ".join(
            f"{_num(r['eval/heldout_reward']):.3f} (step {int(r['step'])})" for r in (during[0], during[-1])
        ) if during else None,
    }
    if records and not evals:
        missing.append("metrics.jsonl: no held-out evaluation record (run unfinished, or --no-eval)")
    return {"config": config_text, "summary": summary, "curves": curves,
            "episodes": _train_episodes(run, missing)}


# ------------------------------------------------------------------------------------ evaluations
def agent_table(transcripts: list[dict]) -> list[dict]:
    """Per agent: steps, format-error rate, empty actions, mean action chars, issue kinds
    (the definitions of :func:`baselines.evaluate_core.score`; infra-excluded episodes left out)."""
    stats: dict[str, dict] = defaultdict(lambda: {"steps": 0, "errors": 0, "empty": 0, "chars": 0, "kinds": {}})
    for ep in transcripts:
        if ep.get("infra_excluded"):
            continue
        for st in ep.get("steps", []):
            s = stats[str(st.get("agent", "?"))]
            action = str(st.get("action") or "")
            issues = list(st.get("format_issues") or [])
            empty = not action.strip()
            s["steps"] += 1
            s["chars"] += len(action)
            s["empty"] += empty
            s["errors"] += bool(issues or empty)
            for issue in issues or (["empty action"] if empty else []):
                kind = str(issue).split(":", 1)[0][:60]
                s["kinds"][kind] = s["kinds"].get(kind, 0) + 1
    return [{"agent": a, "steps": s["steps"], "format-error rate": s["errors"] / s["steps"] if s["steps"] else None,
             "empty": s["empty"], "mean action chars": s["chars"] / s["steps"] if s["steps"] else None,
             "issue kinds": dict(sorted(s["kinds"].items(), key=lambda x: -x[1]))} for a, s in stats.items()]


def eval_data(folder: Path, missing: list[str]) -> dict[str, Any]:
    """Summaries, per-agent tables and episodes of a ``baselines.evaluate --out`` folder."""
    summaries, tables, episodes = [], {}, []
    for tpath in sorted(folder.glob("*.transcripts.jsonl")):
        stem = tpath.name[: -len(".transcripts.jsonl")]
        transcripts = read_lines(tpath, missing)
        spath = folder / f"{stem}.summary.json"
        summary: dict = {}
        if spath.exists():
            try:
                summary = json.loads(spath.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, OSError):
                missing.append(f"{spath.name}: unreadable")
        else:
            missing.append(f"{spath.name}: absent")
        env = str(summary.get("env") or stem)
        summaries.append({k: v for k, v in summary.items() if not isinstance(v, (dict, list))} or {"env": env})
        try:
            tables[env] = agent_table(transcripts)
            episodes.extend(_eval_episodes(env, transcripts))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a hand-edited or foreign file
            missing.append(f"{tpath.name}: unexpected content ({exc}); its episodes are skipped")
    return {"evals": summaries, "tables": tables, "episodes": episodes}


def _eval_episodes(env: str, transcripts: list[dict]) -> list[dict]:
    """One report episode per transcript line of ``baselines.evaluate``."""
    episodes = []
    for ep in transcripts:
        turns = [{"a": str(st.get("agent", "?")), "t": st.get("turn", 0), "n": -1, "p": -1, "d": 0, "b": -1,
                  "pr": st.get("prompt"), "obs": last_message(st.get("prompt")), "x": st.get("action"),
                  "tok": None, "r": _num(st.get("reward")),
                  "rc": {k: _num(v) for k, v in (st.get("reward_components") or {}).items()},
                  "rtg": None, "adv": None, "keep": None, "g": None, "iss": list(st.get("format_issues") or [])}
                 for st in ep.get("steps", [])]
        episodes.append({"s": None, "env": env, "task": str(ep.get("task", "?")), "ep": ep.get("sample", 0),
                         "r": _num(ep.get("return")), "tree": False, "turns": turns,
                         "pass": ep.get("passed"), "oracle": _num(ep.get("oracle_return")),
                         "excluded": bool(ep.get("infra_excluded"))})
    return episodes


def collect(folder: str | Path) -> dict[str, Any]:
    """The report data of ``folder`` (a training run, an evaluation ``--out`` folder, or both)."""
    folder = Path(folder)
    missing: list[str] = []
    is_train = any((folder / n).exists() for n in ("config.yaml", "metrics.jsonl", "samples"))
    is_eval = any(folder.glob("*.transcripts.jsonl")) or any(folder.glob("*.summary.json"))
    data: dict[str, Any] = {"title": folder.resolve().name, "kind": [], "config": "", "summary": {},
                            "curves": {"steps": [], "series": {}}, "episodes": [], "evals": [], "tables": {}}
    if is_train:
        data["kind"].append("training run")
        data.update(train_data(folder, missing))
    if is_eval:
        data["kind"].append("evaluation")
        ev = eval_data(folder, missing)
        data["episodes"] = data["episodes"] + ev["episodes"]
        data["evals"], data["tables"] = ev["evals"], ev["tables"]
    if not (is_train or is_eval):
        missing.append(f"{folder}: neither a training run (config.yaml, metrics.jsonl, samples/) nor an "
                       "evaluation folder (*.transcripts.jsonl): nothing to show")
    if is_train and not is_eval:
        agents = sorted({t["a"] for e in data["episodes"] for t in e["turns"]})
        data["tables"] = {"training samples": train_agent_table(data["episodes"], agents)} if agents else {}
    data["missing"] = missing
    return data


def train_agent_table(episodes: list[dict], agents: list[str]) -> list[dict]:
    """Per agent over the saved training turns: turns, empty completions, mean completion chars and advantage."""
    out = []
    for a in agents:
        turns = [t for e in episodes for t in e["turns"] if t["a"] == a]
        texts = [t["x"] for t in turns if t["x"] is not None]
        advs = [t["adv"] for t in turns if t["adv"] is not None]
        out.append({"agent": a, "steps": len(turns), "empty": sum(not x.strip() for x in texts),
                    "mean action chars": sum(map(len, texts)) / len(texts) if texts else None,
                    "mean |advantage|": sum(map(abs, advs)) / len(advs) if advs else None,
                    "zero-advantage share": sum(v == 0 for v in advs) / len(advs) if advs else None})
    return out
