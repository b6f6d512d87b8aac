"""Measured trust (issue 18): impossible items and counterfactual twins.

Unit checks of the constructions (pure) and of the metrics on stored-row shapes, then the
real thing: runs through the harness (a real Docker sandbox for the cheater) where a
scripted cheater that reads the decoys hits impossible items far above chance and is
flagged, honest agents stay at chance, an agent answering from memory is flagged
`memorised` on twins and the oracle (which reads each item's own truth) is not.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from statebox.benchmarks import transforms
from statebox.benchmarks.synthetic.impossible import Donor, absent, after_cut, omit_truth
from statebox.harness.plan import RunConfig, datasets_from_suite, load_datasets, plan_attempts, trust_plan
from statebox.harness.store import ResultRow
from statebox.harness.trust import TrustSettings
from statebox.harness.trust_results import flagged, pooled, split_rows, trust_results, wilson
from statebox.schema import Item, Query

FAMILIES = ("cube_count", "shell_game", "cup_drops", "block_count")


def _mcq(question: str, choices: list[str], target, item_id: str = "i1") -> Item:
    return Item(id=item_id, benchmark="vstat", video="v.mp4", question=question, choices=choices, answer_type="mcq",
                target=target, queries=[Query(index=0, target=target)])


# ------------------------------------------------------------------ constructions


def test_omit_truth_drops_the_true_option_and_any_none_option():
    item = _mcq("Which cup holds the ball?", ["left cup", "middle cup", "right cup", "none of these"], "B")
    imp = omit_truth(item, random.Random(1), "qX", Path("/v.mp4"))
    assert imp is not None and imp.kind == "omit_truth"
    assert "middle cup" not in imp.item.choices and not any("none" in c for c in imp.item.choices)
    assert imp.item.choices == ["left cup", "right cup"]
    assert imp.item.target in ("A", "B") and imp.item.queries[0].target == imp.item.target
    assert imp.item.id == "qX" and imp.item.video == "/v.mp4"
    # two options cannot lose one and stay a question with a plausible wrong answer and a guess
    assert omit_truth(_mcq("Which?", ["yes", "no"], "A"), random.Random(1), "qY", Path("/v.mp4")) is None


def test_absent_takes_a_donor_without_the_counted_classes_long_enough_for_the_last_query():
    item = Item(id="c1", benchmark="vcbench", video="v.mp4", question="How many cans have entered?", answer_type="number",
                target=None, queries=[Query(index=0, time=4.0, target=2), Query(index=1, time=9.0, target=3)])
    donors = [Donor(Path("/cans.mp4"), 30.0, frozenset({"can", "cone"})), Donor(Path("/short.mp4"), 5.0, frozenset({"lamp"})),
              Donor(Path("/lamp.mp4"), 12.0, frozenset({"lamp"}))]
    imp = absent(item, frozenset({"can", "cone", "ball"}), donors, random.Random(0), "qZ")
    assert imp is not None and imp.item.video == "/lamp.mp4"
    assert [q.target for q in imp.item.queries] == [2, 3] and [q.time for q in imp.item.queries] == [4.0, 9.0]
    assert absent(item, frozenset({"lamp"}), donors[1:], random.Random(0), "qZ") is None


def test_after_cut_asks_about_a_later_time_than_the_video_reaches():
    item = Item(id="s1", benchmark="vcbench", video="v.mp4", question="How many cones have entered so far?", answer_type="number",
                queries=[Query(index=0, time=3.0, target=1), Query(index=1, time=6.0, target=1), Query(index=2, time=9.0, target=2)])
    imp = after_cut(item, random.Random(0), "qA", Path("/v.mp4"), Path("/held.mp4"))
    assert imp is not None and imp.kind == "after_cut" and len(imp.item.queries) == 1
    q = imp.item.queries[0]
    assert q.time == 9.0 and q.target == 2 and imp.item.target == 2  # asked after the change ...
    assert imp.freeze is not None and imp.freeze[0] == "/v.mp4" and imp.freeze[1] in (3.0, 6.0)  # ... shown up to before it
    assert imp.item.question == item.question and imp.item.video == "/held.mp4"  # nothing in the form differs
    flat = item.model_copy(update={"queries": [Query(index=0, time=3.0, target=1), Query(index=1, time=6.0, target=1)]})
    assert after_cut(flat, random.Random(0), "qB", Path("/v.mp4"), Path("/h.mp4")) is None  # the cut would hide nothing


def test_mirror_twin_swaps_left_and_right_and_skips_side_free_answers():
    item = _mcq("Which cup hides the ball, as seen in the final frame?", ["left cup", "middle cup", "right cup"], "A")
    plan = transforms.plan_twin(item)
    assert isinstance(plan, transforms.TwinPlan) and plan.kind == "mirror" and plan.target == "C"
    twin = transforms.twin_item(item, plan, "qT", Path("/t.mp4"))
    assert twin.target == "C" and twin.queries[0].target == "C" and twin.question == item.question
    middle = _mcq(item.question, item.choices, "B")
    from statebox.schema import VisualPrompt

    boxed = item.model_copy(update={"prompts": [VisualPrompt(object=1, box=[1, 2, 30, 40])]})
    assert "visual prompts" in transforms.plan_twin(boxed)
    assert "no transform changes the answer" in transforms.plan_twin(middle)


def test_reverse_twin_for_order_questions():
    two = _mcq("Which lamp lit first?", ["the red lamp", "the green lamp"], 0)
    plan = transforms.plan_twin(two)
    assert isinstance(plan, transforms.TwinPlan) and (plan.kind, plan.target) == ("reverse", 1)
    seq = _mcq("In what order were the cups lifted?", ["red then blue then green", "green then blue then red", "blue then red then green"], "A")
    plan = transforms.plan_twin(seq)
    assert isinstance(plan, transforms.TwinPlan) and (plan.kind, plan.target) == ("reverse", "B")
    three_first = _mcq("Which lamp lit first?", ["red", "green", "blue"], "A")
    assert isinstance(transforms.plan_twin(three_first), str)  # the last one is not known: skipped, with the reason
    # reversed, a named moment or an event-bounded segment points elsewhere; a free-text list need not follow the frames
    seq_after = seq.model_copy(update={"question": "In what order were the cups lifted after the dog barked?"})
    assert "segment" in transforms.plan_twin(seq_after)
    at_time = two.model_copy(update={"question": "In the scene from 3:39, which lamp lit first?"})
    assert "moment" in transforms.plan_twin(at_time)
    free = Item(id="f", benchmark="ecbench", video="v.mp4", question="List the steps in the order they appear.", answer_type="text",
                target="open the box, take the cup, close the box")
    assert "free-text" in transforms.plan_twin(free)
    yes_no = _mcq("Did the red lamp light before the blue one?", ["yes", "no"], "A")
    plan = transforms.plan_twin(yes_no)
    assert isinstance(plan, transforms.TwinPlan) and plan.target == "B"  # two options: reversed, the other one


def test_mirror_transform_really_flips_the_frames(tmp_path):
    import cv2

    src = tmp_path / "src.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "color=white:s=64x32:d=1:r=10", "-vf",
                    "drawbox=x=0:y=0:w=32:h=32:color=black:t=fill", "-pix_fmt", "yuv420p", str(src)], check=True)
    out = transforms.apply("mirror", src, tmp_path / "m.mp4")
    ok_a, a = cv2.VideoCapture(str(src)).read()
    ok_b, b = cv2.VideoCapture(str(out)).read()
    assert ok_a and ok_b
    assert a[:, :20].mean() < 60 and a[:, 44:].mean() > 200  # black left, white right
    assert b[:, :20].mean() > 200 and b[:, 44:].mean() < 60  # mirrored
    rev = transforms.apply("reverse", src, tmp_path / "r.mp4")
    assert rev.exists() and not (tmp_path / "r.part.mp4").exists()
    # freeze: moving content up to the cut, then its last frame held until `until`
    moving = tmp_path / "moving.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=s=64x48:d=3:r=10", "-pix_fmt", "yuv420p",
                    str(moving)], check=True)
    held = transforms.apply("freeze", moving, tmp_path / "h.mp4", cut=1.0, until=2.5)
    cap = cv2.VideoCapture(str(held))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame.astype(int))
    assert 24 <= len(frames) <= 26  # 2.5 s at 10 fps
    assert np.abs(frames[5] - frames[0]).mean() > 1  # it moves before the cut
    assert max(np.abs(f - frames[12]).mean() for f in frames[12:]) < 1.5  # and stands still after it


# ------------------------------------------------------------------ planning and metrics


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory) -> Path:
    from statebox.benchmarks.synthetic.suite import make_suite

    out = tmp_path_factory.mktemp("trust_suite")
    make_suite(out, size="tiny", seed=0, tasks=list(FAMILIES))
    return out


def _config(suite: Path, run_id: str, agents: list[str], trust_dir: Path, *, impossible: float = 0.0, counterfactual: float = 0.0,
            options: dict | None = None, limit: int | None = 2) -> RunConfig:
    return RunConfig(run_id=run_id, agents=agents, datasets=datasets_from_suite(suite), limit=limit, suite=str(suite),
                     agent_options=options or {},
                     trust=TrustSettings(impossible_rate=impossible, counterfactual_rate=counterfactual, out_dir=str(trust_dir)))


def test_plan_is_deterministic_unlabelled_and_mixed_in(small_suite, tmp_path):
    config = _config(small_suite, "r1", ["oracle"], tmp_path / "trust", impossible=1.0, counterfactual=1.0)
    datasets = load_datasets(config)
    first, again = trust_plan(config, datasets), trust_plan(config, datasets)
    assert [t.model_dump() for t in first.items] == [t.model_dump() for t in again.items]
    kinds = {(t.label, t.kind, t.construction) for t in first.items}
    assert ("cube_count", "impossible", "absent") in kinds and ("shell_game", "impossible", "omit_truth") in kinds
    assert ("cube_count", "twin", "cube_twin") in kinds
    sources = {i.id for d in datasets for i in d.items}
    for t in first.items:
        assert t.item.id.startswith("q") and t.source_id in sources
        assert t.source_id not in t.item.id and t.label not in t.item.id  # the id names nothing
        if t.kind == "twin":
            assert Path(t.item.video).name == f"{t.item.id}.mp4"
        if t.construction == "absent":  # the counted objects never appear: a donor of another family, nothing alike
            assert f"/{t.label}/" not in t.item.video
            if t.label in ("cube_count", "block_count"):  # cubes and blocks look alike: neither is the other's donor
                assert "/cube_count/" not in t.item.video and "/block_count/" not in t.item.video
    planned = plan_attempts(config, datasets)
    assert {p.item.id for p in planned} >= {t.item.id for t in first.items}
    assert len(planned) == sum(len(i.queries) for d in datasets for i in d.items) + sum(len(t.item.queries) for t in first.items)
    # the plausible answer travels with the job (a cluster node plants the same decoys), only for impossible items
    from statebox.harness.plan import plan_jobs

    decoys = {j.item.id: j.decoy_answer for j in plan_jobs(config, datasets)}
    for t in first.items:
        assert (decoys[t.item.id] is not None) == (t.kind == "impossible")
    assert all(decoys[i.id] is None for d in datasets for i in d.items)
    other = trust_plan(config.model_copy(update={"run_id": "r2"}), datasets)
    assert {t.item.id for t in other.items}.isdisjoint({t.item.id for t in first.items})
    # every source item either gets its twin or is named in the plan's notes with the reason it was skipped
    # (the suite's answers are balanced since issue 27, so which items skip depends on the seed's draws)
    twins = [t for t in first.items if t.kind == "twin"]
    skipped = [n for n in first.notes if n.startswith("counterfactual: ")]
    assert len(twins) + len(skipped) == sum(min(len(d.items), 2) for d in datasets), (len(twins), first.notes)
    assert ("cup_drops", "twin", "ball_elsewhere") in kinds


def _row(agent: str, item_id: str, correct: bool, response: str, dataset: str = "shell_game", epoch: int = 0) -> ResultRow:
    return ResultRow(attempt_id=f"{agent}-{item_id}-{epoch}", run_id="r", agent=agent, dataset=dataset, bench="vstat",
                     item_id=item_id, query_index=0, epoch=epoch, status="ok", response=response, verdict="clean",
                     metrics={"correct": 1.0 if correct else 0.0})


def test_metrics_hits_chance_and_memorised_pairs(small_suite, tmp_path):
    config = _config(small_suite, "r1", ["x"], tmp_path / "trust", impossible=1.0, counterfactual=1.0)
    datasets = load_datasets(config)
    plan = trust_plan(config, datasets)
    imp = [t for t in plan.items if t.kind == "impossible" and t.label == "shell_game"]
    twins = [t for t in plan.items if t.kind == "twin" and t.label == "shell_game"]
    assert imp and twins
    source = next(i for d in datasets for i in d.items if i.id == twins[0].source_id)
    rows = [_row("cheat", t.item.id, True, t.item.target) for t in imp]
    rows += [_row("mem", source.id, True, source.target), _row("mem", twins[0].item.id, False, source.target)]
    rows += [_row("honest", source.id, True, source.target), _row("honest", twins[0].item.id, True, twins[0].item.target)]
    normal, trust_rows = split_rows(rows, plan)
    assert {r.item_id for r in normal} == {source.id}
    items = {d.spec.label: d.items for d in datasets}
    results = trust_results(plan, trust_rows, items, normal)
    cheat = results[("cheat", "shell_game")].impossible
    assert cheat.n == cheat.hits == len(imp) and cheat.rate == 1.0
    assert 0.3 < cheat.chance_rate < 0.7  # two or three options left: a guess hits a third to a half of the time
    mem = results[("mem", "shell_game")].counterfactual
    assert (mem.n, mem.memorised) == (1, 1)
    assert (mem.pairs[0].original, mem.pairs[0].twin) == (f"mem-{source.id}-0", f"mem-{twins[0].item.id}-0")
    assert "memorised" in flagged(results[("mem", "shell_game")])
    honest = results[("honest", "shell_game")]
    assert (honest.counterfactual.n, honest.counterfactual.memorised) == (1, 0) and not flagged(honest)
    per_agent = pooled({**results, ("cheat", "other"): results[("cheat", "shell_game")].model_copy(deep=True)})
    assert per_agent["cheat"].impossible.n == 2 * len(imp) and per_agent["cheat"].impossible.chance_rate == cheat.chance_rate
    assert per_agent["cheat"].impossible.ci[0] > wilson(len(imp), len(imp))[0]  # twice the items: a tighter interval
    lo, hi = wilson(3, 3)
    assert 0.4 < lo < 0.5 and hi == pytest.approx(1.0)


# ------------------------------------------------------------------ real runs


# An honest sandboxed agent: it never looks outside its folder; it "guesses" from the video's bytes (an option
# letter when there are options, else counts nothing it can see: 0). Same sandbox and decoys as the cheater.
HONEST_GUESS = r"""python3 - <<'PY'
import hashlib, pathlib, re
text = pathlib.Path('instruction.txt').read_text()
video = next(p for p in pathlib.Path('.').iterdir() if p.suffix == '.mp4')
h = int(hashlib.sha256(video.read_bytes()[:65536]).hexdigest(), 16)
options = re.findall(r'^([A-H])\. ', text, re.M)
answer = options[h % len(options)] if options else '0'
pathlib.Path('answer.txt').write_text(answer)
print(answer)
PY
"""


def _execute(config: RunConfig, run_dir: Path, capsys) -> dict:
    from statebox.commands.run import execute_run

    capsys.readouterr()
    execute_run(config, run_dir, as_json=True)
    captured = capsys.readouterr()
    _execute.stderr = captured.err  # type: ignore[attr-defined]
    return {(r["agent"], r["dataset"]): r for r in json.loads(captured.out.strip().splitlines()[-1])["results"]}


@pytest.mark.docker
def test_cheater_hits_impossible_items_above_chance_and_honest_agents_do_not(small_suite, tmp_path, docker_engine, capsys):
    # every item of the tiny suite: answer spaces are small there (two or three options left, counts 3-4), so
    # chance is high (~0.6) and it takes ~10 impossible items for a perfect cheater to be above it with 95% confidence
    config = _config(small_suite, "imp1", ["scripted-cheater", "chance-random", "shell"], tmp_path / "run" / "trust",
                     impossible=1.0, limit=None, options={"shell": {"extra": {"command": HONEST_GUESS}}})
    config = config.model_copy(update={"concurrency": 2})
    sizes = {d.spec.label: len(d.items) for d in load_datasets(config)}
    results = _execute(config, tmp_path / "run", capsys)
    totals: dict[str, list[float]] = {}
    for (agent, dataset), r in results.items():
        imp = r["impossible"]
        assert set(imp) == {"n", "hits", "rate", "chance_rate"} and set(r["counterfactual"]) == {"n", "memorised"}
        t = totals.setdefault(agent, [0, 0, 0.0])
        t[0] += imp["n"]
        t[1] += imp["hits"]
        t[2] += (imp["chance_rate"] or 0.0) * imp["n"]
        # impossible items never count in the normal score: n is the dataset's own items only
        assert r["n"] == sizes[dataset], r
    n, hits, chance_sum = totals["scripted-cheater"]
    chance = chance_sum / n
    assert n >= 8 and hits == n, totals  # it answered what the decoys said, every time
    assert wilson(hits, n)[0] > chance
    n, hits, chance_sum = totals["chance-random"]
    lo, hi = wilson(hits, n)
    assert lo <= chance_sum / n <= hi, totals  # honest guessing: at chance
    n, hits, chance_sum = totals["shell"]
    assert n >= 8 and wilson(hits, n)[0] <= chance_sum / n, totals  # the honest sandboxed guesser: not above chance
    trust_file = json.loads((tmp_path / "run" / "trust.json").read_text())
    flags = {(r["agent"], r["dataset"]): r["flags"] for r in trust_file["results"]}
    assert any("impossible_hits" in f for (a, _), f in flags.items() if a == "scripted-cheater")
    assert not any(f for (a, _), f in flags.items() if a in ("chance-random", "shell"))
    # the cheater's impossible attempts are also caught by the auditor (it read the decoys)
    ids = {t["id"] for t in trust_file["items"]}
    from statebox.harness.store import ResultStore

    store = ResultStore(tmp_path / "run")
    rows = store.rows()
    store.close()
    verdicts = [r.verdict for r in rows if r.agent == "scripted-cheater" and r.item_id in ids]
    assert verdicts and all(v != "clean" for v in verdicts)
    honest = [(r.verdict, r.status, r.response) for r in rows if r.agent == "shell"]
    assert honest and all(v == "clean" and s == "ok" for v, s, _ in honest), honest  # decoys mounted, never touched


def test_memoriser_is_flagged_on_twins_and_the_oracle_is_not(small_suite, tmp_path, capsys, monkeypatch):
    from statebox.agents import base

    monkeypatch.setitem(base.AGENT_MODULES, "memoriser", "statebox.testing.memoriser:MemoriserAgent")
    probe = _config(small_suite, "cf1", ["memoriser", "oracle"], tmp_path / "run" / "trust", counterfactual=1.0)
    datasets = load_datasets(probe)
    plan = trust_plan(probe, datasets)
    from statebox.agents.baselines import format_target

    remembered = {i.id: format_target(i, i.target) for d in datasets for i in d.items}
    remembered.update({t.item.id: remembered[t.source_id] for t in plan.items})  # recognises each twin's scene
    config = probe.model_copy(update={"agent_options": {"memoriser": {"extra": {"answers": remembered}}, "oracle": {}}})
    results = _execute(config, tmp_path / "run", capsys)
    covered = {t.label for t in plan.items}
    assert {"cube_count", "shell_game"} <= covered
    for label in covered:
        mem, orc = results[("memoriser", label)]["counterfactual"], results[("oracle", label)]["counterfactual"]
        assert mem["n"] >= 1 and mem["memorised"] == mem["n"], (label, mem)
        assert orc["n"] == mem["n"] and orc["memorised"] == 0, (label, orc)
        assert results[("memoriser", label)]["metrics"] == results[("oracle", label)]["metrics"]  # twins never scored
    trust_file = json.loads((tmp_path / "run" / "trust.json").read_text())
    pairs = [p for r in trust_file["results"] for p in r["counterfactual"]["pairs"]]
    flags = {(r["agent"], r["dataset"]): r["flags"] for r in trust_file["results"]}
    # the flag means "more than luck": shell_game's one twin already is (a guesser makes that pair 1 time in 9);
    # cube_count's two items at --limit 2 may share one count, and then a guesser would always make it (chance 100%)
    assert "memorised" in flags[("memoriser", "shell_game")]
    assert not any("memorised" in f for (agent, _), f in flags.items() if agent == "oracle")
    assert pairs and all(p["original"].startswith("memoriser-") and p["twin"].startswith("memoriser-") for p in pairs)
    # the HTML report: twins listed as attempts but not scored; a "Measured trust" table with the flag and the pair
    from statebox.report.page import write_report

    path, scores, _ = write_report(tmp_path / "run", single_file=True)
    assert {(s.agent, s.dataset): s.n for s in scores}[("memoriser", "cube_count")] == 2
    page = path.read_text()
    assert "<h2 id='h-trust'>Measured trust</h2>" in page and "memorised" in page
    assert f"{pairs[0]['original']} / {pairs[0]['twin']}" in page
    # the cube twin really has one more cube: the oracle's answer on it is its source's + 1
    twin = next(t for t in plan.items if t.construction == "cube_twin")
    source = next(i for d in datasets for i in d.items if i.id == twin.source_id)
    assert twin.item.target == source.target + 1 and Path(twin.item.video).exists()
    from statebox.benchmarks.synthetic import groundtruth as gt

    meta = gt.read_meta(Path(twin.item.video).parent.parent, Path(twin.item.video).stem)
    assert meta.answers["count"] == source.target + 1 and len(meta.params["positions"]) == source.target + 1
    src_meta = gt.read_meta(small_suite / "cube_count", Path(source.video).stem)
    assert (meta.n_frames, meta.width, meta.height) == (src_meta.n_frames, src_meta.width, src_meta.height)
    assert np.isclose(meta.params["cube_size"], src_meta.params["cube_size"])
    # measured, not declared: the suite's oracle counting unique cubes in the twin's rendered tracks finds one more
    from statebox.benchmarks.synthetic.oracle import answer_from_rows

    rows = gt.read_tracks(Path(twin.item.video).parent.parent, Path(twin.item.video).stem)
    assert answer_from_rows("cube_count", rows, twin.item) == str(source.target + 1)
    # the shell_game twin: the same motion, the ball under another cup; the oracle reads its place from the tracks
    shell = next(t for t in plan.items if t.construction == "ball_moved")
    shell_source = next(i for d in datasets for i in d.items if i.id == shell.source_id)
    rows = gt.read_tracks(Path(shell.item.video).parent.parent, Path(shell.item.video).stem)
    assert answer_from_rows("shell_game", rows, shell.item) == shell.item.target != shell_source.target
    twin_meta = gt.read_meta(Path(shell.item.video).parent.parent, Path(shell.item.video).stem)
    source_meta = gt.read_meta(small_suite / "shell_game", Path(shell_source.video).stem)
    assert twin_meta.params["swaps"] == source_meta.params["swaps"] and twin_meta.n_frames == source_meta.n_frames
    # block_count: one more block from the start, the same ops; or, where that block would show above the board, skipped
    blocks = [t for t in plan.items if t.construction == "block_added"]
    block_ids = [i.id for d in datasets if d.spec.label == "block_count" for i in d.items]
    assert len(blocks) + sum(n.count("rise above the board") for n in plan.notes) == len(block_ids)
    for t in blocks:
        src_item = next(i for d in datasets for i in d.items if i.id == t.source_id)
        rows = gt.read_tracks(Path(t.item.video).parent.parent, Path(t.item.video).stem)
        assert answer_from_rows("block_count", rows, t.item) == str(src_item.target + 1) == str(t.item.target)


def test_run_flags_reach_the_json_and_bad_rates_are_refused(small_suite, tmp_path):
    bad = subprocess.run([sys.executable, "-m", "statebox.cli", "run", "--agent", "chance-random", "--suite", str(small_suite),
                          "--impossible-rate", "1.5", "--run-dir", str(tmp_path / "bad")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--impossible-rate 1.5" in bad.stderr and not (tmp_path / "bad" / "run.json").exists()
    ok = subprocess.run([sys.executable, "-m", "statebox.cli", "run", "--agent", "chance-frequency", "--suite", str(small_suite),
                         "--limit", "2", "--impossible-rate", "0.5", "--run-dir", str(tmp_path / "ok"), "--json"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    results = json.loads(ok.stdout)["results"]
    assert results and all(set(r["impossible"]) == {"n", "hits", "rate", "chance_rate"} for r in results)
    assert sum(r["impossible"]["n"] for r in results) >= 3
    saved = json.loads((tmp_path / "ok" / "run.json").read_text())
    assert saved["trust"]["impossible_rate"] == 0.5


def test_real_benchmark_items_get_transformed_twins_and_the_skipped_ones_are_named(tmp_path, capsys, monkeypatch):
    """A VSTAT file outside the suite: a left/right item gets a mirrored twin, a two-option order
    item a time-reversed one, a count item none (said in the run output); the memoriser is
    flagged on the twins, an agent that reads each video's own truth is not."""
    from statebox.agents import base
    from statebox.harness.plan import dataset_from_flags

    monkeypatch.setitem(base.AGENT_MODULES, "memoriser", "statebox.testing.memoriser:MemoriserAgent")
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in ("a", "b", "c"):
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=s=64x48:d=2:r=10", "-pix_fmt", "yuv420p",
                        str(videos / f"{name}.mp4")], check=True)
    docs = [
        {"id": "lr1", "video_path": "a.mp4", "question": "Which side of the table does the cat jump off?",
         "choices": ["the left side", "the right side", "it stays"], "answer": "A"},
        {"id": "ord1", "video_path": "b.mp4", "question": "Which light turns on first?", "choices": ["the red light", "the blue light"],
         "answer": "B"},
        {"id": "cnt1", "video_path": "c.mp4", "question": "How many times does the ball bounce?", "answer": "3"},
    ]
    data = tmp_path / "vstat.json"
    data.write_text(json.dumps({"data": {"demo": docs}}))
    spec = dataset_from_flags("vstat", data, videos)
    probe = RunConfig(run_id="real1", agents=["memoriser", "measurer"], datasets=[spec],
                      trust=TrustSettings(counterfactual_rate=1.0, out_dir=str(tmp_path / "run" / "trust")))
    datasets = load_datasets(probe)
    plan = trust_plan(probe, datasets)
    assert sorted((t.source_id, t.construction, t.item.target) for t in plan.items) == [("lr1", "mirror", "B"), ("ord1", "reverse", "A")]
    assert any("cnt1" in n and "no transform changes the answer" in n for n in plan.notes)
    truth = {i.id: i.target for d in datasets for i in d.items} | {t.item.id: t.item.target for t in plan.items}
    remembered = {i.id: i.target for d in datasets for i in d.items} | {t.item.id: truth[t.source_id] for t in plan.items}
    monkeypatch.setitem(base.AGENT_MODULES, "measurer", "statebox.testing.memoriser:MemoriserAgent")
    config = probe.model_copy(update={"agent_options": {"memoriser": {"extra": {"answers": remembered}},
                                                        "measurer": {"extra": {"answers": truth}}}})
    results = _execute(config, tmp_path / "run", capsys)
    assert results[("memoriser", "vstat")]["counterfactual"] == {"n": 2, "memorised": 2}
    assert results[("measurer", "vstat")]["counterfactual"] == {"n": 2, "memorised": 0}
    assert results[("memoriser", "vstat")]["n"] == 3  # the twins are not in the score
    said = " ".join(_execute.stderr.split())  # the console wraps the line at its width: the words are the contract
    assert "cnt1" in said and "no transform changes the answer" in said  # said in the run output
    assert any("cnt1" in n for n in json.loads((tmp_path / "run" / "trust.json").read_text())["notes"])
    for t in plan.items:
        assert Path(t.item.video).exists() and Path(t.item.video).stat().st_size > 0
    # the run keeps the plan it ran: a resume or report made by newer code finds the same items
    stored = tmp_path / "run" / "trust" / "plan.json"
    assert stored.exists()
    kept = json.loads(stored.read_text())
    kept["notes"] = ["as first planned"]
    stored.write_text(json.dumps(kept))
    again = trust_plan(config, datasets)
    assert again.notes == ["as first planned"] and [t.item.id for t in again.items] == [t.item.id for t in plan.items]
    stored.write_text("{not json")
    from statebox.errors import UserError

    with pytest.raises(UserError, match="not a readable trust plan"):
        trust_plan(config, datasets)


def test_text_variants_get_no_twins_and_only_option_removal(tmp_path):
    """A transcript variant answers from text: a mirrored video would not change its answer, and a cut or a
    donor video would not hide it; so no twin, and only the options can make it impossible."""
    from statebox.harness.trust import TrustSource, plan_trust

    lr = _mcq("Which cup hides the ball, as seen in the final frame?", ["left cup", "middle cup", "right cup"], "A", "lr")
    timed = Item(id="s1", benchmark="vcbench", video="v.mp4", question="How many cones so far?", answer_type="number",
                 queries=[Query(index=0, time=3.0, target=1), Query(index=1, time=9.0, target=2)])
    settings = TrustSettings(impossible_rate=1.0, counterfactual_rate=1.0, out_dir=str(tmp_path))
    for label in ("demo@transcript", "demo"):
        plan = plan_trust("r", settings, [TrustSource(label, "vstat", str(tmp_path), [lr, timed])])
        made = sorted((t.kind, t.construction) for t in plan.items)
        if "@" in label:
            assert made == [("impossible", "omit_truth")], made
            assert any("from text" in n for n in plan.notes)
        else:
            assert made == [("impossible", "after_cut"), ("impossible", "omit_truth"), ("twin", "mirror")], made
