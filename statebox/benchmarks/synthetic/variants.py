"""Diagnostic variants of a generated suite: the same items under a changed condition.

`statebox bench variants SUITE --kind KIND --out DIR` writes a suite folder (suite.json,
one dataset per family, ground truth beside it) that `statebox run --suite DIR` runs
like any suite. Dataset labels are `<family>@<kind>` (`@<pct>` for durations), so the
oracle, the validator and the reports know the family.

- `transcript`: VSTAT's text-only condition. The video is replaced by a text account
  of its events, written from the ground truth (`render_transcript`), put before the
  question; the video file is a blank clip of the same length (so query times stay
  valid). The account is lossless for every answer: `transcript_answer` rebuilds the
  track rows from the text alone and runs the oracle on them, which scores 100%.
  Streaming (VCBench) questions keep their query points; the account covers the whole
  video, so each point's answer counts only lines before its query time.
- `stretch --factor K`: the same scene K times slower, re-rendered (`_rerender`: the
  family's generator runs again with `clip.TIME_SCALE = K`, so motion is smooth and the
  truth has every in-between frame); where the re-rendered truth does not equal the
  original at every original frame (a family whose layout checks read the frame count),
  each original frame is held for K frames instead (suite.json's `variant` lists which
  videos were re-rendered and which held). Either way every event's frame and time
  scale by exactly K (frame rate unchanged) and no answer changes. Query times become (K k + 0.5) / fps for a cut after original
  frame k; "the past W seconds" becomes K W seconds. Answers that are times (EOC-Bench
  open-ended) and EC-Bench evidence spans are re-derived from the stretched truth.
- `duration`: the same task at several lengths for a score-vs-duration curve. Every
  family with a length to scale is generated again at 0.75/1/1.5/2 times its length from
  the same random stream (`lengths.py`): families planned up to a length constant
  (`lengths.KNOBS`) and families whose plan reads `families.common.LENGTH_SCALE`
  (`lengths.PLANNED`). Nothing is cut: the generator writes its own answers and query
  points; a length at which it finds no valid plan is left out and listed under
  `skipped`. Dataset entries carry `fraction` (the length relative to the original).
- `failure`: failure-mode probes (VSTAT's three failure kinds): for each item of a family
  with an event chain (`FAILURE_FAMILIES`), extra questions on the same video isolate
  event recognition (how many events of the family's kind, in the video or in a time
  window), entity association (which entity the k-th event involved; families with one
  object skip it) and state update (the state right after the k-th event), beside the
  final question (a non-VSTAT family's question becomes a VSTAT doc); all written as
  VSTAT docs. cube_count, eoc_objects and the streaming families have no chain: their
  probes and finals are read from the scene (`failure.SCENES`). `attribute` names the
  first failing step of each item from per-question correctness. See `failure.py` for
  the chains.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic import clip as clip_mod
from statebox.benchmarks.synthetic import lengths, oracle
from statebox.benchmarks.synthetic import failure
from statebox.benchmarks.synthetic.families import FAMILIES, family_module
from statebox.benchmarks.synthetic.families.common import vstat_doc
from statebox.benchmarks.synthetic.families.cup_drops import set_text
from statebox.benchmarks.synthetic.families.ec_beeps import beep_track
from statebox.benchmarks.synthetic.families.ec_bolts import turn_runs
from statebox.benchmarks.synthetic.families.ec_common import annotation_text
from statebox.benchmarks.synthetic.suite import CLASSES_FILE, SUITE_FILE, load_suite
from statebox.benchmarks.synthetic.video import read_frames, write_mp4
from statebox.errors import UserError
from statebox.schema import Item
from statebox.userfiles import make_output_folder

KINDS = ("transcript", "stretch", "duration", "failure")
HEAD = "TEXT ACCOUNT OF THE VIDEO"
QUESTION_MARK = "\nQuestion: "


# ---- transcript ------------------------------------------------------------------------------
def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def render_transcript(meta: gt.VideoMeta, rows: list[gt.TrackRow], events: list[gt.GtEvent]) -> str:
    """A text account of the video from its truth: objects, when each is in view / visible, its state
    changes, its place in the last frame, and the sound events. One line per change, `f<frame>` first."""
    lines = [f"{HEAD} (written from its ground truth; the video itself is not shown)",
             f"fps {meta.fps}, frames {meta.n_frames}, duration {meta.duration:g} s, size {meta.width}x{meta.height}. "
             "A line 'fN' happened at frame N (time N / fps seconds). 'in view' = at least half of the object is in "
             "the picture; 'visible' = at least half of it shows (not hidden).",
             ]
    per: dict[int, list[gt.TrackRow]] = {}
    for r in sorted(rows, key=lambda r: (r.id, r.frame)):
        per.setdefault(r.id, []).append(r)
    lines.append("objects: " + ", ".join(f"#{oid} {rs[0].cls}" for oid, rs in sorted(per.items())))
    body: list[tuple[int, int, str]] = []
    last_frame = meta.n_frames - 1
    for oid, rs in sorted(per.items()):
        prev: gt.TrackRow | None = None
        numeric: dict[str, list[tuple[int, float]]] = {}
        for r in rs:
            if prev is None or r.frame != prev.frame + 1:
                if prev is not None:
                    body.append((prev.frame + 1, oid, "gone"))
                body.append((r.frame, oid, "appears"))
                prev_flags = (False, False)
                prev_state: dict[str, Any] = {}
            else:
                prev_flags = (prev.in_frame >= oracle.VISIBLE, prev.visible >= oracle.VISIBLE)
                prev_state = prev.state
            flags = (r.in_frame >= oracle.VISIBLE, r.visible >= oracle.VISIBLE)
            if flags[0] != prev_flags[0]:
                body.append((r.frame, oid, "in view" if flags[0] else "out of view"))
            if flags[1] != prev_flags[1]:
                body.append((r.frame, oid, "visible" if flags[1] else "hidden"))
            for key, value in r.state.items():
                if _num(value):
                    numeric.setdefault(key, []).append((r.frame, float(value)))
                    if key not in prev_state:
                        body.append((r.frame, oid, f"{key} = {value}"))
                elif key not in prev_state or prev_state[key] != value:
                    body.append((r.frame, oid, f"{key} = {json.dumps(value)}"))
            if r.frame == last_frame:
                body.append((r.frame, oid, f"last frame box {json.dumps(r.box)} amodal {json.dumps(r.amodal_box)}"))
            prev = r
        if prev is not None and prev.frame < last_frame:
            body.append((prev.frame + 1, oid, "gone"))
        for key, series in numeric.items():
            for a, b, va, vb in _runs(series):
                body.append((a, oid, f"{key} {va:g} -> {vb:g} until f{b}"))
    for e in events:
        body.append((e.frame, 0, f"event {e.kind} ids {json.dumps(e.ids)}"))
    for frame, oid, text in sorted(body, key=lambda x: (x[0], x[1])):
        lines.append(f"f{frame} {'#' + str(oid) + ' ' if oid else ''}{text}")
    return "\n".join(lines)


def _runs(series: list[tuple[int, float]]) -> list[tuple[int, int, float, float]]:
    """Monotone runs (start frame, end frame, start value, end value) of a numeric state."""
    out = []
    i = 1
    while i < len(series):
        step = np.sign(series[i][1] - series[i - 1][1])
        if step == 0 or series[i][0] != series[i - 1][0] + 1:
            i += 1
            continue
        j = i
        while j + 1 < len(series) and series[j + 1][0] == series[j][0] + 1 and \
                np.sign(series[j + 1][1] - series[j][1]) == step:
            j += 1
        out.append((series[i - 1][0], series[j][0], series[i - 1][1], series[j][1]))
        i = j + 1
    return out


LINE = re.compile(r"^f(\d+) (?:#(\d+) )?(.*)$")


def parse_transcript(text: str) -> tuple[list[gt.TrackRow], list[gt.GtEvent], int]:
    """Track rows and events rebuilt from a transcript (what the text oracle reads)."""
    head = re.search(r"fps (\d+), frames (\d+)", text)
    if head is None:
        raise ValueError("a transcript without its 'fps N, frames M' line")
    fps, n_frames = int(head.group(1)), int(head.group(2))
    classes = dict((int(a), b) for a, b in re.findall(r"#(\d+) ([a-z_]+)", text.split("\n")[2]))
    changes: dict[int, dict[int, list[str]]] = {}
    events = []
    for line in text.splitlines()[3:]:
        m = LINE.match(line)
        if not m:
            continue
        frame, oid, what = int(m.group(1)), m.group(2), m.group(3)
        if oid is None:
            ev = re.match(r"event (\S+) ids (.*)$", what)
            if ev:
                events.append(gt.GtEvent(time=round(frame / fps, 4), frame=frame, kind=ev.group(1),
                                         ids=json.loads(ev.group(2))))
            continue
        changes.setdefault(int(oid), {}).setdefault(frame, []).append(what)
    rows: list[gt.TrackRow] = []
    for oid, by_frame in changes.items():
        present, in_view, visible, state = False, False, False, {}
        ramps: list[tuple[str, int, int, float, float]] = []
        boxes: dict[int, tuple[Any, Any]] = {}
        for frame, whats in by_frame.items():
            for what in whats:
                ramp = re.match(r"(\w+) (\S+) -> (\S+) until f(\d+)$", what)
                if ramp:
                    ramps.append((ramp.group(1), frame, int(ramp.group(4)), float(ramp.group(2)), float(ramp.group(3))))
                box = re.match(r"last frame box (.*) amodal (.*)$", what)
                if box:
                    boxes[frame] = (json.loads(box.group(1)), json.loads(box.group(2)))
        for f in range(n_frames):
            for what in by_frame.get(f, []):
                if what == "appears":
                    present, in_view, visible = True, False, False
                elif what == "gone":
                    present = False
                elif what in ("in view", "out of view"):
                    in_view = what == "in view"
                elif what in ("visible", "hidden"):
                    visible = what == "visible"
                else:
                    kv = re.match(r"(\w+) = (.*)$", what)
                    if kv:
                        state[kv.group(1)] = json.loads(kv.group(2))
            for key, a, b, va, vb in ramps:
                if a <= f <= b:
                    state[key] = round(va + (vb - va) * (f - a) / (b - a), 4)
            if present:
                box, amodal = boxes.get(f, (None, None))
                rows.append(gt.TrackRow(frame=f, time=round(f / fps, 4), id=oid, cls=classes.get(oid, "object"),
                                        box=box, amodal_box=amodal, visible=1.0 if visible else 0.0,
                                        in_frame=1.0 if in_view else 0.0, state=dict(state)))
    return rows, events, fps


def transcript_answer(family: str, item: Item, query_index: int = 0) -> str:
    """The oracle's answer from the transcript in the question alone (no video, no truth files)."""
    text, _, question = item.question.partition(QUESTION_MARK)
    rows, events, fps = parse_transcript(text)
    plain = item.model_copy(update={"question": question})
    return oracle.answer_from_rows(family, rows, plain, query_index, fps, events)


def transcript_clips(family: str, item: Item) -> str | None:
    """EC-Bench evidence spans from the transcript alone."""
    text, _, question = item.question.partition(QUESTION_MARK)
    rows, events, fps = parse_transcript(text)
    return oracle.clips_from_rows(family, rows, item.model_copy(update={"question": question}), fps, events)


# ---- shared writing --------------------------------------------------------------------------
def _read_rows(bench: str, path: Path) -> Any:
    if bench == "vstat":
        return json.loads(path.read_text())
    if bench == "ecbench":
        return list(csv.DictReader(io.StringIO(path.read_text())))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_rows(bench: str, path: Path, rows: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if bench == "vstat":
        path.write_text(gt.dumps(rows) + "\n")
    elif bench == "ecbench":

        path.write_text(annotation_text(rows))
    else:
        path.write_text("".join(gt.dumps(r) + "\n" for r in rows))


def _flat(bench: str, rows: Any) -> list[dict]:
    return [d for docs in rows["data"].values() for d in docs] if bench == "vstat" else rows


def _video_key(bench: str) -> str:
    return "video" if bench == "cpbench" else "video_path"


def _prepare(out: Path) -> Path:
    out = Path(out).resolve()
    make_output_folder(out, "variant suite folder")
    if any(out.iterdir()) and not (out / SUITE_FILE).exists():
        raise UserError(f"{out} is not empty and holds no {SUITE_FILE}: refusing to write variants there")
    shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def _finish(src_root: Path, out: Path, datasets: list[dict], kind: str, extra: dict) -> Path:
    raw = json.loads((src_root / SUITE_FILE).read_text())
    if (src_root / CLASSES_FILE).exists():
        shutil.copy(src_root / CLASSES_FILE, out / CLASSES_FILE)
    suite = {"seed": raw["seed"], "size": raw["size"], "datasets": datasets, "classes": raw.get("classes", []),
             "variant": dict(extra, kind=kind, source=str(src_root))}
    (out / SUITE_FILE).write_text(gt.dumps(suite) + "\n")
    return out / SUITE_FILE


def _copy_gt(src: Path, dst: Path, stems: list[str] | None = None) -> None:
    (dst / "gt").mkdir(parents=True, exist_ok=True)
    for p in sorted((src / "gt").glob("*")):
        if stems is None or p.name.split(".")[0] in stems:
            shutil.copy(p, dst / "gt" / p.name)


def _blank(path: Path, seconds: float) -> None:
    frames = [np.full((64, 64, 3), 96, np.uint8)] * (int(math.ceil(seconds)) + 1)
    write_mp4(path, frames, 1)


# ---- kinds -----------------------------------------------------------------------------------
def make_transcript(suite_dir: Path, out: Path) -> Path:
    suite = load_suite(suite_dir)
    out = _prepare(out)
    datasets = []
    for ref in suite.datasets:
        src = suite.family_dir(ref.family)
        label = f"{oracle.family_of(ref.family)}@transcript"
        dst = out / label
        _copy_gt(src, dst)
        rows = _read_rows(ref.bench, ref.data)
        texts: dict[str, str] = {}
        for row in _flat(ref.bench, rows):
            video = row[_video_key(ref.bench)]
            stem = Path(video).stem
            if stem not in texts:
                meta = gt.read_meta(src, stem)
                texts[stem] = render_transcript(meta, gt.read_tracks(src, stem), gt.read_events(src, stem))
                _blank(dst / "videos" / video, meta.duration)
            question = row.get("question") or "How many cubes are present in the scene? Provide your response as a single numerical value."
            row["question"] = texts[stem] + "\n" + QUESTION_MARK.strip("\n") + " " + question
        _write_rows(ref.bench, dst / ref.data.name, rows)
        datasets.append({"family": label, "bench": ref.bench, "data": f"{label}/{ref.data.name}",
                         "videos": f"{label}/videos"})
    return _finish(suite.root, out, datasets, "transcript", {})


def _stretch_truth(src: Path, dst: Path, stem: str, k: int) -> gt.VideoMeta:
    meta = gt.read_meta(src, stem)
    rows = []
    for r in gt.read_tracks(src, stem):
        for j in range(k):
            f = r.frame * k + j
            rows.append(r.model_copy(update={"frame": f, "time": round(f / meta.fps, 4)}))
    gt.write_jsonl(gt.tracks_path(dst, stem), [r.model_dump(by_alias=True, exclude_none=False) for r in
                                               sorted(rows, key=lambda r: (r.frame, r.id))])
    events = []
    for e in gt.read_events(src, stem):
        data = {key: (v * k if key.endswith("frame") and isinstance(v, int) else v) for key, v in e.data.items()}
        events.append({"time": round(e.time * k, 4), "frame": e.frame * k, "kind": e.kind, "ids": e.ids, "data": data})
    gt.write_jsonl(gt.events_path(dst, stem), events)
    new = meta.model_copy(update={"n_frames": meta.n_frames * k, "duration": round(meta.duration * k, 4),
                                  "params": dict(meta.params, stretch=k)})
    gt.meta_path(dst, stem).write_text(gt.dumps(new.model_dump()) + "\n")
    return new


def make_stretch(suite_dir: Path, out: Path, factor: int = 2) -> Path:
    if factor < 1:
        raise UserError("--factor must be a whole number >= 1")
    suite = load_suite(suite_dir)
    out = _prepare(out)
    datasets = []
    how: dict[str, list[str]] = defaultdict(list)
    held: dict[str, list[str]] = defaultdict(list)
    for ref in suite.datasets:
        family = oracle.family_of(ref.family)
        src = suite.family_dir(ref.family)
        label = f"{family}@stretch{factor}"
        dst = out / label
        rows = _read_rows(ref.bench, ref.data)
        done: set[str] = set()
        for row in _flat(ref.bench, rows):
            video = row[_video_key(ref.bench)]
            stem = Path(video).stem
            if stem not in done:
                done.add(stem)
                meta = _stretch_truth(src, dst, stem, factor)
                audio = None
                if family == "ec_beeps":

                    audio = beep_track(meta.n_frames, [e.frame for e in gt.read_events(dst, stem) if e.kind == "beep"])
                if _rerender(family, suite, src, dst, stem, video, factor, audio):
                    how[family].append(stem)
                else:  # the hold fallback: each original frame K times
                    held[family].append(stem)
                    frames = [f for _, f in read_frames(ref.videos / video) for _ in range(factor)]
                    write_mp4(dst / "videos" / video, frames, meta.fps, audio=audio)
            if ref.bench == "vcbench":
                k = round(row["query_time"] * 10 - 0.5)
                row["query_time"] = round((k * factor + 0.5) / 10, 2)
                row["question"] = re.sub(r"past (\d+) seconds", lambda m: f"past {int(m.group(1)) * factor} seconds",
                                         row["question"])
            if ref.bench == "eocbench":
                meta = gt.read_meta(dst, stem)
                row["frame_number"], row["video_time"] = meta.n_frames - 1, round(meta.n_frames / meta.fps, 1)
        _write_rows(ref.bench, dst / ref.data.name, rows)
        _rederive(ref.bench, family, dst, ref.data.name, rows, times_only=True)
        datasets.append({"family": label, "bench": ref.bench, "data": f"{label}/{ref.data.name}",
                         "videos": f"{label}/videos"})
    return _finish(suite.root, out, datasets, "stretch", {"factor": factor, "rerendered": dict(how),
                                                           "held": dict(held)})


def _rerender(family: str, suite: Any, src: Path, dst: Path, stem: str, video: str, factor: int,
              audio: np.ndarray | None) -> bool:
    """Write dst's video re-rendered `factor` times slower (smooth motion); False when that is not the same scene.

    The family's generator runs again with `clip.TIME_SCALE = factor` into a scratch folder, from
    the same (seed, family, index) stream. Its per-frame truth must equal the original's at every
    original frame (new frame K f == old frame f: boxes, visibility and states): a family whose
    layout checks read the frame count could otherwise pick another layout. If it matches, the
    re-rendered tracks replace the held ones in dst (truth for every in-between frame) and the
    scratch video is moved in as it is (encoded once), unless `audio` (the beeps at the scaled
    times) must be muxed in, which re-encodes its frames."""
    index_text = stem.rsplit("_", 1)[-1]
    if family not in FAMILIES or not index_text.isdigit():
        return False
    module = family_module(family)
    before = clip_mod.TIME_SCALE
    with tempfile.TemporaryDirectory(prefix="stretch-") as scratch:
        scratch_dir = Path(scratch)
        clip_mod.TIME_SCALE = factor
        try:
            module.make_video(scratch_dir, suite.seed, int(index_text), module.n_videos(suite.size))
        except Exception:  # noqa: BLE001 - a generator that cannot run slower: hold frames instead
            return False
        finally:
            clip_mod.TIME_SCALE = before
        if not gt.tracks_path(scratch_dir, stem).exists():
            return False
        new_rows = gt.read_tracks(scratch_dir, stem)
        old = {(r.frame, r.id): r.model_dump(exclude={"frame", "time"}) for r in gt.read_tracks(src, stem)}
        got = {(r.frame // factor, r.id): r.model_dump(exclude={"frame", "time"}) for r in new_rows
               if r.frame % factor == 0}
        if old != got:
            return False
        gt.write_jsonl(gt.tracks_path(dst, stem), [r.model_dump(by_alias=True, exclude_none=False) for r in new_rows])
        target = dst / "videos" / video
        target.parent.mkdir(parents=True, exist_ok=True)
        if audio is None:
            shutil.move(str(scratch_dir / "videos" / video), target)
        else:
            frames = [f for _, f in read_frames(scratch_dir / "videos" / video)]
            write_mp4(target, frames, gt.read_meta(dst, stem).fps, audio=audio)
    return True


def _rederive(bench: str, family: str, dst: Path, name: str, rows: Any, times_only: bool = False) -> None:
    """Re-derive answers (or, with times_only, only time-valued answers and EC-Bench spans) from dst's truth."""
    items = {i.id: i for i in load_benchmark(bench, dst / name, dst / "videos").items}
    for row in _flat(bench, rows):
        if bench == "ecbench":
            item = items[row["question_id"]]
            row["clips"] = oracle.oracle_clips(family, dst, item) or ""
            if not times_only:
                row["answer"] = oracle.oracle_response(family, dst, item)
        elif bench == "eocbench":
            item = items[str(row["idx"])]
            if row["choice_type"] == "open-ended":
                row["answer"] = [f"{oracle.oracle_response(family, dst, item)}s"]
        elif not times_only and bench == "vcbench":
            item = items[row["id"]]
            row["count"] = int(oracle.oracle_response(family, dst, item, row["query_index"]))
        elif not times_only and bench == "cpbench":
            row["count"] = int(oracle.oracle_response(family, dst, items[row["id"]]))
        elif not times_only and bench == "vstat":
            item = items[row["id"]]
            row["answer"] = oracle.oracle_response(family, dst, item)
    _write_rows(bench, dst / name, rows)


def make_duration(suite_dir: Path, out: Path) -> Path:
    suite = load_suite(suite_dir)
    out = _prepare(out)
    datasets = []
    generated: list[str] = []
    skipped: list[str] = []
    for ref in suite.datasets:
        family = oracle.family_of(ref.family)
        if not lengths.regenerated(family):  # no length to scale (lengths.py says which)
            continue
        for scale in lengths.SCALES:  # generated again at each length (lengths.py), shorter and longer
            label = f"{family}@{round(scale * 100)}"
            dst = out / label
            dst.mkdir(parents=True)
            made, why = lengths.generate(family, dst, suite.seed, suite.size, scale)
            skipped += why
            if made:
                module = family_module(family)
                generated.append(label)
                datasets.append({"family": label, "bench": module.BENCH, "data": f"{label}/{module.ANNOTATION}",
                                 "videos": f"{label}/videos", "fraction": scale})
            else:
                shutil.rmtree(dst)
    return _finish(suite.root, out, datasets, "duration", {"scales": list(lengths.SCALES), "generated": generated,
                                                            "skipped": skipped})


def _subset(suite_dir: Path, tasks: list[str], where: Path) -> Path:
    """A suite.json naming only `tasks`, pointing at the original folders (nothing is copied)."""
    suite = load_suite(suite_dir)
    raw = json.loads((suite.root / SUITE_FILE).read_text())
    raw["datasets"] = [dict(d, data=str(suite.root / d["data"]), videos=str(suite.root / d["videos"]))
                       for d in raw["datasets"] if oracle.family_of(d["family"]) in tasks]
    where.mkdir(parents=True, exist_ok=True)
    for d in raw["datasets"]:
        link = where / d["family"]
        if link.is_symlink() and link.resolve() != (suite.root / d["family"]).resolve():
            link.unlink()  # left by variants of another suite written to the same --out
        if not link.exists():
            link.symlink_to(suite.root / d["family"], target_is_directory=True)
    (where / SUITE_FILE).write_text(gt.dumps(raw) + "\n")
    return where


# ---- failure modes ---------------------------------------------------------------------------
STEPS = ("event", "entity", "update", "final")
ORDINAL = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
FAILURE_FAMILIES = ("bolts", "cup_drops", "ec_bolts", "shell_game", "block_count", "morse_light", "line_crossing",
                    "swing", "lamp_episodes", "ec_beeps",  # the families with an event chain (see failure.py)
                    "cube_count", "eoc_objects", "streaming_count", "streaming_window")  # failure.SCENES


def _bolt_probes(src: Path, stem: str, rng_pick: int, loosen: bool = False) -> list[tuple[str, str, Any, list[str]]]:
    """(step, question, answer, choices) for one bolts video (`loosen`: the update probe counts loosenings,
    for an item that asks about them: EC-Bench's counter-clockwise row)."""

    rows = gt.read_tracks(src, stem)
    frames = gt.frames_of(rows)
    last = frames[max(frames)]
    order = sorted((r for r in last if r.cls == "bolt"), key=lambda r: r.amodal()[0] + r.amodal()[2])
    place = {r.id: i + 1 for i, r in enumerate(order)}
    angles = {oid: [float(r.state["angle"]) for r in sorted(rows, key=lambda r: r.frame) if r.id == oid] for oid in place}
    runs = turn_runs(angles)
    k = 1 + rng_pick % len(runs)
    oid, _, _, end = runs[k - 1]
    upto = sum(1 for r in runs[:k] if (r[1] > 0 if loosen else r[1] < 0))
    action = "loosening" if loosen else "tightening"
    return [
        ("event", "How many times is a bolt turned in the video (in either direction)?", len(runs), []),
        ("entity", f"Counting bolts from the left (1 = leftmost), which bolt is turned in the {ORDINAL[k - 1]} turn?",
         place[oid], []),
        ("update", f"Right after the {ORDINAL[k - 1]} turn of a bolt ends, how many {action} actions have happened "
                   "so far? (Turning a bolt clockwise, seen from above, tightens it.)", upto, []),
    ]


def _cup_probes(src: Path, stem: str, rng_pick: int) -> list[tuple[str, str, Any, list[str]]]:

    events = [e for e in gt.read_events(src, stem) if e.kind in ("drop", "lift")]
    k = 1 + rng_pick % len(events)
    cup = events[k - 1].ids[1]
    rows = gt.read_tracks(src, stem)
    frames = gt.frames_of(rows)
    after = frames[events[k - 1].frame]
    xs = {r.id: r.amodal()[0] + r.amodal()[2] for r in frames[max(frames)] if r.cls == "cup"}
    names = {oid: ("left", "middle", "right")[i] for i, oid in enumerate(sorted(xs, key=xs.__getitem__))}
    held = [("left", "middle", "right").index(names[r.id]) for r in after if r.cls == "cup" and r.state.get("balls")]
    subsets = ["none of them", "left only", "middle only", "right only", "left and middle", "left and right",
               "middle and right", "all three"]
    answer = set_text(held)
    choices = [answer] + [s for s in subsets if s != answer][:3]
    choices = choices[rng_pick % 4:] + choices[:rng_pick % 4]
    return [
        ("event", "How many times does a ball go into or come out of a cup in the video?", len(events), []),
        ("entity", f"Which cup is involved the {ORDINAL[k - 1]} time a ball goes into or comes out of a cup?",
         f"{names[cup]} cup", ["left cup", "middle cup", "right cup"]),
        ("update", f"Right after the {ORDINAL[k - 1]} time a ball went into or came out of a cup, which cups held at "
                   "least one ball?", answer, choices),
    ]


def _final_doc(family: str, bench: str, row: dict, src: Path) -> dict | None:
    """The item's own question as the chain's final step, as a VSTAT doc (None: not a whole-video question)."""
    if family in failure.SCENES:
        return failure.final_doc(family, row, src)
    if bench == "vstat":
        return dict(row)

    if bench == "ecbench":
        stem = Path(row["video_path"]).stem
        return vstat_doc(family, row["question_id"], row["video_path"], row["question"], int(row["answer"]),
                         element="Count", structure="Atomic") | {"video_id": stem}
    if bench == "vcbench":
        if row["query_index"] != 0:
            return None
        stem = Path(row["video_path"]).stem
        meta = gt.read_meta(src, stem)
        total = failure.count_at(family, gt.read_tracks(src, stem), gt.read_events(src, stem), meta.duration + 1, meta.fps)
        question = row["question"] + failure.CHAINS[family].final_note
        return vstat_doc(family, row["id"], row["video_path"], question, int(total), element="Count",
                         structure="Atomic") | {"video_id": stem}
    return None


def make_failure(suite_dir: Path, out: Path) -> Path:

    suite = load_suite(suite_dir)
    out = _prepare(out)
    datasets = []
    for ref in suite.datasets:
        family = oracle.family_of(ref.family)
        if family not in FAILURE_FAMILIES:
            continue
        src = suite.family_dir(ref.family)
        label = f"{family}@failure"
        dst = out / label
        _copy_gt(src, dst)
        shutil.copytree(ref.videos, dst / "videos")
        docs = []
        for n, row in enumerate(_flat(ref.bench, _read_rows(ref.bench, ref.data))):
            doc = _final_doc(family, ref.bench, row, src)
            if doc is None:
                continue
            stem = Path(doc["video_path"]).stem
            parent = doc["id"]
            made: list[tuple[str, str, Any, list[str], dict[str, Any]]]
            if family in ("bolts", "ec_bolts"):
                loosen = "counter-clockwise" in doc["question"] or "loosening" in doc["question"]
                made = [(step, q, a, c, {}) for step, q, a, c in _bolt_probes(src, stem, n * 7 + 3, loosen)]
            elif family == "cup_drops":
                made = [(step, q, a, c, {}) for step, q, a, c in _cup_probes(src, stem, n * 7 + 3)]
            else:
                made = failure.probes(family, src, stem, n * 7 + 3, doc)
            for step, question, answer, choices, extra in made:
                probe = vstat_doc(family, f"{parent}::{step}", doc["video_path"], question, answer, choices or None,
                                  element=doc["state_element"], structure="Atomic", challenge=step)
                probe.update({"video_id": doc.get("video_id", stem), "probe_step": step, "parent": parent})
                probe.update(extra)
                docs.append(probe)
            docs.append(dict(doc, id=f"{parent}::final", probe_step="final", parent=parent))
        name = ref.data.name if ref.bench == "vstat" else "vstat.json"
        _write_rows("vstat", dst / name, {"data": {family: docs}})
        datasets.append({"family": label, "bench": "vstat", "data": f"{label}/{name}", "videos": f"{label}/videos"})
    return _finish(suite.root, out, datasets, "failure", {"steps": list(STEPS)})


def attribute(items: list[Item], correct: dict[str, bool]) -> dict[str, str]:
    """Per parent item: the first failing step (event, entity, update, final), or `correct`.

    `correct` maps item id -> whether its answer was right; a step with no answer counts as failed."""
    steps: dict[str, dict[str, bool]] = {}
    for item in items:
        parent, step = item.meta.get("parent"), item.meta.get("probe_step")
        if parent and step:
            steps.setdefault(parent, {})[step] = bool(correct.get(item.id, False))
    out = {}
    for parent, by_step in steps.items():  # a family without a step (no entity to tell apart) skips it
        out[parent] = next((s for s in STEPS if s in by_step and not by_step[s]), "correct")
    return out


def make_variants(suite_dir: Path, kind: str, out: Path, factor: int = 2, tasks: list[str] | None = None) -> Path:
    """Write the `kind` variants of `suite_dir` (only the families in `tasks`, when given) into `out`."""
    if kind not in KINDS:
        raise UserError(f"unknown variant kind {kind!r} (choose one of {', '.join(KINDS)})")
    source, target = Path(suite_dir).resolve(), Path(out).resolve()
    if target == source or target in source.parents or source in target.parents:
        # `--out` is cleared first: `--out SUITE` removed the suite it was to read (found by probe)
        raise UserError(f"{out}: --out is the suite itself or holds it or lies in it; give a folder apart from {suite_dir}")
    if tasks:
        suite_dir = _subset(suite_dir, tasks, Path(out).resolve().parent / (Path(out).name + ".source"))
    if kind == "transcript":
        return make_transcript(suite_dir, out)
    if kind == "stretch":
        return make_stretch(suite_dir, out, factor)
    if kind == "duration":
        return make_duration(suite_dir, out)
    return make_failure(suite_dir, out)
