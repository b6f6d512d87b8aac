"""Failure-mode probes for the families whose answer is built by a chain of events.

VSTAT's three failure kinds, per item: did the model see the events (event recognition),
does it know which object took part (entity association, where the family has several
similar objects), and does it keep the state up to date (state update), before the final
question. `variants.make_failure` writes the probes (VSTAT docs beside the final
question); `attribute` there names each item's first failing step.

Each chain is read from the truth in two independent ways. The probe's annotated answer
comes from the events file (what the generator did); the oracle's answer
(`probe_answer`, used by `oracle.failure_probe`) comes from the track rows (what a
perfect tracker sees), through the same per-family functions the oracle uses (`measure.py`) for the
final question, on the rows cut at the probe's time. If the two disagree, the failure
variant's oracle score drops below 100%.

Times in probe questions are frame midpoints ((frame + 0.5) / fps, as VCBench query
points): "the first T seconds" means frames with time < T, and window edges fall in the
quiet gaps between events, so no event straddles a boundary.

bolts, ec_bolts and cup_drops keep their hand-written probes (variants._bolt_probes,
_cup_probes). The scene families (`SCENES`) have no CHAINS entry; their probes are read
from the scene (`scene_probes`, `scene_answer`; `final_doc` writes their own question as
the VSTAT final):
- cube_count (main setting; one pan over a static layout): event = cubes seen for the
  first time (at least half visible) in a window; entity = how many cubes visible at t
  are still visible at t + 1 s (the same cubes seen again, what a 1 fps sampler must not
  count twice); update = distinct cubes seen in the first T seconds. Annotated from the
  per-cube first-seen frames, answered by the oracle with `measure.cube_count` on the cut
  rows; probe times avoid frames where a cube is half in view or half hidden.
- eoc_objects (single-choice rows: past start mat, present motion, future mat): event =
  moves (an object leaves its mat) in a window; entity = which object (cube, cup, ball)
  starts to move in a window around the k-th move alone; update = the marked object's
  mat at T (after the k-th move). The marked object is `<object 0>`, the red box drawn
  into the last frame (the oracle finds it by the prompt box, the annotation by the
  generator's `marked`).
- streaming_count / streaming_window (one final per question: its last query point):
  event = entries of the asked kind (O1-Snap: entries and exits) between the previous
  and an earlier query point; entity = whether the object of that kind entering in a
  window around one entry alone had been in view before (what separates unique counts
  from entries); update = the question at that earlier query point (the generator's own
  count), as "Look at the video up to T seconds only".
Every probe names its time ("between a and b seconds into the video", "in the first T
seconds", "T seconds into the video?", "look at the video up to"): the wording the
tracker's `failure_probe` rule abstains on by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statebox.benchmarks.cpbench import PROMPT as CP_PROMPT
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic import measure
from statebox.benchmarks.synthetic.families import eoc_objects as eoc
from statebox.benchmarks.synthetic.families import streaming_count as sc
from statebox.benchmarks.synthetic.families.common import vstat_doc
from statebox.schema import Item

ORDINAL = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
           "eleventh", "twelfth")
YES_NO = ["yes", "no"]


@dataclass(frozen=True)
class Chain:
    """One family's chain: which events build the answer and how the probes ask about them."""

    kinds: tuple[str, ...]  # event kinds (events.jsonl) whose count/order builds the answer
    window: str  # event question: "How many ... between {a} and {b} seconds?"
    update: str  # state question at time T: "... in the first {t} seconds ..."
    final_note: str = ""  # appended to a non-VSTAT family's question to make the whole-video final


CHAINS: dict[str, Chain] = {
    "shell_game": Chain(("swap",), "How many times do two cups swap places between {a} and {b} seconds into the video?",
                        "Look at the video up to {t} seconds only. At that moment, which cup hides the ball, as seen "
                        "in the picture then?"),
    "block_count": Chain(("add", "remove"), "How many times is a block put on or taken off the stack between {a} and "
                                            "{b} seconds into the video?",
                         "How many blocks are in the stack {t} seconds into the video?"),
    "morse_light": Chain(("on",), "How many flashes does the lamp make between {a} and {b} seconds into the video?",
                         "Which letters has the lamp flashed in Morse code in the first {t} seconds of the video? "
                         "Answer with the letters only."),
    "line_crossing": Chain(("cross",), "How many times does a ball cross the white line between {a} and {b} seconds "
                                       "into the video?",
                           "How many times has a ball crossed the white line in the first {t} seconds of the video?",
                           " (Answer for the whole video.)"),
    "swing": Chain(("cycle",), "How many complete back-and-forth swings does the ball finish between {a} and {b} "
                               "seconds into the video?",
                   "How many complete back-and-forth swings has the ball finished in the first {t} seconds of the "
                   "video?", " (Answer for the whole video.)"),
    "lamp_episodes": Chain(("episode_start",), "How many flashing episodes (bursts of quick flashes) end between {a} and "
                                             "{b} seconds into the video?",
                           "How many flashing episodes (bursts of quick flashes, separated by at least a second of "
                           "darkness) has the lamp had in the first {t} seconds of the video?",
                           " (Answer for the whole video.)"),
    "ec_beeps": Chain(("beep",), "How many beeps are heard between {a} and {b} seconds into the video?",
                      "How many flashes that came with a beep happen in the first {t} seconds of the video?"),
}


def _secs(frame: float, fps: int) -> str:
    return f"{(frame + 0.5) / fps:.2f}"


PAIRED = {"on": "off", "episode_start": "episode_end"}  # an event kind and the kind that ends it


def _spans(events: list[gt.GtEvent], chain: Chain) -> list[tuple[int, int]]:
    """(first, last) frame of each chain event, in order (a swap lasts until its end_frame, a flash until
    its `off`, an episode until its `episode_end`)."""
    ordered = sorted(events, key=lambda e: e.frame)
    out = []
    for e in ordered:
        if e.kind in chain.kinds:
            end = int(e.data.get("end_frame", e.frame))
            if e.kind in PAIRED:
                end = next((x.frame for x in ordered if x.kind == PAIRED[e.kind] and x.frame >= e.frame), e.frame)
            out.append((e.frame, end))
    return out


def _gap_after(spans: list[tuple[int, int]], i: int, n_frames: int) -> int:
    """A frame in the quiet gap after chain event i (its midpoint; the last frame after the last event)."""
    end = spans[i][1]
    nxt = spans[i + 1][0] if i + 1 < len(spans) else n_frames
    return min(n_frames - 1, (end + nxt) // 2)


def _gap_before(spans: list[tuple[int, int]], i: int) -> int:
    prev = spans[i - 1][1] if i > 0 else -1
    return max(0, (prev + spans[i][0]) // 2) if i > 0 else max(0, spans[i][0] // 2 - 1)


def _morse_letter_ends(events: list[gt.GtEvent]) -> list[int]:
    """Indices of flashes that end a letter (the dark run after them is at least two units)."""
    on = sorted(e.frame for e in events if e.kind == "on")
    off = sorted(e.frame for e in events if e.kind == "off")
    unit = min(b - a for a, b in zip(on, off))
    return [i for i in range(len(on)) if i + 1 == len(on) or on[i + 1] - off[i] >= 2 * unit]


def probes(family: str, family_dir: Path, stem: str, pick: int,
           final: dict | None = None) -> list[tuple[str, str, Any, list[str], dict]]:
    """(step, question, answer, choices, extra meta) for one video of a chained family, from its events
    (a scene family's probes also read its final doc: which question, which marked object)."""
    if family in SCENES:
        return scene_probes(family, family_dir, stem, pick, final or {})
    chain = CHAINS[family]
    meta = gt.read_meta(family_dir, stem)
    events = gt.read_events(family_dir, stem)
    rows = gt.read_tracks(family_dir, stem)
    fps, n_frames = meta.fps, meta.n_frames
    spans = _spans(events, chain)
    k = pick % len(spans)  # the probed event (0-based)
    if family == "morse_light":
        ends = _morse_letter_ends(events)
        k = ends[pick % len(ends)]
    # event recognition: a window around one or two chain events, edges in the quiet gaps
    last = min(len(spans) - 1, k + pick % 2)
    a_frame, b_frame = _gap_before(spans, k), _gap_after(spans, last, n_frames)
    a, b = _secs(a_frame, fps), _secs(b_frame, fps)
    in_window = sum(1 for s, _ in spans if a_frame < s <= b_frame)
    out: list[tuple[str, str, Any, list[str], dict]] = [
        ("event", chain.window.format(a=a, b=b), in_window, [], {"probe_window": [float(a), float(b)]})]
    entity = _entity(family, rows, events, spans, k)
    if entity:
        out.append(entity)
    t_frame = _gap_after(spans, k, n_frames)
    t = _secs(t_frame, fps)
    if family == "shell_game":  # where the ball is: the tracks' last frame before T (the events do not say)
        choices = ["left cup", "middle cup", "right cup"]
        answer: Any = choices["ABC".index(measure.shell_game([r for r in rows if r.frame <= t_frame]))]
    elif family == "block_count":
        answer = sum(int(e.data.get("count", 0)) if e.kind == "initial" else (1 if e.kind == "add" else -1)
                     for e in events if e.frame <= t_frame and e.kind in ("initial", "add", "remove"))
        choices = []
    elif family == "morse_light":
        done = sum(1 for i in _morse_letter_ends(events) if i <= k)
        answer, choices = str(meta.answers["text"])[:done], []
    else:  # counting families: chain events up to T
        answer, choices = sum(1 for start, _ in spans if start <= t_frame), []
    out.append(("update", chain.update.format(t=t), answer, choices, {"probe_time": float(t)}))
    return out


def _entity(family: str, rows: list[gt.TrackRow], events: list[gt.GtEvent], spans: list[tuple[int, int]],
            k: int) -> tuple[str, str, Any, list[str], dict] | None:
    chained = [e for e in sorted(events, key=lambda e: e.frame) if e.kind in CHAINS[family].kinds]
    ev = chained[k]
    if family == "shell_game":
        holder = next(r.id for r in rows if r.frame == ev.frame and r.cls == "cup" and r.state.get("has_ball"))
        return ("entity", f"Does the {ORDINAL[k]} swap of two cups move the cup that hides the ball?",
                "yes" if holder in ev.ids else "no", YES_NO, {"probe_k": k + 1})
    if family == "block_count":
        return ("entity", f"The {ORDINAL[k]} time the stack changes, is a block put on it or taken off it?",
                "put on" if ev.kind == "add" else "taken off", ["put on", "taken off"], {"probe_k": k + 1})
    if family == "line_crossing":
        return ("entity", f"Counting the balls' lanes from the one nearest the camera (1 = nearest), in which lane "
                          f"is the ball that crosses the white line the {ORDINAL[k]} time?",
                lane_rank(rows)[ev.ids[0]], [], {"probe_k": k + 1})
    return None


def lane_rank(rows: list[gt.TrackRow]) -> dict[int, int]:
    """Ball id -> lane from the camera (1 = nearest: the lowest box bottom on screen), from the first frame."""
    first = [r for r in rows if r.frame == 0 and r.cls == "ball" and r.amodal_box]
    order = sorted(first, key=lambda r: -r.amodal()[3])
    return {r.id: i + 1 for i, r in enumerate(order)}


def count_at(family: str, rows: list[gt.TrackRow], events: list[gt.GtEvent] | None, t: float, fps: int) -> Any:
    """The family's state from the track rows before time t (events only for sounds: beeps are not in
    the tracks). Morse letters are read with the whole video's unit (a prefix of dashes alone would
    otherwise read as dots)."""
    cut = [r for r in rows if r.time < t]
    if family == "block_count":
        return measure.block_count(cut)
    if family == "morse_light":
        return measure.morse_light(cut, unit=measure.morse_unit(rows))
    if family == "line_crossing":
        return measure.crossings(cut)
    if family == "swing":
        return measure.cycles(cut)
    if family == "lamp_episodes":
        return measure.episodes(cut)
    if family == "ec_beeps":
        return int(measure.ec_beeps(cut, [e.time for e in events or [] if e.kind == "beep" and e.time < t], fps)[0])
    raise ValueError(f"no chain count for {family!r}")


def _window_count(family: str, rows: list[gt.TrackRow], events: list[gt.GtEvent] | None, a: float, b: float,
                  fps: int) -> int:
    """Chain events starting strictly between a and b seconds (edges are frame midpoints), from the
    tracks where they show them: flips of a block's on_stack, flash runs, counts before each edge."""
    def inside(frame: int) -> bool:
        return a < frame / fps < b

    if family == "shell_game":  # the cups' screen positions move with the orbiting camera: the events say
        return sum(1 for e in events or [] if e.kind == "swap" and inside(e.frame))
    if family == "block_count":
        return sum(1 for _, f in _stack_flips(rows) if inside(f))
    if family == "morse_light":
        lit = [(r.frame, bool(r.state.get("on"))) for r in sorted(rows, key=lambda r: r.frame) if r.cls == "lamp"]
        return sum(1 for s, _ in measure.runs_of(lit) if inside(s))
    if family == "ec_beeps":
        return sum(1 for e in events or [] if e.kind == "beep" and inside(e.frame))
    return int(count_at(family, rows, events, b, fps)) - int(count_at(family, rows, events, a, fps))


def _stack_flips(rows: list[gt.TrackRow]) -> list[tuple[bool, int]]:
    """(now on the stack, frame) of every change of a block's on_stack state, in frame order."""
    flips = []
    for points in measure._series(rows, "on_stack", "block").values():
        flips += [(bool(v1), f1) for (_, v0), (f1, v1) in zip(points, points[1:]) if v0 != v1]
    return sorted(flips, key=lambda x: x[1])


def probe_answer(family: str, rows: list[gt.TrackRow], item_meta: dict, question: str, choices: list[str],
                 events: list[gt.GtEvent] | None, fps: int) -> str:
    """The oracle's answer to a chained probe, from the track rows (events only for beeps and swaps)."""
    if family in SCENES:
        return scene_answer(family, rows, item_meta, choices, fps)
    step = item_meta["probe_step"]
    q = question.lower()
    if step == "event":
        a, b = item_meta["probe_window"]
        return str(_window_count(family, rows, events, a, b, fps))
    if step == "update":
        t = float(item_meta["probe_time"])
        if family == "shell_game":
            cut = [r for r in rows if r.time < t]
            return measure.shell_game(cut) if cut else "A"
        return str(count_at(family, rows, events, t, fps))
    k = int(item_meta["probe_k"])
    if family == "shell_game":
        ev = [e for e in sorted(events or [], key=lambda e: e.frame) if e.kind == "swap"][k - 1]
        holder = next(r.id for r in rows if r.frame == ev.frame and r.cls == "cup" and r.state.get("has_ball"))
        return measure.letter_for(choices, "yes" if holder in ev.ids else "no")
    if family == "block_count":
        return measure.letter_for(choices, "put on" if _stack_flips(rows)[k - 1][0] else "taken off")
    if family == "line_crossing":
        crossings = []
        for oid, points in measure._series(rows, "side", "ball").items():
            crossings += [(f1, oid) for (_, v0), (f1, v1) in zip(points, points[1:]) if v0 != v1]
        return str(lane_rank(rows)[sorted(crossings)[k - 1][1]])
    raise ValueError(f"no entity probe for {family!r} ({q[:40]})")


# ---- scene families: probes read from the scene, not from a CHAINS entry -----------------------
# cube_count (a static layout under one pan: the chain is the cubes seen for the first time),
# eoc_objects (objects sliding between mats: the chain is the moves, the state the marked object's
# mat) and the streaming families (objects entering and leaving the view: the chain is the entries
# of the asked kind, the state the item's own count at one of its query points).
SCENES = ("cube_count", "eoc_objects", "streaming_count", "streaming_window")
OWN_FINAL = ("eoc_objects", "streaming_count", "streaming_window")  # final answered by `final_answer`: the
# family's oracle reads a query time or the EOC prompt, which a VSTAT doc does not carry as such
MARKED = "<object 0> (the object marked with a red box in the last frame)"
CALM = (0.25, 0.75)  # a visible / in-frame fraction inside this range is a threshold a probe time avoids


def _time(frame: int, fps: int) -> float:
    return round((frame + 0.5) / fps, 2)


def final_doc(family: str, row: dict, src: Path) -> dict | None:
    """The VSTAT doc of a scene family's own question (None: not a final for the failure variant).

    cube_count: main-setting videos (the control shot shows every cube in every frame: no chain);
    eoc_objects: the single-choice rows (past start mat, present motion, future mat), the `<object 0>`
    prompt written as the red box drawn into the last frame; streaming: one doc per question (its first
    row), asked at its last query point, answered from the generator's own counts (meta.json)."""
    if family == "cube_count":
        if row.get("setting") != "main":
            return None
        stem = Path(row["video"]).stem
        return vstat_doc(family, row["id"], row["video"], row.get("question") or CP_PROMPT, int(row["count"]),
                         element="Count", structure="Atomic") | {"video_id": stem}
    if family == "eoc_objects":
        if row.get("choice_type") != "single-choice":
            return None
        stem = Path(row["video_path"]).stem
        letters = sorted(row["choices"])
        choices = [row["choices"][k] for k in letters]
        question = row["question"].replace("<object 0>", MARKED).replace("at this moment", "at the end of the video")
        return vstat_doc(family, row["idx"], row["video_path"], question, row["choices"][row["answer"][0]], choices,
                         element="Location", structure="Atomic") | {
            "video_id": stem, "box": row["box"], "eoc_type": row["video_type"], "eoc_choices": row["choices"]}
    if row.get("query_index") != 0:
        return None
    stem = Path(row["video_path"]).stem
    meta = gt.read_meta(src, stem)
    asked = meta.answers["questions"][int(str(row["id"]).rsplit("_q", 1)[1])]
    t = _time(asked["frames"][-1], meta.fps)
    return vstat_doc(family, row["id"], row["video_path"], _until(t, row["question"]), int(asked["counts"][-1]),
                     element="Count", structure="Atomic") | {
        "video_id": stem, "probe_time": t, "vc_question": row["question"], "vc_subtype": row["counting_subtype"],
        "vc_window_s": asked.get("window_s")}


def _until(t: float, question: str) -> str:
    return f"Look at the video up to {t:.2f} seconds only (the moment this question is asked). {question}"


def _calm_frame(rows_at: dict[int, list[gt.TrackRow]], lo: int, hi: int, want: int) -> int:
    """The frame in [lo, hi] nearest `want` at which no object is half in view or half hidden (`want`
    when none is calm)."""
    def calm(f: int) -> bool:
        return all(not (CALM[0] < r.visible < CALM[1] or CALM[0] < r.in_frame < CALM[1]) for r in rows_at.get(f, []))

    for f in sorted(range(max(0, lo), hi + 1), key=lambda f: (abs(f - want), f)):
        if calm(f):
            return f
    return want


def scene_probes(family: str, family_dir: Path, stem: str, pick: int,
                 final: dict) -> list[tuple[str, str, Any, list[str], dict]]:
    """(step, question, answer, choices, extra meta) for one final of a scene family."""
    meta = gt.read_meta(family_dir, stem)
    events = gt.read_events(family_dir, stem)
    rows = gt.read_tracks(family_dir, stem)
    if family == "cube_count":
        return _cube_probes(rows, meta, pick)
    if family == "eoc_objects":
        return _eoc_probes(events, meta, pick, final)
    return _stream_probes(events, meta, pick, final)


def _cube_probes(rows: list[gt.TrackRow], meta: gt.VideoMeta, pick: int) -> list[tuple[str, str, Any, list[str], dict]]:
    """The pan's chain: each cube's first frame at least half visible (the moment it becomes countable)."""
    fps, n_frames = meta.fps, meta.n_frames
    rows_at = gt.frames_of(rows)
    first: dict[int, int] = {}
    for r in sorted(rows, key=lambda r: r.frame):
        if r.cls == "cube" and r.visible >= measure.VISIBLE:
            first.setdefault(r.id, r.frame)
    spans = [(f, f) for f in sorted(first.values()) if f > 0]  # cubes already in sight at the start are no event
    if not spans:
        return []
    k = pick % len(spans)
    last = min(len(spans) - 1, k + pick % 2)
    lo_a = spans[k - 1][1] + 1 if k > 0 else 0
    a_frame = _calm_frame(rows_at, lo_a, spans[k][0] - 1, _gap_before(spans, k))
    hi_b = spans[last + 1][0] - 1 if last + 1 < len(spans) else n_frames - 1
    b_frame = _calm_frame(rows_at, spans[last][1], hi_b, _gap_after(spans, last, n_frames))
    a, b = _secs(a_frame, fps), _secs(b_frame, fps)
    out: list[tuple[str, str, Any, list[str], dict]] = [
        ("event", f"How many cubes come into view for the first time between {a} and {b} seconds into the video? "
                  "(A cube is in view once at least half of it shows.)",
         sum(1 for s, _ in spans if a_frame < s <= b_frame), [], {"probe_window": [float(a), float(b)]})]
    seen = {f: {r.id for r in frame_rows if r.cls == "cube" and r.visible >= measure.VISIBLE}
            for f, frame_rows in rows_at.items()}
    pairs = [(f, f + fps) for f in range(0, n_frames - fps)]
    near = sorted(pairs, key=lambda p: (abs(p[0] - a_frame), p[0]))
    calm = [p for p in near if _calm_frame(rows_at, p[0], p[0], -1) == p[0] and _calm_frame(rows_at, p[1], p[1], -1) == p[1]]
    f1, f2 = next((p for p in calm if seen.get(p[0], set()) & seen.get(p[1], set())), (calm or near)[0])
    t1, t2 = _secs(f1, fps), _secs(f2, fps)
    out.append(("entity", f"Of the cubes at least half visible {t1} seconds into the video, how many (the same "
                          f"cubes, seen again) are still at least half visible {t2} seconds into the video?",
                len(seen.get(f1, set()) & seen.get(f2, set())), [], {"probe_times": [float(t1), float(t2)]}))
    t_frame = _calm_frame(rows_at, spans[k][1], spans[k + 1][0] - 1 if k + 1 < len(spans) else n_frames - 1,
                          _gap_after(spans, k, n_frames))
    t = _secs(t_frame, fps)
    out.append(("update", f"How many different cubes have been at least half visible in the first {t} seconds of "
                          "the video?", sum(1 for f in first.values() if f <= t_frame), [], {"probe_time": float(t)}))
    return out


def _eoc_probes(events: list[gt.GtEvent], meta: gt.VideoMeta, pick: int,
                final: dict) -> list[tuple[str, str, Any, list[str], dict]]:
    """The moves between mats (every object's); the state: the marked object's mat after the k-th move."""
    fps, n_frames = meta.fps, meta.n_frames
    moves = sorted((e for e in events if e.kind == "move"), key=lambda e: e.frame)
    spans = [(e.frame, e.frame + round(eoc.MOVE_S * fps)) for e in moves]
    k = pick % max(1, len(spans) - 1)  # not the last move: the video is cut while it is under way
    last = min(len(spans) - 1, k + pick % 2)
    a_frame, b_frame = _gap_before(spans, k), _gap_after(spans, last, n_frames)
    a, b = _secs(a_frame, fps), _secs(b_frame, fps)
    a1, b1 = _secs(_gap_before(spans, k), fps), _secs(_gap_after(spans, k, n_frames), fps)  # the k-th move alone
    box = {"box": final["box"]}
    out: list[tuple[str, str, Any, list[str], dict]] = [
        ("event", f"How many times does an object start sliding from one mat to another between {a} and {b} seconds "
                  "into the video?", sum(1 for s, _ in spans if a_frame < s <= b_frame), [],
         {"probe_window": [float(a), float(b)]}),
        ("entity", f"Which object starts sliding from one mat to another between {a1} and {b1} seconds into the "
                   "video?", f"the {eoc.CLASSES[moves[k].ids[0] - 1]}", [f"the {c}" for c in eoc.CLASSES],
         {"probe_window": [float(a1), float(b1)]})]
    # after the k-th move; before it when it is the last (cut while under way: nothing rests after it)
    t_frame = _gap_after(spans, k, n_frames) if k + 1 < len(spans) else _gap_before(spans, k)
    t = _secs(t_frame, fps)
    marked = str(meta.params["marked"])
    mat = str(meta.params["start"][marked])
    for e in moves:
        if e.frame <= t_frame and e.ids[0] == eoc.CLASSES.index(marked) + 1:
            mat = str(e.data["to"])
    out.append(("update", f"Which mat is {MARKED} standing on {t} seconds into the video?", f"the {mat} mat",
                [f"the {m} mat" for m in eoc.MATS], {"probe_time": float(t)} | box))
    return [(step, q, ans, ch, extra | box) for step, q, ans, ch, extra in out]


def _stream_probes(events: list[gt.GtEvent], meta: gt.VideoMeta, pick: int,
                   final: dict) -> list[tuple[str, str, Any, list[str], dict]]:
    """Entries of the asked kind (and exits, for O1-Snap's visible count), around one earlier query point."""
    fps = meta.fps
    question, subtype = str(final["vc_question"]), str(final["vc_subtype"])
    kind = measure.kind_of(question)
    asked = meta.answers["questions"][int(str(final["id"]).rsplit("_q", 1)[1])]
    frames, counts = [int(f) for f in asked["frames"]], [int(c) for c in asked["counts"]]
    kinds = ("enter", "exit") if subtype == "O1-Snap" else ("enter",)
    changes = sorted((e for e in events if e.kind in kinds and e.data.get("cls") == kind), key=lambda e: e.frame)

    def in_window(i: int) -> list[gt.GtEvent]:
        lo = frames[i - 1] if i > 0 else -1
        return [e for e in changes if lo < e.frame <= frames[i]]

    earlier = range(max(1, len(frames) - 1))  # a query point before the final one
    busy = [i for i in earlier if in_window(i)]
    i = (busy or list(earlier))[pick % len(busy or list(earlier))]
    a = _time(frames[i - 1], fps) if i > 0 else 0.0
    b = _time(frames[i], fps)
    what = f"a {kind} come into view or leave the view" if subtype == "O1-Snap" else f"a {kind} come into view"
    where = f"between {a:.2f} and {b:.2f} seconds into the video" if i > 0 else f"in the first {b:.2f} seconds of the video"
    extra = {"vc_question": question, "vc_subtype": subtype, "vc_window_s": asked.get("window_s")}
    out: list[tuple[str, str, Any, list[str], dict]] = [
        ("event", f"How many times does {what} {where}? (An object is in view when at least half of it is inside "
                  "the picture.)", len(in_window(i)), [], extra | {"probe_window": [a, b], "probe_kinds": list(kinds)})]
    entries = [e for e in changes if e.kind == "enter"]
    seen_before = [any(x.ids[0] == e.ids[0] for x in entries[:m]) for m, e in enumerate(entries)]
    alone = [m for m, e in enumerate(entries) if sum(x.frame == e.frame for x in entries) == 1]  # one per frame
    # the first entry of a kind is new by definition: asked only when there is no other
    upto = [m for m in alone if entries[m].frame <= frames[i] and m] or [m for m in alone if m] or alone
    again = [m for m in alone if seen_before[m]]  # a returning object, whenever it comes back
    pool = again if pick % 2 and again else upto
    if pool:
        m = pool[(pick // 2) % len(pool)]
        lo = entries[m - 1].frame if m > 0 else -1
        hi = entries[m + 1].frame if m + 1 < len(entries) else meta.n_frames
        a1, b1 = _time(max(lo, (lo + entries[m].frame) // 2), fps), _time(min((entries[m].frame + hi) // 2,
                                                                                 meta.n_frames - 1), fps)
        out.append(("entity", f"Is the {kind} that comes into view between {a1:.2f} and {b1:.2f} seconds into the "
                              f"video one that had already been in view earlier? (The {sc.PLURAL[kind]} differ in "
                              "colour.)", "yes" if seen_before[m] else "no", YES_NO,
                    extra | {"probe_window": [a1, b1]}))
    out.append(("update", _until(b, question), counts[i], [], extra | {"probe_time": b}))
    return out


# ---- scene families: the oracle's answers, from the track rows -------------------------------
def scene_answer(family: str, rows: list[gt.TrackRow], item_meta: dict, choices: list[str], fps: int) -> str:
    """The oracle's answer to a scene family's probe, from the track rows alone."""
    step = item_meta["probe_step"]
    if family == "cube_count":
        if step == "event":
            a, b = item_meta["probe_window"]
            return str(measure.cube_count([r for r in rows if r.time < b]) - measure.cube_count([r for r in rows if r.time < a]))
        if step == "entity":
            sets = []
            for t in item_meta["probe_times"]:
                frame = math.ceil(t * fps - 1e-9) - 1  # the frame on screen at time t
                sets.append({r.id for r in rows if r.frame == frame and r.cls == "cube" and r.visible >= measure.VISIBLE})
            return str(len(sets[0] & sets[1]))
        return str(measure.cube_count([r for r in rows if r.time < float(item_meta["probe_time"])]))
    if family == "eoc_objects":
        starts = _move_starts(rows)
        if step == "event":
            a, b = item_meta["probe_window"]
            return str(sum(1 for f, _ in starts if a < f / fps < b))
        if step == "entity":
            a, b = item_meta["probe_window"]
            movers = [oid for f, oid in starts if a < f / fps < b]
            if len(movers) != 1:
                return "none"  # the tracks show no single move in the window
            return measure.letter_for(choices, f"the {next(r.cls for r in rows if r.id == movers[0])}")
        target = _marked_id(rows, item_meta)
        t = float(item_meta["probe_time"])
        mat = [r.state.get("mat") for r in sorted(rows, key=lambda r: r.frame) if r.id == target and r.time < t][-1]
        return measure.letter_for(choices, f"the {mat} mat")
    kind = measure.kind_of(str(item_meta["vc_question"]))
    if step == "event":
        a, b = item_meta["probe_window"]
        return str(sum(1 for f, _, entering in _view_changes(rows, kind)
                       if a < f / fps < b and ("exit" in item_meta["probe_kinds"] or entering)))
    if step == "entity":
        a, b = item_meta["probe_window"]
        entries = measure.enter_frames(rows, kind)
        inside = [(f, oid) for f, oid in entries if a < f / fps < b]
        if len(inside) != 1:
            return "none"  # the tracks show no single entry in the window
        again = any(oid == inside[0][1] and f < inside[0][0] for f, oid in entries)
        return measure.letter_for(choices, "yes" if again else "no")
    return _stream_count(family, rows, item_meta, fps)


def _stream_count(family: str, rows: list[gt.TrackRow], item_meta: dict, fps: int) -> str:
    """The streaming question's own count at the probe's time (the oracle's measurement, cut there)."""
    question, subtype, t = str(item_meta["vc_question"]), str(item_meta["vc_subtype"]), float(item_meta["probe_time"])
    if family == "streaming_window":
        return str(measure.window(rows, subtype, measure.kind_of(question), t, float(item_meta["vc_window_s"]), fps))
    return str(measure.streaming(rows, subtype, measure.kind_of(question), t, fps))


def final_answer(family: str, rows: list[gt.TrackRow], item: Item, fps: int) -> str:
    """The oracle's answer to a scene family's final doc (OWN_FINAL), from the track rows."""
    if family == "eoc_objects":  # the family's own measurement, on the EOC-Bench fields the doc keeps
        letters = sorted(item.meta["eoc_choices"])
        eoc_item = item.model_copy(update={"labels": dict(item.labels, video_type=item.meta["eoc_type"]),
                                           "meta": dict(item.meta, choices=item.meta["eoc_choices"])})
        return "ABCD"[letters.index(measure.eoc_objects(rows, eoc_item, fps))]
    return _stream_count(family, rows, item.meta, fps)


def _move_starts(rows: list[gt.TrackRow]) -> list[tuple[int, int]]:
    """(frame, id) of each move's first frame (the object leaves its mat), in frame order."""
    starts = []
    for oid, points in measure._series(rows, "mat").items():
        starts += [(f1, oid) for (_, m0), (f1, m1) in zip(points, points[1:]) if m0 is not None and m1 is None]
    return sorted(starts)


def _marked_id(rows: list[gt.TrackRow], item_meta: dict) -> int:
    """The object the prompt box marks on the last frame (the best overlap, as the EOC oracle finds it)."""
    last = measure.by_frame(rows)[-1]
    prompt = (item_meta.get("box") or [[0, 0, 0, 0]])[0]
    return max((r for r in last if r.box), key=lambda r: measure._iou(r.box, prompt)).id


def _view_changes(rows: list[gt.TrackRow], kind: str) -> list[tuple[int, int, bool]]:
    """(frame, id, entering) of every change of an object of `kind` into or out of view (at least half of
    it inside the picture), in frame order."""
    out = []
    for oid, frames in measure._series([r.model_copy(update={"state": {"in": r.in_frame >= measure.VISIBLE}})
                                        for r in rows if r.cls == kind], "in").items():
        previous = False
        last = -1
        for f, now in frames:
            if f != last + 1:  # not rendered in between: out of view
                if previous:
                    out.append((last + 1, oid, False))
                previous = False
            if bool(now) != previous:
                out.append((f, oid, bool(now)))
            previous, last = bool(now), f
    return sorted(out)
