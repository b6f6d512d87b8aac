"""Validity probes for a generated suite (what `statebox bench validate` runs).

A generator bug shows up here as a failed probe, not as a silently wrong benchmark:
- every dataset loads through the real loader and every video exists and decodes to
  the frame count its ground truth describes;
- the oracle (answers worked out from tracks.jsonl alone) scores 100% through the
  real scorer;
- cube_count: the max-single-frame counter scores 0% on main and 100% on control
  (CP-Bench A9.4), and every answer is recoverable from the 1 fps sample (each cube at
  least half visible in >= 2 sampled frames);
- streaming_count: each query's count is re-derived from track rows and events
  strictly before the query time;
- no two videos of a family share a layout;
- chance baselines (random, frequency) are reported beside the oracle for scale.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

import av
from pydantic import BaseModel

from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic import oracle
from statebox.benchmarks.synthetic.suite import Suite, load_suite
from statebox.schema import Item, resolve_video
from statebox.scoring import score_predictions

HEADLINE = {"vstat": ("score",), "vcbench": ("gpa", "moc", "uda"), "cpbench": ("accuracy", "control_accuracy")}


class Probe(BaseModel):
    dataset: str
    name: str
    value: str
    expected: str
    ok: bool
    info: bool = False  # informational rows (chance baselines) never fail


class ValidationReport(BaseModel):
    suite: str
    probes: list[Probe]

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.probes)


def _fmt(metrics: dict, keys: tuple[str, ...]) -> str:
    return ", ".join(f"{k}={metrics.get(k):.3f}" if isinstance(metrics.get(k), float) else f"{k}={metrics.get(k)}"
                     for k in keys)


def _video_probe(family: str, family_dir: Path, videos: Path, items: list[Item]) -> Probe:
    bad = []
    for stem in sorted({Path(i.video).stem for i in items}):
        meta = gt.read_meta(family_dir, stem)
        path = resolve_video(Item(id=stem, benchmark="x", video=meta.video, question="", answer_type="text"), videos)
        try:
            with av.open(str(path)) as container:
                frames = sum(1 for _ in container.demux(container.streams.video[0]) if _.size)
        except (OSError, av.error.FFmpegError) as exc:
            bad.append(f"{stem}: {exc}")
            continue
        if frames != meta.n_frames:
            bad.append(f"{stem}: {frames} frames, ground truth says {meta.n_frames}")
    return Probe(dataset=family, name="videos decode, frame counts match tracks", value=bad[0] if bad else "all",
                 expected="all", ok=not bad)


def _layout_probe(family: str, family_dir: Path, items: list[Item]) -> Probe:
    signatures: dict[str, list[str]] = defaultdict(list)
    for stem in sorted({Path(i.video).stem for i in items}):
        params = gt.read_meta(family_dir, stem).params
        signatures[hashlib.sha256(gt.dumps(params).encode()).hexdigest()].append(stem)
    dupes = [v for v in signatures.values() if len(v) > 1]
    return Probe(dataset=family, name="distinct layouts", value=f"{len(signatures)} of {sum(map(len, signatures.values()))}"
                 + (f" (same: {dupes[0]})" if dupes else ""), expected="all distinct", ok=not dupes)


def _cube_probes(family_dir: Path, bench: str, items: list[Item]) -> list[Probe]:
    probes = []
    preds = oracle.predictions("cube_count", family_dir, items,
                               answer=lambda f, d, item, q: str(oracle.max_single_frame(oracle.tracks_for(d, item))))
    report = score_predictions(bench, items, preds, n_boot=0, chance=False)
    main, control = report.metrics.get("accuracy"), report.metrics.get("control_accuracy")
    probes.append(Probe(dataset="cube_count", name="max-single-frame baseline, main", value=f"{main:.3f}",
                        expected="0.000", ok=main == 0.0))
    probes.append(Probe(dataset="cube_count", name="max-single-frame baseline, control", value=f"{control:.3f}",
                        expected="1.000", ok=control == 1.0))
    failures = []
    for item in items:
        if item.labels.get("setting") != "main":
            continue
        meta = gt.read_meta(family_dir, Path(item.video).stem)
        rows = oracle.tracks_for(family_dir, item)
        step = meta.fps // int(meta.params.get("sample_fps", 1))
        sampled = defaultdict(int)
        for r in rows:
            if r.frame % step == 0 and r.visible >= oracle.VISIBLE:
                sampled[r.id] += 1
        if oracle.cube_count(rows, fps_sample=1, fps=meta.fps) != item.target or min(sampled.values(), default=0) < 2 \
                or len(sampled) != item.target:
            failures.append(item.id)
    probes.append(Probe(dataset="cube_count", name="answer recoverable from 1 fps frames (each cube in >= 2)",
                        value=f"{len(failures)} failing" + (f" ({failures[0]})" if failures else ""),
                        expected="0 failing", ok=not failures))
    return probes


def _streaming_probe(family_dir: Path, items: list[Item]) -> Probe:
    """Re-derive each query's count from tracks and from events strictly before the query time."""
    bad = []
    for item in items:
        stem = Path(item.video).stem
        meta = gt.read_meta(family_dir, stem)
        rows = oracle.tracks_for(family_dir, item)
        events = gt.read_events(family_dir, stem)
        subtype, kind = item.labels["counting_subtype"], oracle.kind_of(item.question)
        for q in item.queries:
            t = float(q.time)
            from_tracks = oracle.streaming(rows, subtype, kind, t, meta.fps)
            enters = [e for e in events if e.kind == "enter" and e.data.get("cls") == kind and e.time < t]
            from_events = {"E1-Action": len(enters), "O2-Unique": len({e.ids[0] for e in enters})}.get(subtype, from_tracks)
            if not (q.target == from_tracks == from_events) or t >= meta.duration:
                bad.append(f"{item.id}#{q.index}")
    n = sum(len(i.queries) for i in items)
    return Probe(dataset="streaming_count", name="answers use only the past (tracks and events before t)",
                 value=f"{n - len(bad)} of {n}" + (f" (bad: {bad[0]})" if bad else ""), expected=f"{n} of {n}", ok=not bad)


def validate_suite(dir: Path | Suite) -> ValidationReport:
    suite = dir if isinstance(dir, Suite) else load_suite(Path(dir))
    probes: list[Probe] = []
    for ref in suite.datasets:
        family_dir = suite.family_dir(ref.family)
        loaded = load_benchmark(ref.bench, ref.data, ref.videos)
        missing = [w for w in loaded.warnings if "no video" in w or "does not exist" in w]
        probes.append(Probe(dataset=ref.family, name=f"loads as {ref.bench}", value=f"{len(loaded.items)} items",
                            expected="> 0 items, no missing video", ok=bool(loaded.items) and not missing))
        if not loaded.items:
            continue
        probes.append(_video_probe(ref.family, family_dir, ref.videos, loaded.items))
        preds = oracle.predictions(ref.family, family_dir, loaded.items)
        report = score_predictions(ref.bench, loaded.items, preds, n_boot=0, chance=True)
        keys = tuple(k for k in HEADLINE[ref.bench] if report.metrics.get(k) is not None)
        perfect = all(report.metrics.get(k) == 1.0 for k in keys)
        probes.append(Probe(dataset=ref.family, name="oracle (from tracks) through the scorer",
                            value=_fmt(report.metrics, keys), expected="all 1.000", ok=perfect and bool(keys)))
        chance = getattr(report, "chance", None) or {}
        for kind, metrics in chance.items():
            probes.append(Probe(dataset=ref.family, name=f"chance baseline ({kind})", value=_fmt(metrics, keys),
                                expected="below oracle", ok=True, info=True))
        probes.append(_layout_probe(ref.family, family_dir, loaded.items))
        if ref.family == "cube_count":
            probes.extend(_cube_probes(family_dir, ref.bench, loaded.items))
        if ref.family == "streaming_count":
            probes.append(_streaming_probe(family_dir, loaded.items))
    return ValidationReport(suite=str(suite.root), probes=probes)
