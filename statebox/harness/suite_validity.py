"""Validity probes for a generated suite (what `statebox bench validate` runs).

It lives in harness/, not beside the generator in benchmarks/synthetic/, because it wires the
generator's files to the real loader and the real scorer, and benchmarks and scoring never import
each other (docs/architecture.md, "Layer rules").

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
- every family: the single-frame shortcut (the oracle given only the last frame before
  the question, and only what one frame shows: visible objects and their visible state)
  must score below the oracle where the family is meant to need memory (`MEMORY`);
  the oracle on a 1 fps sample of the truth is reported (which families a 1 fps reader
  cannot solve); a contact sheet (`<family>/contact_sheet.png`, frames of every video)
  is written for a human look;
- ec_beeps: the beeps are found in the decoded audio track at the truth's times, and a
  video-only reading (every flash) never gives the answer;
- chance baselines (random, frequency) are reported beside the oracle for scale; the
  frequency baseline (deterministic) must score below 100%, or the family's answers are
  degenerate (one value per question group) and a constant guess passes for tracking.
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
from statebox.benchmarks.synthetic.video import read_audio, read_frames
from statebox.media_input import AV_CONTAINER_OPTIONS, file_url
from statebox.schema import Item, resolve_video
from statebox.scoring import score_predictions

HEADLINE = {"vstat": ("score",), "vcbench": ("gpa", "moc", "uda"), "cpbench": ("accuracy", "control_accuracy"),
            "ecbench": ("counting_accuracy", "span_miou"), "eocbench": ("accuracy",)}
# State one frame shows (a lamp is lit, a bolt's angle, a ball's side of the line); the rest
# (what a cup hides, which cup has the ball, whether something is moving) needs memory.
VISIBLE_STATE = {"morse_light": {"on"}, "lamp_episodes": {"on"}, "ec_beeps": {"on"}, "bolts": {"angle"},
                 "ec_bolts": {"angle"}, "line_crossing": {"side"}, "swing": {"pose"}, "eoc_objects": {"mat"},
                 "block_count": {"on_stack"}, "streaming_count": {"colour"}, "streaming_window": {"colour"}}
# Families whose questions need memory: the single-frame shortcut must score below the oracle.
MEMORY = ("cube_count", "shell_game", "block_count", "bolts", "streaming_count", "morse_light", "streaming_window",
          "line_crossing", "swing", "lamp_episodes", "cup_drops", "ec_bolts", "ec_beeps", "eoc_objects")


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
            with av.open(file_url(path), container_options=AV_CONTAINER_OPTIONS) as container:
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
        sampled: defaultdict[int, int] = defaultdict(int)
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


def _item_truth(family_dir: Path, item: Item) -> tuple[gt.VideoMeta, list[gt.TrackRow], list[gt.GtEvent]]:
    """An item's video ground truth: its meta, its track rows and its events (what every probe re-derives from)."""
    stem = Path(item.video).stem
    return gt.read_meta(family_dir, stem), oracle.tracks_for(family_dir, item), gt.read_events(family_dir, stem)


def _streaming_probe(family_dir: Path, items: list[Item]) -> Probe:
    """Re-derive each query's count from tracks and from events strictly before the query time."""
    bad = []
    for item in items:
        meta, rows, events = _item_truth(family_dir, item)
        subtype, kind = item.labels["counting_subtype"], oracle.kind_of(item.question)
        for q in item.queries:
            if q.time is None:  # a streaming query always has its time: a generator bug, a failed probe
                bad.append(f"{item.id}#{q.index}")
                continue
            t = float(q.time)
            from_tracks = oracle.streaming(rows, subtype, kind, t, meta.fps)
            enters = [e for e in events if e.kind == "enter" and e.data.get("cls") == kind and e.time < t]
            from_events = {"E1-Action": len(enters), "O2-Unique": len({e.ids[0] for e in enters})}.get(subtype, from_tracks)
            if not (q.target == from_tracks == from_events) or t >= meta.duration:
                bad.append(f"{item.id}#{q.index}")
    n = sum(len(i.queries) for i in items)
    return Probe(dataset="streaming_count", name="answers use only the past (tracks and events before t)",
                 value=f"{n - len(bad)} of {n}" + (f" (bad: {bad[0]})" if bad else ""), expected=f"{n} of {n}", ok=not bad)


def validate_suite(dir: Path | Suite, contact_sheets: bool = True) -> ValidationReport:
    suite = dir if isinstance(dir, Suite) else load_suite(Path(dir))
    probes: list[Probe] = []
    for ref in suite.datasets:
        family_dir = suite.family_dir(ref.family)
        loaded = load_benchmark(ref.bench, ref.data, ref.videos)
        missing = [w for w in loaded.warnings if ("no video" in w and "video_url" not in w) or "does not exist" in w]
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
            if kind == "frequency":
                # deterministic: the most frequent answer of each question group; 100% means every group's
                # answers are one value (a degenerate family: a constant guess is as good as tracking)
                degenerate = bool(keys) and metrics.get(keys[0]) == 1.0  # the headline metric (not EC's spans)
                probes.append(Probe(dataset=ref.family, name="chance baseline (frequency): answers vary",
                                    value=_fmt(metrics, keys), expected="below 1.000", ok=not degenerate))
                continue
            probes.append(Probe(dataset=ref.family, name=f"chance baseline ({kind})", value=_fmt(metrics, keys),
                                expected="below oracle", ok=True, info=True))
        probes.append(_layout_probe(ref.family, family_dir, loaded.items))
        if ref.family == "cube_count":
            probes.extend(_cube_probes(family_dir, ref.bench, loaded.items))
        if ref.family == "streaming_count":
            probes.append(_streaming_probe(family_dir, loaded.items))
        probes.extend(_shortcut_probes(ref.family, ref.bench, family_dir, loaded.items, keys))
        if oracle.family_of(ref.family) == "ec_beeps":
            probes.extend(_audio_probes(ref.family, family_dir, ref.videos, loaded.items))
        if contact_sheets:
            probes.append(_contact_sheet(ref.family, family_dir, ref.videos, loaded.items))
    return ValidationReport(suite=str(suite.root), probes=probes)


# ---- shortcut probes -------------------------------------------------------------------------
def last_frame_before(rows: list[gt.TrackRow], time: float | None) -> int:
    frames = [r.frame for r in rows if time is None or r.time < time]
    return max(frames) if frames else 0


def single_frame_rows(family: str, rows: list[gt.TrackRow], frame: int) -> list[gt.TrackRow]:
    """What one frame shows: objects at least half visible in it, with only their visible state."""
    keep = VISIBLE_STATE.get(oracle.family_of(family), set())
    return [r.model_copy(update={"state": {k: v for k, v in r.state.items() if k in keep}})
            for r in rows if r.frame == frame and r.visible >= oracle.VISIBLE]


def _safe(fn) -> str:
    try:
        return str(fn())
    except Exception:  # noqa: BLE001 - a shortcut that cannot answer gives an empty (wrong) response
        return ""


def shortcut_predictions(kind: str, family: str, family_dir: Path, items: list[Item]) -> list[dict]:
    """`single-frame` or `1fps` predictions for every query (see the module docstring)."""
    out = []
    for item in items:
        meta, rows, events = _item_truth(family_dir, item)
        for q in item.queries:
            if kind == "single-frame":
                view = single_frame_rows(family, rows, last_frame_before(rows, q.time))
                ev = [e for e in events if e.kind == "beep" and e.frame == last_frame_before(rows, q.time)]
            else:
                view = [r for r in rows if r.frame % meta.fps == 0]
                ev = events
            out.append({"id": item.id, "query_index": q.index,
                        "response": _safe(lambda: oracle.answer_from_rows(family, view, item, q.index, meta.fps, ev))})
    return out


def _shortcut_probes(family: str, bench: str, family_dir: Path, items: list[Item], keys: tuple[str, ...]) -> list[Probe]:
    probes = []
    first = keys[0] if keys else HEADLINE[bench][0]
    for kind in ("single-frame", "1fps"):
        preds = shortcut_predictions(kind, family, family_dir, items)
        report = score_predictions(bench, items, preds, n_boot=0, chance=False)
        value = report.metrics.get(first)
        value = float(value) if isinstance(value, (int, float)) else 0.0
        if kind == "single-frame" and oracle.family_of(family) in MEMORY:
            probes.append(Probe(dataset=family, name="single-frame shortcut (needs memory)",
                                value=f"{first}={value:.3f}", expected=f"{first} < 1.000", ok=value < 1.0))
        else:
            probes.append(Probe(dataset=family, name=f"{kind} reader ({'last frame only' if kind == 'single-frame' else 'truth at 1 fps'})",
                                value=f"{first}={value:.3f}", expected="reported", ok=True, info=True))
    return probes


def _audio_probes(family: str, family_dir: Path, videos: Path, items: list[Item]) -> list[Probe]:
    import numpy as np

    bad, video_only_right = [], 0
    for stem in sorted({Path(i.video).stem for i in items}):
        meta = gt.read_meta(family_dir, stem)
        truth = [e.time for e in gt.read_events(family_dir, stem) if e.kind == "beep"]
        samples, rate = read_audio(videos / meta.video)
        found: list[float] = []
        if rate:
            win = rate // 100
            energy = np.sqrt(np.mean(samples[: len(samples) // win * win].reshape(-1, win) ** 2, axis=1))
            loud = energy > 0.05
            found = [i / 100 for i in range(len(loud)) if loud[i] and (i == 0 or not loud[i - 1])]
        # AAC adds a priming delay of a few ms: allow 60 ms
        if len(found) != len(truth) or any(abs(a - b) > 0.06 for a, b in zip(found, truth)):
            bad.append(f"{stem}: beeps at {found[:4]}, truth {truth[:4]}")
        video_only_right += meta.answers.get("flashes") == meta.answers.get("count")
    return [Probe(dataset=family, name="beeps in the audio track at the truth's times", value=bad[0] if bad else "all",
                  expected="all", ok=not bad),
            Probe(dataset=family, name="video-only reading (every flash) gives the answer", value=str(video_only_right),
                  expected="0", ok=video_only_right == 0)]


def _contact_sheet(family: str, family_dir: Path, videos: Path, items: list[Item], per_video: int = 4,
                   max_videos: int = 8) -> Probe:
    import cv2
    import numpy as np

    rows = []
    for stem in sorted({Path(i.video).stem for i in items})[:max_videos]:
        meta = gt.read_meta(family_dir, stem)
        picks = {round(k * (meta.n_frames - 1) / (per_video - 1)) for k in range(per_video)}
        thumbs = [cv2.resize(frame, (160, 107)) for i, (_, frame) in enumerate(read_frames(videos / meta.video))
                  if i in picks]
        while len(thumbs) < per_video:
            thumbs.append(np.zeros((107, 160, 3), np.uint8))
        rows.append(np.hstack(thumbs[:per_video]))
    path = family_dir / "contact_sheet.png"
    if rows:
        cv2.imwrite(str(path), np.vstack(rows))
    return Probe(dataset=family, name="contact sheet", value=str(path.relative_to(family_dir.parent)) if rows else "none",
                 expected="written", ok=bool(rows), info=True)
