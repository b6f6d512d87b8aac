"""`statebox bench variants`: transcript (text-only), stretch, duration, failure-mode probes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic import lengths, measure, oracle, variants
from statebox.benchmarks.synthetic.families import common, cup_drops
from statebox.benchmarks.synthetic.families.common import rng_for
from statebox.benchmarks.synthetic.suite import load_suite
from statebox.benchmarks.synthetic.video import read_frames
from statebox.schema import Item
from statebox.scoring import score_predictions

HEADLINE = {"vstat": "score", "vcbench": "gpa", "cpbench": "accuracy", "ecbench": "counting_accuracy",
            "eocbench": "accuracy"}


def _score(ref, preds, items) -> float:
    return score_predictions(ref.bench, items, preds, n_boot=0, chance=False).metrics[HEADLINE[ref.bench]]


def test_transcript_oracle_from_text_alone_scores_100(tiny_suite: Path, tmp_path: Path) -> None:
    tasks = ["cube_count", "shell_game", "bolts", "morse_light", "streaming_count", "streaming_window",
             "line_crossing", "swing", "lamp_episodes", "cup_drops", "ec_bolts", "ec_beeps", "eoc_objects"]
    out = tmp_path / "text"
    variants.make_variants(tiny_suite, "transcript", out, tasks=tasks)
    suite = load_suite(out)
    assert {oracle.family_of(r.family) for r in suite.datasets} == set(tasks)
    for ref in suite.datasets:
        items = load_benchmark(ref.bench, ref.data, ref.videos).items
        assert all(i.question.startswith(variants.HEAD) for i in items)
        preds = [{"id": i.id, "query_index": q.index, "response": variants.transcript_answer(ref.family, i, q.index),
                  "clips": variants.transcript_clips(ref.family, i)} for i in items for q in i.queries]
        report = score_predictions(ref.bench, items, preds, n_boot=0, chance=False)
        assert report.metrics[HEADLINE[ref.bench]] == 1.0, ref.family
        if ref.bench == "ecbench":
            assert report.metrics["span_miou"] == 1.0


def test_stretch_keeps_answers_and_scales_event_times(tiny_suite: Path, tmp_path: Path) -> None:
    tasks = ["bolts", "streaming_window", "ec_beeps", "eoc_objects", "line_crossing"]
    out = tmp_path / "slow"
    variants.make_variants(tiny_suite, "stretch", out, factor=2, tasks=tasks)
    original, slow = load_suite(tiny_suite), load_suite(out)
    # re-rendered slower (smooth motion, truth for every new frame), not frames held
    info = json.loads((out / "suite.json").read_text())["variant"]
    assert set(info["rerendered"]) == set(tasks) and not info["held"], info
    for ref in slow.datasets:
        family = oracle.family_of(ref.family)
        src = original.family_dir(family)
        for meta_file in sorted((slow.family_dir(ref.family) / "gt").glob("*.meta.json")):
            stem = meta_file.name.removesuffix(".meta.json")
            a, b = gt.read_events(src, stem), gt.read_events(slow.family_dir(ref.family), stem)
            assert len(a) == len(b) > 0
            assert all(y.frame == 2 * x.frame and abs(y.time - 2 * x.time) < 1e-6 for x, y in zip(a, b))
            assert gt.read_meta(slow.family_dir(ref.family), stem).n_frames == 2 * gt.read_meta(src, stem).n_frames
            rows = gt.read_tracks(slow.family_dir(ref.family), stem)
            odd = {(r.frame, r.id): r for r in rows if r.frame % 2}
            if family in ("bolts", "line_crossing", "eoc_objects"):  # things move: in-between frames are new poses
                assert any(r.amodal_box != odd.get((r.frame + 1, r.id), r).amodal_box or
                           r.state != odd.get((r.frame + 1, r.id), r).state for r in rows if r.frame % 2 == 0)
        items = load_benchmark(ref.bench, ref.data, ref.videos).items
        before = {i.id: i for i in load_benchmark(ref.bench, original.dataset(family).data,
                                                  original.dataset(family).videos).items}
        for item in items:
            if item.labels.get("choice_type") != "open-ended":  # a time answer scales with the video
                assert [q.target for q in item.queries] == [q.target for q in before[item.id].queries]
        preds = oracle.predictions(ref.family, slow.family_dir(ref.family), items)
        assert _score(ref, preds, items) == 1.0, ref.family


def test_duration_variants_make_a_curve(tiny_suite: Path, tmp_path: Path) -> None:
    """Every family with a length to scale is generated again at each length (the planned frame count,
    decoded; the same first events; the generator's own answers; the oracle 100% through the real
    scorer); cube_count pans a wider layout at the family's density."""
    regenerated = ["bolts", "ec_bolts", "block_count", "ec_beeps", "shell_game", "line_crossing", "cube_count",
                   "morse_light", "cup_drops", "eoc_objects"]
    out = tmp_path / "dur"
    variants.make_variants(tiny_suite, "duration", out, tasks=regenerated)
    raw = json.loads((out / "suite.json").read_text())
    by_family: dict[str, list[float]] = {}
    for d in raw["datasets"]:
        by_family.setdefault(oracle.family_of(d["family"]), []).append(d["fraction"])
    for family in regenerated:  # generated again, shorter and longer (block_count #1 has no 0.75 plan)
        assert {1.0, 1.5, 2.0} <= set(by_family[family]) <= set(lengths.SCALES), family
        assert f"{family}@150" in raw["variant"]["generated"]
    assert set(by_family["cube_count"]) == set(lengths.SCALES)
    assert not [s for s in raw["variant"]["skipped"] if "@100" in s or "=1.0:" in s]
    original, suite = load_suite(tiny_suite), load_suite(out)
    for ref in suite.datasets:
        family = oracle.family_of(ref.family)
        items = load_benchmark(ref.bench, ref.data, ref.videos).items
        assert items, ref.family
        assert _score(ref, oracle.predictions(ref.family, suite.family_dir(ref.family), items), items) == 1.0, ref.family
        scale = next(d["fraction"] for d in raw["datasets"] if d["family"] == ref.family)
        src, dst = original.family_dir(family), suite.family_dir(ref.family)
        for meta_file in sorted((dst / "gt").glob("*.meta.json")):
            stem = meta_file.name.removesuffix(".meta.json")
            planned = round(scale * gt.read_meta(src, stem).n_frames)
            assert gt.read_meta(dst, stem).n_frames == planned, (ref.family, stem)
            video = dst / "videos" / f"{stem}.mp4"
            assert abs(sum(1 for _ in read_frames(video)) - planned) <= 1, (ref.family, stem)
            if scale == 1 and family in lengths.PLANNED:  # LENGTH_SCALE = 1 regenerates the suite's own truth
                assert gt.tracks_path(dst, stem).read_bytes() == gt.tracks_path(src, stem).read_bytes()
                assert video.read_bytes() == (original.dataset(family).videos / video.name).read_bytes()
            if family not in lengths.PLANNED:  # planned up to a length constant: a new plan may be drawn
                continue
            if family == "cube_count":  # a new layout, s times as wide, with s times the cubes
                a, b = gt.read_meta(src, stem), gt.read_meta(dst, stem)
                assert b.answers["count"] == round(scale * a.answers["count"]), (ref.family, stem)
                if b.params["setting"] == "main":
                    assert b.params["pan"] == [p * scale for p in a.params["pan"]], (ref.family, stem)
                    assert b.params["max_visible_per_frame"] < b.answers["count"], (ref.family, stem)
                continue
            a = [(e.frame, e.kind, e.ids) for e in gt.read_events(src, stem) if e.kind != "occluded"]
            b = [(e.frame, e.kind, e.ids) for e in gt.read_events(dst, stem) if e.kind != "occluded"]
            if family == "eoc_objects":  # the same earlier moves, more (by the other objects) or fewer; then the
                # marked object's last move, cut at the same point of it
                before, after = gt.read_meta(src, stem), gt.read_meta(dst, stem)
                assert after.params["marked"] == before.params["marked"] and b[-1][2] == a[-1][2], stem
                assert abs(after.answers["ago_s"] - before.answers["ago_s"]) <= 0.1 + 1e-9, stem
                assert after.answers["start_mat"] == before.answers["start_mat"], stem
                if scale > 1:
                    assert b[:len(a) - 1] == a[:-1] and len(b) > len(a), stem
                    assert all(ids != a[-1][2] for _, _, ids in b[len(a) - 1:-1]), stem  # distractors: the others
                elif scale < 1:
                    assert len(b) < len(a) and b[:-1] == a[:len(b) - 1], stem
                continue
            if scale >= 1:  # the same first events, then more
                assert b[:len(a)] == a and (len(b) > len(a)) == (scale > 1), (ref.family, stem)
            else:  # the same first events, then it stops
                assert 0 < len(b) < len(a) and a[:len(b)] == b, (ref.family, stem)
            if family == "morse_light":  # the same first letters, then more or fewer
                word, text = gt.read_meta(src, stem).answers["text"], gt.read_meta(dst, stem).answers["text"]
                assert text.startswith(word) if scale >= 1 else word.startswith(text), (stem, word, text)


def test_cup_drops_questions_read_every_ordinal_a_longer_plan_asks() -> None:
    """A 2x cup_drops plan has more drops than the suite's seven; the oracle reads each ordinal the
    generator writes (no "the seventh ball" read inside "the seventeenth ball")."""
    rows = []
    n = len(cup_drops.ORDINALS)
    for f in range(n + 1):  # frame f > 0: a ball drops into cup f % 3 as the one before leaves its cup
        for c in range(3):
            rows.append(gt.TrackRow(frame=f, time=f / 10, id=c + 1, cls="cup", box=[100 * c, 0, 100 * c + 50, 50],
                                    amodal_box=[100 * c, 0, 100 * c + 50, 50], visible=1.0, in_frame=1.0,
                                    state={"balls": [10 + f] if f and f % 3 == c else []}))
    places = ["left cup", "middle cup", "right cup"]
    alone = [cup_drops.set_text([c]) for c in range(3)]
    for k, word in enumerate(cup_drops.ORDINALS, 1):
        q = f"The three cups look the same. Which cup did the {word} ball dropped in the video fall into?"
        item = Item(id="x", benchmark="vstat", video="x.mp4", question=q, choices=places, answer_type="mcq")
        assert measure.cup_drops(rows, item) == "ABC"[k % 3], word
        q = f"Right after the {word} time a ball went into or came out of a cup, which cups held at least one ball?"
        item = Item(id="x", benchmark="vstat", video="x.mp4", question=q, choices=alone, answer_type="mcq")
        assert measure.cup_drops(rows, item) == "ABC"[k % 3], word
    common.LENGTH_SCALE = 2.0
    try:
        plans = [cup_drops.Plan(rng_for(0, "cup_drops", i)) for i in range(30)]
    finally:
        common.LENGTH_SCALE = None
    drops = [sum(op[0] == "drop" for op in p.ops) for p in plans]
    assert max(drops) > 7 and max(len(p.ops) for p in plans) <= n + 1


def test_failure_probes_attribute_an_injected_wrong_step(tiny_suite: Path, tmp_path: Path) -> None:
    out = tmp_path / "fail"
    proc = subprocess.run([sys.executable, "-m", "statebox.cli", "bench", "variants", str(tiny_suite), "--kind",
                           "failure", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    suite = load_suite(out)
    assert {r.family for r in suite.datasets} == {f"{f}@failure" for f in variants.FAILURE_FAMILIES}
    for ref in suite.datasets:
        items = load_benchmark(ref.bench, ref.data, ref.videos).items
        preds = oracle.predictions(ref.family, suite.family_dir(ref.family), items)
        assert _score(ref, preds, items) == 1.0, ref.family
        rows = {p["id"]: p for p in preds}
        parents = sorted({i.meta["parent"] for i in items})
        steps = [i.meta["probe_step"] for i in items if i.meta["parent"] == parents[0]]
        # event recognition, state update and the final question everywhere; entity where objects look alike
        assert {"event", "update", "final"} <= set(steps), ref.family
        for step in steps:
            wrong = dict(rows)
            victim = next(i for i in items if i.meta["parent"] == parents[0] and i.meta["probe_step"] == step)
            wrong[victim.id] = dict(rows[victim.id], response="Z" if victim.answer_type == "mcq" else "999")
            # the injected error, and a later step that goes wrong with it, are attributed to the first
            correct = {i.id: score_predictions(ref.bench, [i], [wrong[i.id]], n_boot=0, chance=False).metrics["score"] == 1.0
                       for i in items}
            verdict = variants.attribute(items, correct)
            assert verdict[parents[0]] == step
            assert all(verdict[p] == "correct" for p in parents[1:])


@pytest.mark.parametrize("where", ["the suite", "a folder holding it", "a folder in it"])
def test_variants_never_clear_the_suite_they_read(tmp_path: Path, where: str) -> None:
    """`bench variants SUITE --out SUITE` cleared --out first and so removed the suite it was to read, then failed with
    a traceback (found by probe). --out the suite, above it or inside it is one line, and the suite is untouched."""
    from statebox.errors import UserError

    suite = tmp_path / "holder" / "suite"
    suite.mkdir(parents=True)
    (suite / "suite.json").write_text('{"seed": 0}')
    out = {"the suite": suite, "a folder holding it": suite.parent, "a folder in it": suite / "variants"}[where]
    with pytest.raises(UserError, match="give a folder apart from"):
        variants.make_variants(suite, "stretch", out)
    assert (suite / "suite.json").read_text() == '{"seed": 0}'
