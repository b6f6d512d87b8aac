"""Question -> tracking program: explicit, documented rules (docs/tracker.md), first match wins.

A tracker answers only what it can compute from tracks, so each rule pairs a question
pattern with one small program over the `TrackLog`. Objects named in a question must be
classes of the detector's weights ("cubes" -> `cube`); when they are not, or no rule
matches, the result is an abstention (empty response, status `abstain`): the scorer
counts it wrong, the report counts it separately.

Rules (regular expressions over the lower-cased question):
  shell_game      "which cup hides the ball"                      -> follow the ball's cup
  stack_count     "how many X are in the stack at the end"          -> initial + arrivals - departures
  rotation_count  "how many times ... X ... (tightened|loosened)"   -> turns of X by rotation direction
  blink_decode    "... (morse|blinks|flashes) ... light/lamp"       -> on/off timing of the light
  visible_now     "how many X are visible at this moment|now"       -> tracks of X in the last frames
  distinct_so_far "how many (different) X have appeared (so far)"   -> distinct track ids of X
  entries         "how many times has/did a X enter (the view)"     -> tracks of X that began after the start
  unique_total    "how many X are (present|there) in the scene"     -> distinct track ids of X (a pan sees each once)
  final_count     "how many X are (there|visible|left) at the end"  -> tracks of X in the last frames
  rotation_count  "how many times was a bolt turned (counter-)clockwise" (EC-Bench rows) -> as above
  window_count    "how many X (that have never appeared before) have appeared in the past N seconds"
                                                                    -> individuals entering since now - N
  cycle_count     "how many complete cycles has the X made"         -> returns home after reaching the far end
  episode_count   "how many flashing episodes has the X had"        -> bursts of flashes split by >= 1 s dark
Explicit abstentions (a named program, status `abstain`, never the no-rule "none") for
question types no track program can answer: text-only transcripts, failure-mode probes,
line crossings (the painted line is not a detector class), cup contents (VSTAT
Set/Dict/attribution), audio cues (the tracker has no sound) and EOC-Bench object
prompts (`<object N>`).
Time "now" is the last frame: streaming queries get a video cut at the query time.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .tracklog import Track, TrackLog

LETTERS = "ABCDEFGHIJ"
ALIASES = {"people": "person", "persons": "person", "men": "person", "women": "person", "children": "person",
           "mice": "mouse", "knives": "knife", "glasses": "glass", "boxes": "box", "dice": "die"}
# A track must last this long to count as an object (drops one-frame flickers).
MIN_TRACK_S = 0.25
END_WINDOW_S = 0.5  # "now" / "at the end" = the median over this last stretch of frames


@dataclass
class ProgramResult:
    response: str
    program: str
    abstain: bool = False
    explanation: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"response": self.response, "program": self.program, "abstain": self.abstain,
                "explanation": self.explanation, "evidence": self.evidence}


def abstain(program: str, why: str) -> ProgramResult:
    return ProgramResult("", program, abstain=True, explanation=why)


class NoClass(Exception):
    """The question names an object the detector has no class for."""


def resolve_class(noun: str, log: TrackLog) -> str:
    """'cubes' -> 'cube' when the weights have a `cube` class (plural forms and a few aliases)."""
    word = noun.lower().strip()
    names = {n.lower(): n for n in (log.names or sorted({o.cls for f in log.frames for o in f.objects}))}
    candidates = [ALIASES.get(word, word), word]
    if word.endswith("ies"):
        candidates.append(word[:-3] + "y")
    if word.endswith("es"):
        candidates.append(word[:-2])
    if word.endswith("s"):
        candidates.append(word[:-1])
    for c in candidates:
        if c in names:
            return names[c]
        if c.replace(" ", "_") in names:
            return names[c.replace(" ", "_")]
    raise NoClass(f"the detector has no class for {noun!r} (classes: {', '.join(sorted(names)) or 'none'})")


def _real_tracks(log: TrackLog, cls: str) -> list[Track]:
    min_len = max(2, round(MIN_TRACK_S / log.step)) if log.step else 2
    return [t for t in log.tracks(cls).values() if len(t.times) >= min_len]


def count_at_end(log: TrackLog, cls: str, window_s: float = END_WINDOW_S) -> int:
    if not log.frames:
        return 0
    end = log.frames[-1].t
    majority = log.majority_class()
    counts = [log.count_in_frame(f, cls, majority) for f in log.frames if f.t >= end - window_s - 1e-9]
    return int(round(statistics.median(counts))) if counts else 0


# ---------------------------------------------------------------- counting programs


def unique_total(log: TrackLog, cls: str) -> ProgramResult:
    tracks = _real_tracks(log, cls)
    return ProgramResult(str(len(tracks)), "unique_total",
                         explanation=f"{len(tracks)} distinct {cls} tracks over the video",
                         evidence={"track_ids": sorted(t.id for t in tracks)})


COLOUR_SAME = 45.0  # BGR distance under which two tracks may be one individual


def _track_colour(track: Track) -> list[float] | None:
    values = [e["colour"] for e in track.extras if e.get("colour")]
    if not values:
        return None
    return [statistics.median(v[i] for v in values) for i in range(3)]


def _colour_distance(a: list[float] | None, b: list[float] | None) -> float:
    if a is None or b is None:
        return float("inf")
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5


def individuals(tracks: list[Track]) -> list[list[Track]]:
    """Group tracks into individuals: same colour, never on screen together (re-identification by colour)."""
    groups: list[tuple[list[float] | None, list[Track]]] = []
    for tr in sorted(tracks, key=lambda t: t.first):
        col = _track_colour(tr)
        best, best_d = None, COLOUR_SAME
        for i, (gcol, members) in enumerate(groups):
            if any(m.first <= tr.last and tr.first <= m.last for m in members):
                continue  # seen at the same time: two individuals
            d = _colour_distance(col, gcol)
            if d < best_d:
                best, best_d = i, d
        if best is None:
            groups.append((col, [tr]))
        else:
            groups[best][1].append(tr)
    return [members for _, members in groups]


def distinct_so_far(log: TrackLog, cls: str) -> ProgramResult:
    """Distinct individuals: tracks of `cls`, merged when they share a colour and never co-occur."""
    groups = individuals(_real_tracks(log, cls))
    return ProgramResult(str(len(groups)), "distinct_so_far",
                         explanation=f"{len(groups)} distinct {cls} individuals (tracks grouped by colour)",
                         evidence={"groups": [[t.id for t in g] for g in groups]})


def visible_now(log: TrackLog, cls: str) -> ProgramResult:
    n = count_at_end(log, cls)
    return ProgramResult(str(n), "visible_now", explanation=f"{n} {cls} tracked in the last {END_WINDOW_S:g}s")


def final_count(log: TrackLog, cls: str) -> ProgramResult:
    result = visible_now(log, cls)
    result.program = "final_count"
    return result


def _near_border(box: tuple[float, float, float, float], log: TrackLog, margin: float = 6.0) -> bool:
    x1, y1, x2, y2 = box
    return bool(x1 <= margin or y1 <= margin or (log.width and x2 >= log.width - margin) or
                (log.height and y2 >= log.height - margin))


def _segments(track: Track, gap_s: float) -> list[Track]:
    """A track split where it was unseen for more than `gap_s` (an object that left and came back)."""
    out: list[Track] = []
    for i, t in enumerate(track.times):
        if not out or t - out[-1].last > gap_s:
            out.append(Track(track.id, track.cls))
        out[-1].times.append(t)
        out[-1].boxes.append(track.boxes[i])
        out[-1].extras.append(track.extras[i])
    return out


def visits(log: TrackLog, cls: str) -> list[list[Track]]:
    """Visits into view, in order of entry. Each track is split where it went unseen; a piece
    that resumes one lost away from the image border (same colour, within a second) continues
    that visit (an occlusion), any other piece is a new entry."""
    gap = max(0.35, 3 * (log.step or 0.1))
    pieces = sorted((seg for tr in _real_tracks(log, cls) for seg in _segments(tr, gap)), key=lambda t: t.first)
    out: list[list[Track]] = []
    for piece in pieces:
        cont = None
        for v in out:
            prev = v[-1]
            if prev.last < piece.first <= prev.last + 1.0 and not _near_border(prev.boxes[-1], log) \
                    and _colour_distance(_track_colour(prev), _track_colour(piece)) < COLOUR_SAME:
                cont = v
                break
        if cont is None:
            out.append([piece])
        else:
            cont.append(piece)
    return out


def entries(log: TrackLog, cls: str) -> ProgramResult:
    found = visits(log, cls)
    return ProgramResult(str(len(found)), "entries", explanation=f"{len(found)} entries of {cls} into view",
                         evidence={"visits": [[(t.id, t.first) for t in v] for v in found]})


def _joined(visit: list[Track]) -> Track:
    """A visit's pieces as one track (for grouping visits into individuals)."""
    out = Track(visit[0].id, visit[0].cls)
    for piece in visit:
        out.times += piece.times
        out.boxes += piece.boxes
        out.extras += piece.extras
    return out


def window_count(log: TrackLog, cls: str, seconds: float, new_only: bool) -> ProgramResult:
    """VCBench O1-Delta / O2-Gain: individuals of `cls` that came into view in the last `seconds`
    (with `new_only`, only those never seen before the window).

    Visits (see `visits`) are grouped into individuals by colour (`individuals`: same colour,
    never on screen together); "now" is the end of the last frame (the video is cut at the
    query time)."""
    if not log.frames:
        return ProgramResult("0", "window_count", explanation="no frames")
    now = log.frames[-1].t + (log.step or 0.0)
    start = now - seconds
    joined = [_joined(v) for v in visits(log, cls)]
    groups = individuals(joined)
    inside = [g for g in groups if any(v.first >= start - 1e-9 for v in g)]
    if new_only:
        inside = [g for g in inside if min(v.first for v in g) >= start - 1e-9]
    what = "new individuals" if new_only else "individuals"
    return ProgramResult(str(len(inside)), "window_count",
                         explanation=f"{len(inside)} {what} of {cls} entered after t={start:.2f}s "
                                     f"({len(groups)} individuals in {len(joined)} visits)",
                         evidence={"window_start": round(start, 3), "groups": [[v.id for v in g] for g in inside]})


def _longest(log: TrackLog, cls: str) -> Track | None:
    """All sightings of `cls` as one time-ordered path (the families these programs serve have one such object)."""
    tracks = _real_tracks(log, cls)
    if not tracks:
        return None
    out = Track(tracks[0].id, cls)
    for t, b, e in sorted((t, b, e) for tr in tracks for t, b, e in zip(tr.times, tr.boxes, tr.extras)):
        if out.times and abs(out.times[-1] - t) < 1e-9:
            continue
        out.times.append(t)
        out.boxes.append(b)
        out.extras.append(e)
    return out


def cycle_count(log: TrackLog, cls: str) -> ProgramResult:
    """VCBench E2-Periodic: complete back-and-forth cycles of the `cls` object.

    Home is where the object starts (its first box centre); the far end is the turning point
    farthest from home seen so far. A turning point within FAR_SHARE of that distance counts
    as reaching the far end; a cycle completes when the object is back within HOME_SHARE of
    home after reaching it. A swing that turns back halfway reaches neither, so it is not
    counted. Before any full swing is seen a half swing cannot be told from a full one (the
    pads are not a detector class): the program then reads the first turning point as far."""
    path = _longest(log, cls)
    if path is None or len(path.times) < 3:
        return abstain("cycle_count", f"no {cls} was tracked long enough")
    xs = [path.center(i)[0] for i in range(len(path.times))]
    home = xs[0]
    turns = [xs[i] for i in range(1, len(xs) - 1) if abs(xs[i] - home) >= abs(xs[i - 1] - home)
             and abs(xs[i] - home) >= abs(xs[i + 1] - home) and abs(xs[i] - home) > 0]
    reach = max((abs(x - home) for x in turns), default=0.0)
    if reach < 5.0:
        return ProgramResult("0", "cycle_count", explanation=f"the {cls} never left home")
    n, far = 0, False
    for x in xs:
        d = abs(x - home)
        if d >= FAR_SHARE * reach:
            far = True
        elif d <= HOME_SHARE * reach and far:
            n, far = n + 1, False
    return ProgramResult(str(n), "cycle_count",
                         explanation=f"{n} returns home (x={home:.0f}) after reaching {reach:.0f}px away",
                         evidence={"home_x": round(home, 1), "reach_px": round(reach, 1)})


FAR_SHARE = 0.85
HOME_SHARE = 0.1


def _glow_series(log: TrackLog, cls: str) -> list[float] | None:
    """The light's `glow` per frame (frames where it is not detected repeat the last value)."""
    tracks = sorted(_real_tracks(log, cls), key=lambda t: -len(t.times))
    if not tracks:
        return None
    by_time = {t: e.get("glow") for t, e in zip(tracks[0].times, tracks[0].extras)}
    series, last = [], None
    for f in log.frames:
        v = by_time.get(f.t, last)
        if v is not None:
            series.append(v)
            last = v
    return series


def _lit(series: list[float]) -> list[bool] | None:
    """On/off by the midpoint between the lowest and highest tenth (None: the light never changes)."""
    ordered = sorted(series)
    lo = statistics.mean(ordered[: max(1, len(ordered) // 10)])
    hi = statistics.mean(ordered[-max(1, len(ordered) // 10):])
    if hi - lo < 20:
        return None
    return [v > (lo + hi) / 2 for v in series]


def episode_count(log: TrackLog, cls: str, gap_s: float = 1.0, settle_s: float = 0.3) -> ProgramResult:
    """VCBench E2-Episode: bursts of flashes of the `cls` light separated by at least `gap_s` of darkness.

    A burst still lit at the last frame, or dark for less than `settle_s` since, is not over
    and not counted yet."""
    series = _glow_series(log, cls)
    if series is None:
        return abstain("episode_count", f"no {cls} was tracked")
    on = _lit(series) if len(series) >= 3 else None
    if on is None:
        return ProgramResult("0", "episode_count", explanation=f"the {cls} never lit up")
    step = log.step or 0.1
    flashes: list[list[int]] = []
    for i, lit in enumerate(on):
        if lit and (not flashes or flashes[-1][1] != i):
            flashes.append([i, i + 1])
        elif lit:
            flashes[-1][1] = i + 1
    if not flashes:
        return ProgramResult("0", "episode_count", explanation="no flash seen")
    bursts = 1 + sum(1 for a, b in zip(flashes, flashes[1:]) if (b[0] - a[1]) * step >= gap_s - 1e-9)
    if (len(on) - flashes[-1][1]) * step < settle_s - 1e-9:
        bursts -= 1
    return ProgramResult(str(bursts), "episode_count",
                         explanation=f"{len(flashes)} flashes in {bursts} finished bursts (gaps >= {gap_s:g}s)",
                         evidence={"flashes": flashes})


# ---------------------------------------------------------------- pixels over time


def _cross(a, b, c) -> float:
    """z of (a - c) x (b - c): positive when a -> b turns clockwise on screen (y pointing down)."""
    return (a[0] - c[0]) * (b[1] - c[1]) - (b[0] - c[0]) * (a[1] - c[1])


def _top_shift(tr: Track, t0: float, t1: float, step: float, span: float = 0.5) -> float | None:
    """How far the box's top edge moved down (pixels) from before a turn to after it (medians over `span` s)."""
    before = [b[1] for t, b in zip(tr.times, tr.boxes) if t0 - span - step / 2 <= t < t0]
    after = [b[1] for t, b in zip(tr.times, tr.boxes) if t1 < t <= t1 + span + step / 2]
    if not before or not after:
        return None
    return statistics.median(after) - statistics.median(before)


def rotation_count(log: TrackLog, cls: str, want: str = "tighten") -> ProgramResult:
    """Turns of each `cls` track, from the path of its painted mark (`mark_xy`, image pixels).

    A turn is a run of frames in which the mark keeps moving (faster than TURN_SPEED
    pixels per second, pauses of at most 0.3 s inside) and travels at least TURN_MIN
    pixels. Its direction is the sign of the area its path sweeps (shoelace formula),
    which needs no estimate of the pivot: positive in image coordinates (y pointing
    down) is clockwise on screen, i.e. tightening for a camera looking down on the heads.
    """
    turns = {"tighten": 0, "loosen": 0}
    found: list[dict] = []
    step = log.step or 0.1
    pause = max(1, round(0.3 / step))
    for tr in _real_tracks(log, cls):
        pts = [(t, e["mark_xy"], b) for t, e, b in zip(tr.times, tr.extras, tr.boxes) if e.get("mark_xy")]
        if len(pts) < 3:
            continue
        times = [t for t, _, _ in pts]
        xy = [p for _, p, _ in pts]
        tr = Track(tr.id, tr.cls, times, [b for _, _, b in pts])
        moving = [((xy[i + 1][0] - xy[i][0]) ** 2 + (xy[i + 1][1] - xy[i][1]) ** 2) ** 0.5
                  / max(times[i + 1] - times[i], 1e-6) > TURN_SPEED for i in range(len(xy) - 1)]
        i = 0
        while i < len(moving):
            if not moving[i]:
                i += 1
                continue
            j = i
            # a pause of up to `pause` still steps stays inside the turn (the next moving step may be the
            # (pause + 1)-th: the window is one longer than the pause)
            while j + 1 < len(moving) and any(moving[j + 1: j + 2 + pause]):
                j += 1
            for a, b in _split_reversals(xy, moving, i, j):
                turn = _turn(tr, xy, times, a, b, step)
                if turn is not None:
                    turns[turn["kind"]] += 1
                    found.append(turn)
            i = j + 1
    n = turns[want]
    return ProgramResult(str(n), "rotation_count",
                         explanation=f"{turns['tighten']} clockwise (tightening) and {turns['loosen']} "
                                     f"counter-clockwise (loosening) turns of {cls} marks",
                         evidence={"turns": found})


def _sweep(path: list) -> tuple[float, float]:
    """(travel in pixels, signed swept area) of a mark's path (shoelace about its first point)."""
    travel = sum(((b[0] - a[0]) ** 2 + (b[1] - a[1]) ** 2) ** 0.5 for a, b in zip(path, path[1:]))
    return travel, sum(_cross(a, b, path[0]) for a, b in zip(path, path[1:])) / 2


def _split_reversals(xy: list, moving: list[bool], i: int, j: int) -> list[tuple[int, int]]:
    """Steps i..j (one run of motion) cut at an inner pause where the turn reverses.

    Two turns of one bolt in opposite directions with a short still moment between them
    (EC-Bench bolts: tighten, then loosen at once) join into one run, whose swept areas
    cancel. A pause of two or more still steps where the two sides each travel a turn's
    length and sweep opposite ways splits the run there (recursively)."""
    best = None
    k = i
    while k <= j:
        if moving[k]:
            k += 1
            continue
        end = k
        while end + 1 <= j and not moving[end + 1]:
            end += 1
        if end - k + 1 >= 2 and k > i and end < j:
            (t1, a1), (t2, a2) = _sweep(xy[i: k + 1]), _sweep(xy[end + 1: j + 2])
            if t1 >= TURN_MIN and t2 >= TURN_MIN and a1 * a2 < 0:
                best = (k, end)
                break
        k = end + 1
    if best is None:
        return [(i, j)]
    k, end = best
    return _split_reversals(xy, moving, i, k - 1) + _split_reversals(xy, moving, end + 1, j)


def _turn(tr: Track, xy: list, times: list[float], i: int, j: int, step: float) -> dict | None:
    """One turn from steps i..j of a mark's path, or None when it travels too little to be one."""
    travel, area = _sweep(xy[i: j + 2])
    cue = "rotation"
    if travel and abs(area) / travel ** 2 < CLEAR_TURN:
        # seen almost edge-on the mark's path is nearly straight and its sweep is noise;
        # then the head's height decides: tightening sinks it, loosening raises it
        sink = _top_shift(tr, times[i], times[j + 1], step)
        if sink is not None and abs(sink) >= 1.0:
            area, cue = sink, "sink"
    if travel < TURN_MIN or area == 0:
        return None
    return {"track": tr.id, "t0": times[i], "t1": times[j + 1], "travel_px": round(travel, 1),
            "area": round(area, 1), "cue": cue, "kind": "tighten" if area > 0 else "loosen"}


TURN_SPEED = 15.0  # pixels per second
CLEAR_TURN = 0.03  # |swept area| / travel^2 under which a turn's direction is unclear (a semicircle: 0.16)
TURN_MIN = 20.0  # pixels (a real turn moves the mark 40+ px; detector jitter a few)


MORSE = {".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g", "....": "h",
         "..": "i", ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n", "---": "o", ".--.": "p",
         "--.-": "q", ".-.": "r", "...": "s", "-": "t", "..-": "u", "...-": "v", ".--": "w", "-..-": "x",
         "-.--": "y", "--..": "z", "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4",
         ".....": "5", "-....": "6", "--...": "7", "---..": "8", "----.": "9"}


def blink_decode(log: TrackLog, cls: str) -> ProgramResult:
    """Morse from a light's on/off timing.

    The light's `glow` per frame (the tracked `cls` object; frames where it is not
    detected repeat the last value) is split into on/off by the midpoint between its
    lowest and highest tenth; the shortest flash is one unit; flashes longer than two
    units are dashes; dark gaps longer than two units end a letter, longer than five a word.
    """
    series = _glow_series(log, cls)
    if series is None:
        return abstain("blink_decode", f"no {cls} was tracked")
    if len(series) < 3:
        return abstain("blink_decode", "too few frames of the light")
    on = _lit(series)
    if on is None:
        return abstain("blink_decode", "the light never changes")
    runs: list[tuple[bool, int]] = []
    for state in on:
        if runs and runs[-1][0] == state:
            runs[-1] = (state, runs[-1][1] + 1)
        else:
            runs.append((state, 1))
    while runs and not runs[0][0]:
        runs.pop(0)
    while runs and not runs[-1][0]:
        runs.pop()
    flashes = [n for state, n in runs if state]
    if not flashes:
        return abstain("blink_decode", "no flash seen")
    unit = min(flashes)
    letters, current = [], ""
    for state, n in runs:
        if state:
            current += "-" if n > 2 * unit else "."
        elif n > 5 * unit:
            letters += [current, " "]
            current = ""
        elif n > 2 * unit:
            letters.append(current)
            current = ""
    letters.append(current)
    word = "".join(MORSE.get(code, "?") if code != " " else " " for code in letters if code).strip()
    return ProgramResult(word, "blink_decode", explanation=f"flashes {' '.join(l for l in letters if l)} "
                                                           f"(unit {unit} frames) -> {word!r}",
                         evidence={"codes": [l for l in letters if l], "unit_frames": unit})


def stack_count(log: TrackLog, cls: str) -> ProgramResult:
    """Objects on a stack that may be hidden: those seen at the start, plus arrivals, minus departures.

    An arrival is a track that begins after the start and then moves down by more than
    half an object's height; a departure is one that ends before the end, after moving up
    by more than half an object's height (objects come from above and leave upwards,
    while the stack itself is static and may be hidden).
    """
    if not log.frames:
        return ProgramResult("0", "stack_count", explanation="no frames")
    # objects move fast through the top of the frame: a confirmed track of 2 frames counts here
    tracks = [t for t in log.tracks(cls).values() if len(t.times) >= 2]
    if not tracks:
        return ProgramResult("0", "stack_count", explanation=f"no {cls} tracks")
    heights = [b[3] - b[1] for t in tracks for b in t.boxes]
    t0, t_end = log.frames[0].t, log.frames[-1].t
    settle = MIN_TRACK_S + log.step
    initial = [t for t in tracks if t.first <= t0 + settle]

    def yc(t: Track) -> list[float]:
        return [(b[1] + b[3]) / 2 for b in t.boxes]

    h = statistics.median(heights)
    # an arrival comes down from above; a departure ends on its way up (the stack itself is static)
    arrivals = [t for t in tracks if t.first > t0 + settle and max(yc(t)) - yc(t)[0] > 0.5 * h]
    departures = [t for t in tracks if t.last < t_end - settle and max(yc(t)) - yc(t)[-1] > 0.5 * h]
    n = max(0, len(initial) + len(arrivals) - len(departures))
    return ProgramResult(str(n), "stack_count",
                         explanation=f"{len(initial)} at the start + {len(arrivals)} arrived - {len(departures)} left",
                         evidence={"initial": [t.id for t in initial], "arrivals": [t.id for t in arrivals],
                                   "departures": [t.id for t in departures]})


# ---------------------------------------------------------------- shell game


def _nearest(tracks: list[Track], t: float, x: float) -> tuple[Track | None, float]:
    best, best_d = None, float("inf")
    for tr in tracks:
        if not tr.times or tr.first > t + 1e-9 or tr.last < t - 1e-9:
            continue
        i = min(range(len(tr.times)), key=lambda k: abs(tr.times[k] - t))
        d = abs(tr.center(i)[0] - x)
        if d < best_d:
            best, best_d = tr, d
    return best, best_d


def _lifted_cup(cups: list[Track], log: TrackLog, within_s: float = 4.0) -> Track | None:
    """The cup track whose box rose most (relative to its height) early in the video, if one clearly did."""
    best, best_rise = None, 0.0
    start = log.frames[0].t if log.frames else 0.0
    for c in cups:
        early = [(b[1], b[3] - b[1]) for t, b in zip(c.times, c.boxes) if t <= start + within_s]
        if len(early) < 3:
            continue
        rise = (early[0][0] - min(y for y, _ in early)) / max(statistics.median(h for _, h in early), 1.0)
        if rise > best_rise:
            best, best_rise = c, rise
    return best if best_rise >= 0.2 else None


def shell_game(log: TrackLog, choices: list[str]) -> ProgramResult:
    """Follow the cup that covered the ball, then read its place among the cups in the final frame.

    1. The ball's last sighting (it disappears when a cup is lowered over it) fixes the
       hiding cup: the cup track nearest to the ball horizontally at that moment. If the
       ball was never detected, the cup that was lifted to show it (the cup track whose
       box rose most, by at least 20% of its height, in the first 4 s) is the one.
    2. That cup's track is followed to the end; if ByteTrack loses it, the chain moves
       to the cup track that starts closest to where it was lost.
    3. In the final frames, the cups are ordered left to right by box centre; the
       followed cup's rank picks the choice naming left / middle / right.
    """
    try:
        cup_cls, ball_cls = resolve_class("cup", log), resolve_class("ball", log)
    except NoClass as exc:
        return abstain("shell_game", str(exc))
    balls = sorted(log.tracks(ball_cls).values(), key=lambda t: t.last)
    cups = list(log.tracks(cup_cls).values())
    if not cups:
        return abstain("shell_game", "no cup was tracked")
    cup, how = None, ""
    if balls:
        ball = balls[-1]
        t_hide = ball.last
        bx = ball.center(-1)[0]
        cup, _ = _nearest(cups, t_hide, bx)
        if cup is None:  # no cup in that very frame: the nearest cup at its first sighting after
            later = [c for c in cups if c.first >= t_hide]
            cup = min(later, key=lambda c: (c.first, abs(c.center(0)[0] - bx))) if later else None
        how = f"ball track {ball.id} last seen at t={t_hide:.2f}s"
    if cup is None:  # the ball was never seen: the cup lifted to show it is the one hiding it
        lifted = _lifted_cup(cups, log)
        if lifted is None:
            return abstain("shell_game", f"saw {len(balls)} ball tracks and no cup being lifted")
        cup, how = lifted, f"no ball seen; cup track {lifted.id} was lifted at the start"
    chain = [cup.id]
    width = statistics.median(b[2] - b[0] for c in cups for b in c.boxes)
    while cup.last < log.duration - log.step - 1e-9:
        x_lost = cup.center(-1)[0]
        nxt = [c for c in cups if c.id not in chain and cup.last - log.step * 2 <= c.first <= cup.last + 1.0
               and abs(c.center(0)[0] - x_lost) < 1.5 * width]
        if not nxt:
            break
        cup = min(nxt, key=lambda c: (abs(c.center(0)[0] - x_lost), c.first))
        chain.append(cup.id)
    majority = log.majority_class()
    final = log.frames[-1]
    final_cups = [o for o in final.objects if majority.get(o.id) == cup_cls]
    x_followed = cup.center(-1)[0]
    if len(final_cups) < 2:  # fall back to the last frame that shows at least three cups
        for f in reversed(log.frames):
            fc = [o for o in f.objects if majority.get(o.id) == cup_cls]
            if len(fc) >= 3:
                final_cups = fc
                break
    xs = sorted(o.center[0] for o in final_cups)
    if not xs:
        return abstain("shell_game", "no cups in the final frames")
    rank = min(range(len(xs)), key=lambda i: abs(xs[i] - x_followed))
    place = "left" if rank == 0 else ("right" if rank == len(xs) - 1 else "middle")
    letter = next((LETTERS[i] for i, c in enumerate(choices) if place in c.lower()), None)
    if letter is None:
        return abstain("shell_game", f"no choice names the {place} cup")
    return ProgramResult(letter, "shell_game",
                         explanation=f"{how}: cup track {chain[0]}; followed {chain}; it ends {place} of {len(xs)} cups",
                         evidence={"cup_chain": chain, "place": place})


# ---------------------------------------------------------------- rules

Handler = Callable[[re.Match, str, list[str], TrackLog], ProgramResult]
NOUN = r"([a-z][a-z ]*?)"


def _rotation(match: re.Match, log: TrackLog) -> ProgramResult:
    try:
        cls = resolve_class("bolt", log)
    except NoClass as exc:
        return abstain("rotation_count", str(exc))
    return rotation_count(log, cls, "tighten" if match.group(1) == "tightening" else "loosen")


def _rotation_ec(match: re.Match, log: TrackLog) -> ProgramResult:
    try:
        cls = resolve_class("bolt", log)
    except NoClass as exc:
        return abstain("rotation_count", str(exc))
    return rotation_count(log, cls, "loosen" if match.group(1).startswith("counter") else "tighten")


def _with_class(program: Callable[[TrackLog, str], ProgramResult], name: str) -> Handler:
    def handler(match: re.Match, question: str, choices: list[str], log: TrackLog) -> ProgramResult:
        try:
            cls = resolve_class(match.group(1), log)
        except NoClass as exc:
            return abstain(name, str(exc))
        return program(log, cls)
    return handler


@dataclass
class Rule:
    name: str
    pattern: re.Pattern
    handler: Handler
    features: dict[str, str] = field(default_factory=dict)  # feature -> noun ("{1}" = the matched noun)

    def feature_nouns(self, match: re.Match) -> dict[str, str]:
        return {f: (match.group(1) if noun == "{1}" else noun) for f, noun in self.features.items()}


def _explicit_abstain(name: str, why: str) -> Handler:
    return lambda m, q, c, log: abstain(name, why)


ABSTAIN_RULES: list[Rule] = [
    Rule("text_only", re.compile(r"^text account of the video"),
         _explicit_abstain("text_only", "a text-only (transcript) question: there is no video to track")),
    Rule("failure_probe", re.compile(r"how many times (?:is a bolt turned|does a ball go into)|counting bolts from the left"
                                     r"|which cup is involved|right after the \w+ turn"
                                     r"|between \d+(?:\.\d+)? and \d+(?:\.\d+)? seconds into the video"
                                     r"|in the first \d+(?:\.\d+)? seconds of the video|\d seconds into the video\?"
                                     r"|look at the video up to|swap of two cups|time the stack changes"
                                     r"|counting the balls' lanes"),
         _explicit_abstain("failure_probe", "a failure-mode probe: no tracking program for it")),
    Rule("line_crossings", re.compile(r"crossed the .*line"),
         _explicit_abstain("line_crossings", "line crossings: the line is not a detector class")),
    Rule("cup_contents", re.compile(r"which cups? (?:hold|did the)|balls are in each cup|which cups held"),
         _explicit_abstain("cup_contents", "what hidden cups hold (VSTAT Set/Dict): no containment program")),
    Rule("audio_cue", re.compile(r"beep"), _explicit_abstain("audio_cue", "the tracker reads no audio")),
    Rule("object_prompt", re.compile(r"<object \d+>"),
         _explicit_abstain("object_prompt", "an EOC-Bench visual prompt: no prompt-grounded program")),
]

def _window(match: re.Match, question: str, choices: list[str], log: TrackLog) -> ProgramResult:
    try:
        cls = resolve_class(match.group(1), log)
    except NoClass as exc:
        return abstain("window_count", str(exc))
    return window_count(log, cls, float(match.group(3)), new_only=bool(match.group(2)))


RULES: list[Rule] = ABSTAIN_RULES + [
    Rule("window_count", re.compile(rf"how many {NOUN} (that have never (?:appeared|been seen) before )?(?:have|has) "
                                    r"(?:appeared|entered the view|come into view) in the past (\d+(?:\.\d+)?) "
                                    r"seconds"), _window, features={"colour": "{1}"}),
    Rule("cycle_count", re.compile(rf"how many complete (?:cycles|swings|back-and-forth swings) has the {NOUN} "
                                   r"(?:made|done|completed)"), _with_class(cycle_count, "cycle_count")),
    Rule("episode_count", re.compile(rf"how many (?:flashing )?episodes has the {NOUN} had"),
         _with_class(episode_count, "episode_count"), features={"glow": "{1}"}),
    Rule("rotation_count", re.compile(r"how many times was a bolt turned (counter-clockwise|clockwise)"),
         lambda m, q, c, log: _rotation_ec(m, log), features={"mark_xy": "bolt"}),
    Rule("shell_game", re.compile(r"which cup (?:hides|is hiding|has|covers) the ball"),
         lambda m, q, c, log: shell_game(log, c)),
    Rule("rotation_count", re.compile(r"how many (tightening|loosening) actions"),
         lambda m, q, c, log: _rotation(m, log), features={"mark_xy": "bolt"}),
    Rule("blink_decode", re.compile(rf"the {NOUN} (?:flashes|blinks|signals) .*morse"),
         _with_class(blink_decode, "blink_decode"), features={"glow": "{1}"}),
    Rule("stack_count", re.compile(rf"how many {NOUN} are (?:in|on) the stack at the end"),
         _with_class(stack_count, "stack_count")),
    Rule("visible_now", re.compile(rf"how many {NOUN} (?:are|is) (?:currently )?(?:visible|in view|on screen)"
                                   r"(?: at this moment| now| right now| at the moment)"),
         _with_class(visible_now, "visible_now")),
    Rule("distinct_so_far", re.compile(rf"how many (?:different |distinct |unique )?{NOUN} (?:have|has) "
                                       r"(?:appeared|been seen|been visible|shown up|come into view)"),
         _with_class(distinct_so_far, "distinct_so_far"), features={"colour": "{1}"}),
    Rule("entries", re.compile(rf"how many times (?:has|have|did) (?:a |an |the )?{NOUN} "
                               r"(?:entered|enter|come into|came into) (?:the )?(?:view|frame|scene)"),
         _with_class(entries, "entries"), features={"colour": "{1}"}),
    Rule("unique_total", re.compile(rf"how many {NOUN} are (?:present|there) in the (?:scene|video)"),
         _with_class(unique_total, "unique_total")),
    Rule("final_count", re.compile(rf"how many {NOUN} are (?:there |visible |left |remaining )?at the end"),
         _with_class(final_count, "final_count")),
]


def match_rule(question: str) -> tuple[Rule, re.Match] | None:
    text = " ".join(question.lower().split())
    for rule in RULES:
        m = rule.pattern.search(text)
        if m:
            return rule, m
    return None


def features_for(question: str, names: list[str]) -> dict[str, set[str]]:
    """The appearance features the matched rule needs, per detector class (for run_tracking)."""
    found = match_rule(question)
    if found is None:
        return {}
    rule, m = found
    probe = TrackLog([], 1.0, 0, 0, names=list(names))
    out: dict[str, set[str]] = {}
    for feature, noun in rule.feature_nouns(m).items():
        try:
            out.setdefault(feature, set()).add(resolve_class(noun, probe))
        except NoClass:
            continue
    return out


def answer_question(question: str, choices: list[str], log: TrackLog) -> ProgramResult:
    """Pick the first rule whose pattern matches and run its program; abstain when none does."""
    found = match_rule(question)
    if found is None:
        return abstain("none", "no tracking program matches this question")
    rule, m = found
    return rule.handler(m, question, list(choices), log)
