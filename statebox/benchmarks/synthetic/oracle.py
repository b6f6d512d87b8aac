"""Answers derived from the ground-truth files alone (never from the annotation file).

The oracle reads `tracks.jsonl` (and nothing the question file says about answers)
and works out each answer the way a perfect tracker would: unique cube ids across the
pan, the ball's cup in the last frame, blocks on the stack at the end, clockwise runs
of a bolt's angle, in-view runs before a query time, the lamp's on/off runs decoded
as Morse. If the annotation file and the tracks disagree, the oracle's score through
the real scorer drops below 100% and `statebox bench validate` fails: that is the
point of computing it independently.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.families.morse_light import MORSE
from statebox.schema import Item

VISIBLE = 0.5
LETTERS = "ABCD"
_DECODE = {code: letter for letter, code in MORSE.items()}


@lru_cache(maxsize=64)
def _tracks(family_dir: str, stem: str) -> tuple[gt.TrackRow, ...]:
    return tuple(gt.read_tracks(Path(family_dir), stem))


def tracks_for(family_dir: Path, item: Item) -> list[gt.TrackRow]:
    return list(_tracks(str(family_dir), Path(item.video).stem))


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
    bx = (ball.amodal_box[0] + ball.amodal_box[2]) / 2
    centre = {r.id: (r.amodal_box[0] + r.amodal_box[2]) / 2 for r in cups}
    under = min(centre, key=lambda cid: abs(centre[cid] - bx))
    order = sorted(centre, key=centre.get)
    return LETTERS[order.index(under)]


def block_count(rows: list[gt.TrackRow]) -> int:
    last = by_frame(rows)[-1]
    return sum(1 for r in last if r.cls == "block" and r.state.get("on_stack"))


def bolts(rows: list[gt.TrackRow]) -> int:
    """Clockwise (angle-decreasing) rotation runs, summed over bolts."""
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


def morse_light(rows: list[gt.TrackRow]) -> str:
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
    unit = min(n for on, n in runs if on)
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


# ---- entry points ---------------------------------------------------------------------------
def oracle_response(family: str, family_dir: Path, item: Item, query_index: int = 0) -> str:
    """The oracle's response text for one query of one item of a generated family."""
    rows = tracks_for(family_dir, item)
    if family == "cube_count":
        return str(cube_count(rows))
    if family == "shell_game":
        return shell_game(rows)
    if family == "block_count":
        return str(block_count(rows))
    if family == "bolts":
        return str(bolts(rows))
    if family == "morse_light":
        return morse_light(rows)
    if family == "streaming_count":
        query = item.queries[query_index]
        fps = gt.read_meta(family_dir, Path(item.video).stem).fps
        return str(streaming(rows, item.labels["counting_subtype"], kind_of(item.question), float(query.time), fps))
    raise ValueError(f"unknown family {family!r}")


def predictions(family: str, family_dir: Path, items: list[Item], answer=None) -> list[dict]:
    """Prediction rows (`{"id", "query_index", "response"}`) for every query, from `answer` (default: the oracle)."""
    answer = answer or oracle_response
    return [{"id": item.id, "query_index": q.index, "response": answer(family, family_dir, item, q.index)}
            for item in items for q in item.queries]
