"""Failure-mode probes of the scene families (cube_count, eoc_objects, streaming_count, streaming_window).

The whole-suite check (every failure family, the first item of each) is
`test_variants.test_failure_probes_attribute_an_injected_wrong_step`; here every item of the
four scene families: all four steps present, the oracle right on each through the real
scorer, an injected wrong step attributed to that step, the finals being the items' own
questions, the tracker abstaining on every probe by name, and annotated answers that
really are compared with an independent reading of the truth (corrupted events make the
oracle disagree).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import failure, oracle, variants
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.suite import load_suite
from statebox.scoring import score_predictions
from statebox.tracker.runtime.programs import match_rule

SCENES = list(failure.SCENES)


def _variant(suite_dir: Path, out: Path, tasks: list[str]):
    variants.make_variants(suite_dir, "failure", out, tasks=tasks)
    suite = load_suite(out)
    for ref in suite.datasets:
        items = load_benchmark(ref.bench, ref.data, ref.videos).items
        yield ref, suite.family_dir(ref.family), items, oracle.predictions(ref.family, suite.family_dir(ref.family), items)


def _right(item, pred) -> bool:
    return score_predictions("vstat", [item], [pred], n_boot=0, chance=False).metrics["score"] == 1.0


def test_scene_probes_oracle_100_and_each_injected_step_is_attributed(tiny_suite: Path, tmp_path: Path) -> None:
    seen = set()
    for ref, _, items, preds in _variant(tiny_suite, tmp_path / "fail", SCENES):
        family = oracle.family_of(ref.family)
        seen.add(family)
        assert ref.bench == "vstat"
        assert score_predictions("vstat", items, preds, n_boot=0, chance=False).metrics["score"] == 1.0, family
        rows = {p["id"]: p for p in preds}
        right = {i.id: _right(i, rows[i.id]) for i in items}
        assert all(right.values()), [k for k, v in right.items() if not v]
        parents = sorted({i.meta["parent"] for i in items})
        assert parents, family
        for parent in parents:
            mine = [i for i in items if i.meta["parent"] == parent]
            assert [i.meta["probe_step"] for i in mine] == list(variants.STEPS), (family, parent)
            assert variants.attribute(items, right)[parent] == "correct"
            for k, victim in enumerate(mine):
                wrong = dict(right)
                # the injected step, and every later one (a wrong state spoils what follows), fail
                for later in mine[k:]:
                    response = "Z" if later.answer_type == "mcq" else "999"
                    wrong[later.id] = _right(later, dict(rows[later.id], response=response))
                assert variants.attribute(items, wrong)[parent] == victim.meta["probe_step"], (family, parent)
    assert seen == set(SCENES)


def test_scene_finals_are_the_items_own_questions(tiny_suite: Path, tmp_path: Path) -> None:
    """cube_count: main-setting videos only (the control shot shows every cube all along); eoc_objects:
    the single-choice rows; streaming: one final per question, its last query point's count."""
    suite = load_suite(tiny_suite)
    for ref, _, items, _ in _variant(tiny_suite, tmp_path / "fail", SCENES):
        family = oracle.family_of(ref.family)
        finals = {i.meta["parent"]: i for i in items if i.meta["probe_step"] == "final"}
        source = suite.datasets[[oracle.family_of(r.family) for r in suite.datasets].index(family)]
        raw = [json.loads(line) for line in source.data.read_text().splitlines() if line.strip()]
        if family == "cube_count":
            want = {r["id"]: r["count"] for r in raw if r["setting"] == "main"}
            assert {p: f.target for p, f in finals.items()} == want
        elif family == "eoc_objects":
            want = {r["idx"]: r["answer"][0].upper() for r in raw if r["choice_type"] == "single-choice"}
            assert {p: f.target for p, f in finals.items()} == want
            assert all("<object 0> (the object marked with a red box in the last frame)" in f.question
                       for f in finals.values())
        else:
            last = {}
            for r in raw:
                last[r["id"]] = (r["query_time"], r["count"])
            assert {p: (f.meta["probe_time"], f.target) for p, f in finals.items()} == last


def test_tracker_rules_abstain_by_name_on_every_probe(tiny_suite: Path, tmp_path: Path) -> None:
    """The tracker answers a probe with no program: each matches its named `failure_probe` abstention;
    the finals match a rule (a program, or a named abstention such as the EOC object prompt), never
    the catch-all `none`."""
    for ref, _, items, _ in _variant(tiny_suite, tmp_path / "fail", SCENES):
        for item in items:
            found = match_rule(item.question)
            assert found is not None, (ref.family, item.question)
            if item.meta["probe_step"] != "final":
                assert found[0].name == "failure_probe", (ref.family, item.question, found[0].name)


def test_annotations_from_events_are_checked_against_the_tracks(tiny_suite: Path, tmp_path: Path) -> None:
    """eoc_objects and streaming_count take the probes' answers from the events file and the oracle's
    from the tracks: an events file that lies (each move done by another object, towards another mat;
    each entry written twice) makes the oracle disagree with the annotation."""
    copy = tmp_path / "suite"
    shutil.copytree(tiny_suite, copy)
    suite = load_suite(copy)
    for ref in suite.datasets:
        family = oracle.family_of(ref.family)
        if family not in ("eoc_objects", "streaming_count"):
            continue
        for path in sorted((suite.family_dir(ref.family) / "gt").glob("*.events.jsonl")):
            events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            lie = []
            for e in events:
                if e["kind"] == "move":
                    lie.append(dict(e, ids=[e["ids"][0] % 3 + 1], data=dict(e["data"], to=e["data"]["frm"])))
                else:
                    lie.append(e)
                    if e["kind"] == "enter":
                        lie.append(dict(e, frame=e["frame"] + 1, time=round((e["frame"] + 1) / 10, 4)))
            path.write_text("".join(gt.dumps(e) + "\n" for e in lie))
    for ref, _, items, preds in _variant(copy, tmp_path / "fail", ["eoc_objects", "streaming_count"]):
        rows = {p["id"]: p for p in preds}
        wrong = {i.meta["probe_step"] for i in items if not _right(i, rows[i.id])}
        assert wrong and wrong <= {"event", "entity", "update"}, (ref.family, wrong)


def test_variants_of_another_suite_to_the_same_out_read_that_suite(tiny_suite: Path, tmp_path: Path) -> None:
    """`--tasks` writes a subset suite beside `--out` with links to the source folders; a later run on
    another suite with the same `--out` must follow the new suite, not the links the first run left."""
    other = tmp_path / "other"
    shutil.copytree(tiny_suite, other)
    family = other / "cube_count"
    manifest = family / "cpbench_manifest.jsonl"
    main = json.loads(next(line for line in manifest.read_text().splitlines() if '"main"' in line))
    old, new = Path(main["video"]).stem, "cube_count_main_0099"  # the other suite: one main video, another name
    for path in list((family / "gt").glob(f"{old}.*")) + [family / "videos" / f"{old}.mp4"]:
        path.rename(path.with_name(path.name.replace(old, new)))
    manifest.write_text(gt.dumps(dict(main, id=new, video=f"{new}.mp4")) + "\n")
    out = tmp_path / "fail"
    parents = []
    for source in (tiny_suite, other):
        variants.make_variants(source, "failure", out, tasks=["cube_count"])
        ref = load_suite(out).datasets[0]
        items = load_benchmark(ref.bench, ref.data, ref.videos).items
        assert _score_all(ref, items) == 1.0
        parents.append(sorted({i.meta["parent"] for i in items}))
    assert parents[1] == [new] and new not in parents[0]


def _score_all(ref, items) -> float:
    preds = oracle.predictions(ref.family, load_suite(ref.data.parent.parent).family_dir(ref.family), items)
    return score_predictions("vstat", items, preds, n_boot=0, chance=False).metrics["score"]
