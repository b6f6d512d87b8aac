"""Budget sweeps (`--frames 2,4`, `--fps 1,2`): one agent variant and one leaderboard row per
budget, a best-of row per base agent and dataset, and every non-baseline row marked when it does
not beat the best prior baseline; in `run --json`, the terminal leaderboard and the HTML report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from statebox.errors import UserError
from statebox.report.aggregate import score_run
from statebox.harness.plan import parse_budgets, sweep_variants
from statebox.harness.store import ResultRow
from statebox.report.leaderboard import leaderboard_table
from statebox.schema import Item, Query
from statebox.testing.scripted_model import ScriptedModelServer, Turn

STATEBOX = [sys.executable, "-m", "statebox.cli"]


# ---------------------------------------------------------------- planning the variants


def test_a_list_makes_one_variant_per_budget_for_agents_that_take_it():
    agents = sweep_variants(["mllm", "video-agent", "chance-frequency"], {"model": "m"},
                            {"frames": [16, 32], "fps": [1.0, 2.5]})
    assert agents == {
        "mllm@frames=16": {"model": "m", "frames": 16},
        "mllm@frames=32": {"model": "m", "frames": 32},
        "mllm@fps=1": {"model": "m", "fps": 1.0},
        "mllm@fps=2.5": {"model": "m", "fps": 2.5},
        "video-agent@frames=16": {"model": "m", "frames": 16},  # video-agent takes no fps
        "video-agent@frames=32": {"model": "m", "frames": 32},
        "chance-frequency": {"model": "m"},
    }


def test_a_single_value_behaves_as_before():
    assert sweep_variants(["mllm", "chance-random"], {}, {"frames": [64], "fps": []}) == {
        "mllm": {"frames": 64}, "chance-random": {"frames": 64}}


def test_a_sweep_no_agent_takes_is_a_user_error():
    with pytest.raises(UserError, match="--frames: a sweep needs an agent that takes it"):
        sweep_variants(["claude-code"], {}, {"frames": [16, 32]})


@pytest.mark.parametrize("text", ["16,x", "0,16", "-1"])
def test_bad_budgets_are_user_errors(text):
    with pytest.raises(UserError, match="--frames"):
        parse_budgets("--frames", text, int)


def test_budgets_parse_and_deduplicate():
    assert parse_budgets("--frames", "16, 32,16", int) == [16, 32]
    assert parse_budgets("--fps", "0.5,2", float) == [0.5, 2.0]


# ---------------------------------------------------------------- scoring: best-of rows and prior marks


def _items() -> list[Item]:
    return [Item(id=f"q{k}", benchmark="vcbench", video="v.mp4", question="how many?", answer_type="number",
                 labels={"counting_subtype": "E1-Action"},
                 queries=[Query(index=i, time=1.0 + i, target=i + 1 + k % 2) for i in range(3)]) for k in range(6)]


def _rows(agent: str, items: list[Item], answer) -> list[ResultRow]:
    return [ResultRow(attempt_id=f"{agent}-{i.id}-{q.index}", run_id="r", agent=agent, dataset="vcbench", bench="vcbench",
                      item_id=i.id, query_index=q.index, response=str(answer(i, q)), duration_s=1.0)
            for i in items for q in i.queries]


def test_each_budget_is_a_row_and_the_best_of_row_repeats_the_best_budget():
    items = _items()
    rows = (_rows("mllm@frames=16", items, lambda i, q: 0)  # wrong everywhere
            + _rows("mllm@frames=128", items, lambda i, q: q.target)  # right everywhere
            + _rows("mllm@frames=32", items, lambda i, q: q.target if i.id < "q3" else 0)
            + _rows("query-index-prior", items, lambda i, q: q.index + 1))
    scores = {s.agent: s for s in score_run(rows, {"vcbench": items})}
    assert sorted(scores) == ["mllm@best", "mllm@frames=128", "mllm@frames=16", "mllm@frames=32", "query-index-prior"]
    best = scores["mllm@best"]
    assert best.best_of == "mllm@frames=128"
    assert best.report.metrics["gpa"] == scores["mllm@frames=128"].report.metrics["gpa"] == 1.0
    assert list(best.extra["budgets"]) == ["mllm@frames=16", "mllm@frames=32", "mllm@frames=128"]  # numeric order
    prior_gpa = scores["query-index-prior"].report.metrics["gpa"]
    assert 0 < prior_gpa < 1
    # marks: the prior itself is a baseline; a budget below it is marked, the others are not
    assert scores["query-index-prior"].is_baseline and "beats_prior" not in scores["query-index-prior"].extra
    assert scores["mllm@frames=16"].extra["beats_prior"] is False
    assert scores["mllm@frames=128"].extra["beats_prior"] is True and best.extra["beats_prior"] is True
    assert scores["mllm@frames=16"].extra["prior"]["name"] in ("query-index-prior", "chance (frequency)", "chance (random)")
    entry = best.to_json()
    assert entry["best_of"] == "mllm@frames=128" and entry["beats_prior"] is True and entry["baseline"] is False
    assert scores["mllm@frames=16"].to_json()["beats_prior"] is False
    # the terminal leaderboard shows every budget, the best-of row and the mark
    console = Console(width=200, record=True)
    console.print(leaderboard_table(list(scores.values())))
    text = console.export_text()
    for name in scores:
        assert name in text
    assert "best of 3: frames=128" in text
    assert re.search(r"mllm@frames=16 .*NOT above", text)


def test_ties_go_to_the_smaller_budget_and_a_single_variant_gets_no_best_row():
    items = _items()
    rows = _rows("mllm@frames=64", items, lambda i, q: q.target) + _rows("mllm@frames=8", items, lambda i, q: q.target)
    scores = {s.agent: s for s in score_run(rows, {"vcbench": items})}
    assert scores["mllm@best"].best_of == "mllm@frames=8"
    only = {s.agent for s in score_run(_rows("mllm@frames=8", items, lambda i, q: 1), {"vcbench": items})}
    assert only == {"mllm@frames=8"}


# ---------------------------------------------------------------- the whole path: statebox run with a real sweep


def _clip(path: Path) -> Path:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10",
                    "-t", "6", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


COUNTS = {2.0: 1, 3.0: 2, 4.0: 4}


@pytest.mark.docker
def test_statebox_run_sweep_rows_best_of_and_marks_in_json_terminal_and_html(tmp_path, docker_engine):
    videos = tmp_path / "videos"
    videos.mkdir()
    _clip(videos / "clip.mp4")
    data = tmp_path / "vcbench_eval.jsonl"
    data.write_text("".join(json.dumps({
        "q_id": str(k), "query_index": k, "id": "q1", "source_dataset": "youtube", "video_path": "clip.mp4",
        "question": "How many squares have moved so far?", "counting_type": "E1", "counting_subtype": "E1-Action",
        "query_time": t, "count": c}) + "\n" for k, (t, c) in enumerate(COUNTS.items())))

    def answer(request) -> Turn:
        text = json.dumps(request.body)
        images = text.count('"type": "image"')
        when = float(re.search(r"\(([0-9.]+) s into the recording\)", text).group(1))
        # two frames: the model guesses 0; four frames: it counts right
        return Turn(text=f"ANSWER: {COUNTS[when] if images >= 4 else 0}")

    with ScriptedModelServer([answer] * 20, index_mode="sequential", side_request=lambda req: False) as server:
        env = {**os.environ, "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-DECOY-sweep-0123456789"}
        done = subprocess.run(STATEBOX + ["run", "--agent", "mllm", "--agent", "query-index-prior", "--bench", "vcbench",
                                          "--data", str(data), "--videos", str(videos), "--frames", "2,4",
                                          "--model", "claude-scripted", "-o", "vtools=local",
                                          "--run-dir", str(tmp_path / "run"), "--json"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
        images_sent = sorted(json.dumps(r.body).count('"type": "image"') for r in server.model.model_requests())
    assert done.returncode == 0, done.stderr
    assert images_sent == [2, 2, 2, 4, 4, 4]  # each budget answered every query point
    results = {r["agent"]: r for r in json.loads(done.stdout)["results"]}
    assert sorted(results) == ["mllm@best", "mllm@frames=2", "mllm@frames=4", "query-index-prior"]
    assert results["mllm@frames=4"]["metrics"]["gpa"] == 1.0
    assert results["mllm@best"]["best_of"] == "mllm@frames=4"
    assert results["mllm@best"]["metrics"] == results["mllm@frames=4"]["metrics"]
    # one item: no interval can clear the prior at n=1, so neither budget is called above or not above
    for name in ("mllm@frames=2", "mllm@frames=4"):
        assert results[name]["beats_prior"] is None and results[name]["beats_prior_n"] == 1, results[name]
        assert results[name]["beats_prior_reason"].startswith("too few items to tell"), results[name]
    assert results["mllm@frames=2"]["prior"]["name"] == "query-index-prior"

    report = subprocess.run(STATEBOX + ["report", str(tmp_path / "run")], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert report.returncode == 0, report.stderr
    assert "best of 2: frames=4" in report.stdout and "too few items to tell" in report.stdout
    assert "NOT above" not in report.stdout
    html = (tmp_path / "run" / "report.html").read_text()
    assert "best of 2 budgets: mllm@frames=4" in html
    assert "too few items to tell against the best prior: mllm@best, mllm@frames=2, mllm@frames=4" in html
    assert "not above" not in html and "▼ mllm" not in html  # the first screen's chart marks no row


def test_variant_names_are_not_accepted_as_agents(tmp_path, shared_dir):
    done = subprocess.run(STATEBOX + ["run", "--agent", "mllm@frames=16", "--bench", "vcbench", "--data",
                                      str(shared_dir / "benchmarks" / "vcbench" / "vcbench_eval.jsonl")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "'@' names a sweep variant" in done.stderr and not (tmp_path / "runs").exists()
