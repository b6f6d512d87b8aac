"""What a perfect tracker measures from the ground-truth track rows, per family.

The oracle (`oracle.py`) answers each question with these functions, and the failure-mode
probes (`failure.py`) apply the same ones to rows cut at a probe's time; keeping them in a
module of their own lets both stand on them without importing each other.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.families.cup_drops import ORDINALS, dict_text, set_text
from statebox.benchmarks.synthetic.families.ec_bolts import turn_runs
from statebox.benchmarks.synthetic.families.ec_common import clips_text, span
from statebox.benchmarks.synthetic.families.eoc_objects import MATS
from statebox.benchmarks.synthetic.families.morse_light import MORSE
from statebox.schema import Item

VISIBLE = 0.5
LETTERS = "ABCD"
_DECODE = {code: letter for letter, code in MORSE.items()}


@lru_cache(maxsize=64)
def _tracks(family_dir: str, stem: str, version: tuple[int, int, int]) -> tuple[gt.TrackRow, ...]:
    return tuple(gt.read_tracks(Path(family_dir), stem))


def _file_version(path: Path) -> tuple[int, int, int]:
    """(inode, size, mtime_ns): a suite regenerated in place (same folder, same stems) is read again, not answered
    from what the cache held for the files it replaced; (0, 0, 0) for a missing file, whose read raises."""
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def tracks_for(family_dir: Path, item: Item) -> list[gt.TrackRow]:
    stem = Path(item.video).stem
    return list(_tracks(str(family_dir), stem, _file_version(gt.tracks_path(family_dir, stem))))


def by_frame(rows: list[gt.TrackRow]) -> list[list[gt.TrackRow]]:
    frames = gt.frames_of(rows)
    return [frames.get(i, []) for i in range(max(frames) + 1)] if frames else []


# ---- per family ---------------------------------------------------------------------------
def cube_count(rows: list[gt.TrackRow], fps_sample: int | None = None, fps: int = 10) -> int:
    """Distinct cubes at least half visible in some frame (optionally only frames of a 1 fps sample)."""
    step = fps // fps_sample if fps_sample else 1
    return len({r.id for r in rows if r.cls == "cube" and r.visible >= VISIBLE and r.frame % step == 0})


def max_single_frame(rows: list[gt.TrackRow]) -> int:
    """The most cubes any one frame shows (any pixel): the 'count one frame' baseline."""
    per_frame: dict[int, int] = defaultdict(int)
    for r in rows:
        if r.cls == "cube" and r.box is not None:
            per_frame[r.frame] += 1
    return max(per_frame.values(), default=0)


def shell_game(rows: list[gt.TrackRow]) -> str:
    last = by_frame(rows)[-1]
    ball = next(r for r in last if r.cls == "ball")
    cups = [r for r in last if r.cls == "cup"]
    bx = (ball.amodal()[0] + ball.amodal()[2]) / 2
    centre = {r.id: (r.amodal()[0] + r.amodal()[2]) / 2 for r in cups}
    under = min(centre, key=lambda cid: abs(centre[cid] - bx))
    order = sorted(centre, key=centre.__getitem__)
    return LETTERS[order.index(under)]


def block_count(rows: list[gt.TrackRow]) -> int:
    last = by_frame(rows)[-1]
    return sum(1 for r in last if r.cls == "block" and r.state.get("on_stack"))


def bolts(rows: list[gt.TrackRow], hold: int = 1) -> int:
    """Clockwise (angle-decreasing) rotation runs, summed over bolts (`hold`: see ec_bolts.turn_runs)."""
    if hold > 1:

        by_bolt = {oid: [float(v) for _, v in s] for oid, s in _series(rows, "angle", "bolt").items()}
        return sum(1 for r in turn_runs(by_bolt, hold) if r[1] < 0)
    angles: dict[int, list[float]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.id, r.frame)):
        if r.cls == "bolt":
            angles[r.id].append(float(r.state["angle"]))
    tightenings = 0
    for series in angles.values():
        direction = 0
        for a, b in zip(series, series[1:]):
            step = 0 if abs(b - a) < 1e-6 else (1 if b > a else -1)
            if step and step != direction and step < 0:
                tightenings += 1
            direction = step
    return tightenings


def morse_unit(rows: list[gt.TrackRow]) -> int:
    """The Morse time unit: the shortest flash (a dot), in frames."""
    lit = [(r.frame, bool(r.state.get("on"))) for r in sorted(rows, key=lambda r: r.frame) if r.cls == "lamp"]
    return min((b - a for a, b in runs_of(lit)), default=1)


def morse_light(rows: list[gt.TrackRow], unit: int | None = None) -> str:
    """The word the lamp flashes; `unit` (frames of a dot) defaults to the shortest flash seen."""
    lit = [bool(r.state.get("on")) for r in sorted(rows, key=lambda r: r.frame) if r.cls == "lamp"]
    runs: list[tuple[bool, int]] = []
    for value in lit:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    while runs and not runs[0][0]:
        runs.pop(0)
    while runs and not runs[-1][0]:
        runs.pop()
    if not runs:
        return ""
    unit = unit or min(n for on, n in runs if on)
    word, letter = "", ""
    for on, n in runs:
        if on:
            letter += "-" if n >= 2 * unit else "."
        elif n >= 2 * unit:
            word, letter = word + _DECODE.get(letter, "?"), ""
    return (word + _DECODE.get(letter, "?")).lower()


_KINDS = {"can": "can", "cans": "can", "cone": "cone", "cones": "cone", "ball": "ball", "balls": "ball"}


def kind_of(question: str) -> str:
    for word in re.findall(r"[a-z]+", question.lower()):
        if word in _KINDS:
            return _KINDS[word]
    raise ValueError(f"no object kind in question {question!r}")


def streaming(rows: list[gt.TrackRow], subtype: str, kind: str, query_time: float, fps: int) -> int:
    """The answer at `query_time` from track rows strictly before it (the video is cut there)."""
    past = [r for r in rows if r.time < query_time and r.cls == kind]
    if not past:
        return 0
    if subtype == "O1-Snap":
        last = math.ceil(query_time * fps - 1e-9) - 1  # the last frame shown before the cut
        return sum(1 for r in past if r.frame == last and r.visible >= VISIBLE)
    in_view: dict[int, dict[int, bool]] = defaultdict(dict)
    for r in past:
        in_view[r.id][r.frame] = r.in_frame >= VISIBLE
    if subtype == "O2-Unique":
        return sum(1 for frames in in_view.values() if any(frames.values()))
    if subtype == "E1-Action":
        enters = 0
        for frames in in_view.values():
            previous = False
            for f in range(0, max(frames) + 1):
                now = frames.get(f, False)
                enters += now and not previous
                previous = now
        return enters
    raise ValueError(f"the oracle does not know subtype {subtype!r}")


# ---- the new families ------------------------------------------------------------------------
def _cut(rows: list[gt.TrackRow], query_time: float | None) -> list[gt.TrackRow]:
    return rows if query_time is None else [r for r in rows if r.time < query_time]


def _series(rows: list[gt.TrackRow], key: str, cls: str | None = None) -> dict[int, list[tuple[int, Any]]]:
    """Per object, (frame, its `state[key]`) in frame order; values as the JSON row holds them (`TrackRow.state`)."""
    out: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.id, r.frame)):
        if (cls is None or r.cls == cls) and key in r.state:
            out[r.id].append((r.frame, r.state[key]))
    return out


def enter_frames(rows: list[gt.TrackRow], kind: str) -> list[tuple[int, int]]:
    """(frame, id) of each entry into view (first frame of an in-view run) of objects of `kind`."""
    in_view: dict[int, dict[int, bool]] = defaultdict(dict)
    for r in rows:
        if r.cls == kind:
            in_view[r.id][r.frame] = r.in_frame >= VISIBLE
    out = []
    for oid, frames in in_view.items():
        previous = False
        for f in range(0, max(frames) + 1):
            now = frames.get(f, False)
            if now and not previous:
                out.append((f, oid))
            previous = now
    return sorted(out)


def window(rows: list[gt.TrackRow], subtype: str, kind: str, query_time: float, window_s: float, fps: int) -> int:
    enters = enter_frames(_cut(rows, query_time), kind)
    inside = {oid for f, oid in enters if f / fps >= query_time - window_s}
    if subtype == "O1-Delta":
        return len(inside)
    first: dict[int, int] = {}
    for f, oid in enters:
        first.setdefault(oid, f)
    return sum(1 for oid in inside if first[oid] / fps >= query_time - window_s)


def crossings(rows: list[gt.TrackRow]) -> int:
    return sum(1 for series in _series(rows, "side").values() for (_, a), (_, b) in zip(series, series[1:]) if a != b)


def cycles(rows: list[gt.TrackRow]) -> int:
    n = 0
    for series in _series(rows, "pose").values():
        reached = False
        for _, pose in series:
            if pose == "far":
                reached = True
            elif pose == "home" and reached:
                n, reached = n + 1, False
    return n


def runs_of(values: list[tuple[int, bool]]) -> list[tuple[int, int]]:
    """[first, end) frame ranges where the flag is true."""
    out: list[list[int]] = []
    prev = None
    for f, v in values:
        if v and (not out or prev is None or not prev or out[-1][1] != f):
            out.append([f, f + 1])
        elif v:
            out[-1][1] = f + 1
        prev = v
    return [(r[0], r[1]) for r in out]


def episodes(rows: list[gt.TrackRow], gap_frames: int = 10) -> int:
    """Bursts of flashes separated by at least `gap_frames` dark frames, counted once the burst is over."""
    lit = [(r.frame, bool(r.state.get("on"))) for r in sorted(rows, key=lambda r: r.frame) if r.cls == "lamp"]
    flashes = runs_of(lit)
    if not flashes:
        return 0
    last = lit[-1][0]
    bursts = 1
    for (a0, b0), (a1, b1) in zip(flashes, flashes[1:]):
        bursts += a1 - b0 >= gap_frames
    # the last burst counts only once it is over (a dark stretch of gap_frames after it, or a clear one before the cut)
    if flashes[-1][1] > last or (last + 1 - flashes[-1][1] < 3):
        bursts -= 1
    return bursts


def _place_names(last: list[gt.TrackRow], cls: str) -> dict[int, str]:
    xs = {r.id: (r.amodal_box[0] + r.amodal_box[2]) / 2 for r in last if r.cls == cls and r.amodal_box}
    order = sorted(xs, key=xs.__getitem__)
    names = ("left", "middle", "right") if len(order) == 3 else tuple(str(i) for i in range(len(order)))
    return {oid: names[i] for i, oid in enumerate(order)}


def cup_drops(rows: list[gt.TrackRow], item: Item) -> str:

    frames = by_frame(rows)
    places = _place_names(frames[-1], "cup")
    order = {oid: ("left", "middle", "right").index(p) for oid, p in places.items()}

    def counts(frame_rows: list[gt.TrackRow]) -> list[int]:
        out = [0, 0, 0]
        for r in frame_rows:
            if r.cls == "cup" and r.id in order:
                out[order[r.id]] = len(r.state.get("balls", []))
        return out

    per_frame = [counts(f) for f in frames]
    changes = [f for f in range(1, len(per_frame)) if per_frame[f] != per_frame[f - 1]]
    q = item.question.lower()
    if "fall into" in q:
        k = next(i + 1 for i, w in enumerate(ORDINALS) if f"the {w} ball" in q)
        drops = []
        for f in changes:
            for cup in range(3):
                if per_frame[f][cup] > per_frame[f - 1][cup]:
                    drops.append(cup)
        answer = f"{('left', 'middle', 'right')[drops[k - 1]]} cup" if len(drops) >= k else ""
    elif "right after" in q:
        m = next(i + 1 for i, w in enumerate(ORDINALS) if f"the {w} time" in q)
        state = per_frame[changes[m - 1]] if len(changes) >= m else per_frame[-1]
        answer = set_text([c for c in range(3) if state[c]])
    elif "each cup" in q:
        answer = dict_text(per_frame[-1])
    else:
        answer = set_text([c for c in range(3) if per_frame[-1][c]])
    return _letter(item, answer)


def _letter(item: Item, answer: str) -> str:
    return letter_for(item.choices, answer)


def letter_for(choices: list[str], answer: str) -> str:
    for i, choice in enumerate(choices):
        if choice.strip().lower() == answer.strip().lower():
            return LETTERS[i]
    return "A"  # not among the options: any letter (a wrong one, unless by chance)


def _clips(spans: list[tuple[int, int]]) -> str:

    return clips_text(spans)


def ec_bolts(rows: list[gt.TrackRow], item: Item, fps: int, hold: int = 1) -> tuple[str, str]:

    angles: dict[int, list[float]] = {}
    for oid, series in _series(rows, "angle", "bolt").items():
        angles[oid] = [float(v) for _, v in series]
    want = -1 if "clockwise (tightened)" in item.question and "counter" not in item.question else 1
    chosen = [r for r in turn_runs(angles, hold) if r[1] == want]
    return str(len(chosen)), _clips([span((a - 1) / fps, b / fps) for _, _, a, b in chosen])


def ec_beeps(rows: list[gt.TrackRow], beeps: list[float], fps: int) -> tuple[str, str]:

    lit = [(r.frame, bool(r.state.get("on"))) for r in sorted(rows, key=lambda r: r.frame) if r.cls == "lamp"]
    flashes = runs_of(lit)
    hit = [(a, b) for a, b in flashes if any(a / fps - 0.05 <= t < b / fps for t in beeps)]
    return str(len(hit)), _clips([span(a / fps, b / fps) for a, b in hit])


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def eoc_objects(rows: list[gt.TrackRow], item: Item, fps: int) -> str:

    frames = by_frame(rows)
    last = frames[-1]
    prompt = (item.meta.get("box") or [[0, 0, 0, 0]])[0]
    target = max((r for r in last if r.box), key=lambda r: _iou(r.box, prompt))
    mats = [(r.frame, r.state.get("mat"), r.state.get("moving")) for r in sorted(rows, key=lambda r: r.frame)
            if r.id == target.id]
    kind = item.labels.get("video_type", "")
    choices = item.meta.get("choices") or {}

    def letter_of(text: str) -> str:
        return next((k for k, v in choices.items() if v == text), "a")

    if kind == "Location Retrospection":
        return letter_of(f"the {mats[0][1]} mat")
    if kind == "Object State Retrospection":
        rested = sorted({m for _, m, _ in mats if m}, key=MATS.index)
        return ",".join(sorted(letter_of(f"the {m} mat") for m in rested))
    if kind == "Absolute Time Perception":
        start = max(f for f, m, _ in mats if m is not None) + 1  # first frame of the current move
        return f"{round((mats[-1][0] - start) / fps, 1)}"
    direction = mats[-1][2]
    if kind == "Immediate State Recognition":
        return letter_of({"left": "sliding to the left", "right": "sliding to the right"}.get(direction or "",
                                                                                            "standing still on a mat"))
    # future: the free mat the object is heading for
    occupied = {r.state.get("mat") for r in last if r.id != target.id and r.state.get("mat")}
    origin = next(m for _, m, _ in reversed(mats) if m)
    free = [m for m in MATS if m not in occupied and m != origin]
    ahead = [m for m in free if (MATS.index(m) > MATS.index(origin)) == (direction == "right")]
    return letter_of(f"the {(ahead or free or [origin])[0]} mat")
