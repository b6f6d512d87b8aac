"""streaming_count: the VCBench stand-in. Objects of several kinds enter and leave while the camera drifts.

Each video has three questions, one per subtype, each about one kind, asked at 3-6
query times (VCBench eval rows): O1-Snap (how many X are visible now), O2-Unique (how
many different X so far) and E1-Action (how many times has an X entered the view so
far). Individuals of one kind differ in colour, so "different" is decidable; an
individual may come back, which is what separates O2-Unique from E1-Action.

Definitions the answers follow (and the validator re-derives from the tracks):
- an object is *in view* in a frame when at least half of its silhouette lies inside
  the image (`in_frame` >= 0.5); it *enters* at the first frame of each in-view run;
- it is *visible* (O1-Snap) when at least half of its silhouette shows (`visible` >= 0.5);
- the answer at query time q counts what happened in frames with time < q. Query times
  sit half a frame after a frame (q = (k + 0.5) / fps), so the cut video ends on frame k
  and no answer depends on a later frame. Query frames where an object of the asked
  kind is near a threshold (half out of the frame, half hidden) are never chosen.

The plan (layout, questions, query frames, counts) is decided on a geometry trace
(`clip.trace_clip`: each frame's silhouette stats from the renderer's own `silhouettes`,
no pixels), then rendered once; the rendered truth must equal the trace. So balance.py
can redraw a video at plan cost (`plan_answers`), and a plan whose memory questions
(O2-Unique, E1-Action) could all be read off the last frame before each query
(`shown_now`) is rejected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from statebox.benchmarks.synthetic import clip as clip_mod
from statebox.benchmarks.synthetic.clip import (FPS, HEIGHT, WIDTH, RenderedClip, event, render_clip, save_clip,
                                                trace_clip)
from statebox.benchmarks.synthetic.families import balance
from statebox.benchmarks.synthetic.families.common import (LayoutRejected, VideoRecord, ease, layout_signature,
                                                           lerp, rng_for)
from statebox.benchmarks.synthetic.geometry import Sphere, aim, frustum_mesh
from statebox.benchmarks.synthetic.render import Renderer, SceneObject

NAME = "streaming_count"
BENCH = "vcbench"
CLASSES = ("can", "cone", "ball")
ANNOTATION = "vcbench_eval.jsonl"
COST = 4
SIZES = {"tiny": 2, "small": 10, "full": 50}
BALANCE_EVERY_PREFIX = True  # each question asks 3-6 query points, a varying count (balance.py)

GROUND = (150, 158, 166)  # BGR: a warm grey floor
COLOURS = [(50, 50, 210), (60, 170, 60), (200, 110, 40), (40, 200, 235), (170, 70, 170), (30, 130, 250),
           (230, 230, 230)]
PLURAL = {"can": "cans", "cone": "cones", "ball": "balls"}
LANES = (-0.7, -0.1, 0.5, 1.1, 1.7, 2.3, 2.9)
OFF_X = 7.2
SPEED = 2.4
DURATION = 20.0
IN_VIEW = 0.5
SUBTYPES = ("O1-Snap", "O2-Unique", "E1-Action")
SOURCE = "synthetic"


def n_videos(size: str) -> int:
    return SIZES[size]


@dataclass
class Visit:
    start: float
    side_in: int
    stop_x: float
    dwell: float
    side_out: int

    def times(self) -> tuple[float, float, float, float]:
        t1 = self.start + abs(self.stop_x - self.side_in * OFF_X) / SPEED
        t2 = t1 + self.dwell
        t3 = t2 + abs(self.side_out * OFF_X - self.stop_x) / SPEED
        return self.start, t1, t2, t3

    def x_at(self, t: float) -> float | None:
        t0, t1, t2, t3 = self.times()
        if t < t0 or t > t3:
            return None
        if t < t1:
            return lerp(self.side_in * OFF_X, self.stop_x, ease((t - t0) / (t1 - t0)))
        if t < t2:
            return self.stop_x
        return lerp(self.stop_x, self.side_out * OFF_X, ease((t - t2) / (t3 - t2)))


@dataclass
class Individual:
    oid: int
    kind: str
    colour: tuple[int, int, int]
    lane: float
    visits: list[Visit]

    def part(self, x: float):
        y = self.lane
        if self.kind == "can":
            return frustum_mesh((x, y), 0.0, 0.26, 0.26, 0.62, self.colour, 20, gloss=0.4)
        if self.kind == "cone":
            return frustum_mesh((x, y), 0.0, 0.32, 0.03, 0.7, self.colour, 20, gloss=0.2)
        return Sphere((x, y, 0.3), 0.3, self.colour)


class Plan:
    def __init__(self, rng) -> None:
        kinds = [k for k in CLASSES for _ in range(int(rng.integers(1, 4)))]
        if len(kinds) > len(LANES):
            kinds = [str(k) for k in rng.permutation(kinds)[: len(LANES)]]
        lanes = [float(v) for v in rng.permutation(LANES)]
        colour_ids = {k: [int(c) for c in rng.permutation(len(COLOURS))] for k in CLASSES}
        self.individuals: list[Individual] = []
        for n, kind in enumerate(sorted(kinds, key=CLASSES.index)):
            colour = COLOURS[colour_ids[kind].pop()]
            visits, t = [], float(rng.uniform(0.3, 7.0))
            for _ in range(int(rng.choice([1, 1, 2, 2, 3]))):
                visit = Visit(t, int(rng.choice([-1, 1])), float(rng.uniform(-2.2, 2.2)), float(rng.uniform(0.8, 3.0)),
                              int(rng.choice([-1, 1])))
                if visit.start > DURATION - 3.0:
                    break
                visits.append(visit)
                t = visit.times()[3] + float(rng.uniform(0.5, 4.0))
            self.individuals.append(Individual(n + 1, kind, colour, lanes[n], visits))
        self.drift = (float(rng.uniform(0.3, 0.9)), float(rng.uniform(7, 14)), float(rng.uniform(0, 2 * math.pi)))

    def camera(self, t: float):
        amp, period, phase = self.drift
        cx = amp * math.sin(2 * math.pi * t / period + phase)
        return aim((cx, -5.6, 3.3), (0.5 * cx, 1.1, 0.3), 56.0, WIDTH, HEIGHT)

    def scene(self, t: float) -> list[SceneObject]:
        objects = []
        for ind in self.individuals:
            for visit in ind.visits:
                x = visit.x_at(t)
                if x is not None:
                    objects.append(SceneObject(ind.oid, ind.kind, [ind.part(x)], state={"colour": list(ind.colour)}))
                    break
        return objects


def view_events(clip, individuals: list[Individual]) -> tuple[list[dict], dict[int, list[bool]]]:
    """Enter/exit events from the rendered frames; rejects flickering (in, out, in within 5 frames)."""
    in_view: dict[int, list[bool]] = {ind.oid: [] for ind in individuals}
    for seen in clip.seen:
        for ind in individuals:
            s = seen.get(ind.oid)
            in_view[ind.oid].append(bool(s and s.stats.in_frame >= IN_VIEW))
    events = []
    for ind in individuals:
        flags = in_view[ind.oid]
        if flags[0]:
            raise LayoutRejected("an object is in view in the first frame")
        changes = [f for f in range(1, len(flags)) if flags[f] != flags[f - 1]]
        if any(b - a < 5 for a, b in zip(changes, changes[1:])):
            raise LayoutRejected("an object flickers in and out of view")
        for f in changes:
            events.append(event(clip.fps, f, "enter" if flags[f] else "exit", [ind.oid], cls=ind.kind))
    return events, in_view


def answers_at(clip, individuals, in_view, kind: str, subtype: str, frame: int) -> int:
    """The answer for `subtype` about `kind` from frames 0..frame only."""
    oids = [ind.oid for ind in individuals if ind.kind == kind]
    if subtype == "O1-Snap":
        return sum(1 for oid in oids if oid in clip.seen[frame] and clip.seen[frame][oid].stats.visible >= 0.5)
    if subtype == "O2-Unique":
        return sum(1 for oid in oids if any(in_view[oid][: frame + 1]))
    return sum(1 for oid in oids for f in range(1, frame + 1) if in_view[oid][f] and not in_view[oid][f - 1])


def shown_now(clip, individuals: list[Individual], kind: str, frame: int) -> int:
    """What frame `frame` alone says to a memory question about `kind`: the individuals at least half
    visible in it (validate's single-frame shortcut reads only them, each as just come into view).
    Rounded as the track rows are, since that shortcut reads the rows."""
    return sum(1 for ind in individuals if ind.kind == kind and ind.oid in clip.seen[frame]
               and round(clip.seen[frame][ind.oid].stats.visible, 4) >= IN_VIEW)


def unambiguous(clip, individuals, kind: str, subtype: str, frame: int) -> bool:
    for ind in individuals:
        s = clip.seen[frame].get(ind.oid) if ind.kind == kind else None
        if s is None:
            continue
        if 0.25 < s.stats.in_frame < 0.75:
            return False
        if subtype == "O1-Snap" and 0.15 < s.stats.visible < 0.75:
            return False
    return True


def pick_queries(rng, clip, individuals, events, kind: str, subtype: str) -> list[int]:
    n = clip.n_frames
    valid = [f for f in range(10, n) if unambiguous(clip, individuals, kind, subtype, f)]
    kind_events = [e["frame"] for e in events if e["data"]["cls"] == kind and (subtype == "O1-Snap" or e["kind"] == "enter")]
    preferred = [f for f in valid if any(2 <= f - e <= 12 for e in kind_events)]
    want = int(rng.integers(3, 7))
    chosen: list[int] = []
    for pool in (preferred, valid):
        for f in (int(x) for x in rng.permutation(pool)):
            if len(chosen) < want and all(abs(f - c) >= 10 for c in chosen):
                chosen.append(f)
    if len(chosen) < 3:
        raise LayoutRejected(f"too few unambiguous query times for {subtype} {kind}")
    return sorted(chosen)


def render(noise_seed: int, plan: Plan, n_frames: int) -> RenderedClip:
    """The pixels of a decided plan (the renderer's noise seeded as in the draw)."""
    renderer = Renderer(WIDTH, HEIGHT, GROUND, noise_sigma=1.5, seed=noise_seed)
    return render_clip(renderer, n_frames, FPS, lambda i, t: (plan.camera(t), plan.scene(t)))


def trace(plan: Plan, n_frames: int) -> RenderedClip:
    """What each frame of `plan` would show (in view, visible), from geometry alone (clip.trace_clip)."""
    return trace_clip(n_frames, FPS, WIDTH, HEIGHT, lambda i, t: (plan.camera(t), plan.scene(t)))


def same_truth(traced: RenderedClip, rendered: RenderedClip) -> None:
    """The rendered clip records what the plan was decided on (the stretch variant renders K frames per frame)."""
    if rendered.seen[::clip_mod.TIME_SCALE] != traced.seen:
        raise RuntimeError(f"{NAME}: the rendered clip's truth differs from the geometry trace it was planned on")


Question = tuple[str, str, list[int], list[int]]


def draw(seed: int, index: int, salt: str = "") -> tuple[int, Plan, RenderedClip, list[dict], dict[int, list[bool]], list[Question]]:
    """Video `index`'s draw as make_video makes it, decided on a geometry trace without rendering: the
    renderer's noise seed, plan, traced clip (stats and states, no pixels), view events, per-individual
    in-view flags, questions (subtype, kind, query frames, counts). Counterfactual twins replay it from
    the suite seed (`salt`: balance.py's redraw of the video)."""
    rng = rng_for(seed, NAME, index, salt)
    noise_seed = int(rng.integers(1 << 31))
    n_frames = int(DURATION * FPS)
    for _ in range(200):
        plan = Plan(rng)
        clip = trace(plan, n_frames)
        try:
            events, in_view = view_events(clip, plan.individuals)
            entered = sorted({e["data"]["cls"] for e in events if e["kind"] == "enter"}, key=CLASSES.index)
            if not entered:
                raise LayoutRejected("nothing enters the view")
            questions = []
            for subtype in SUBTYPES:
                kind = str(rng.choice(entered))
                frames = pick_queries(rng, clip, plan.individuals, events, kind, subtype)
                counts = [answers_at(clip, plan.individuals, in_view, kind, subtype, f) for f in frames]
                questions.append((subtype, kind, frames, counts))
            if all(c == shown_now(clip, plan.individuals, kind, f) for subtype, kind, frames, counts in questions
                   if subtype != "O1-Snap" for f, c in zip(frames, counts)):
                raise LayoutRejected("the last frame alone gives every answer of the memory questions")
        except LayoutRejected:
            continue
        break
    else:  # pragma: no cover
        raise RuntimeError(f"{NAME}: no valid plan")
    return noise_seed, plan, clip, events, in_view, questions


def plan_answers(seed: int, index: int, n: int, salt: str) -> list[tuple[str, str]]:
    """(subtype, count) of every query point of video `index` drawn with `salt`, from its trace (balance.py)."""
    *_, questions = draw(seed, index, salt)
    return [(subtype, str(c)) for subtype, _, _, counts in questions for c in counts]


def make_video(family_dir: Path, seed: int, index: int, n: int) -> VideoRecord:
    noise_seed, plan, traced, events, _, questions = draw(seed, index, balance.item_salt(NAME, seed, index, n))
    clip = render(noise_seed, plan, traced.n_frames)
    same_truth(traced, clip)
    stem = f"{NAME}_{index:04d}"
    answers = {"questions": [{"subtype": s, "kind": k, "frames": f, "counts": c} for s, k, f, c in questions]}
    params = {"individuals": [{"id": i.oid, "kind": i.kind, "colour": list(i.colour), "lane": i.lane,
                               "visits": [[round(x, 3) for x in v.times()] for v in i.visits]} for i in plan.individuals],
              "drift": [round(x, 3) for x in plan.drift], "in_view_threshold": IN_VIEW,
              **balance.redraw_params(NAME, seed, index, n)}
    video = save_clip(family_dir, NAME, stem, clip, events, params, answers)
    rows = []
    for j, (subtype, kind, frames, counts) in enumerate(questions):
        qid = f"{stem}_q{j}"
        question = {"O1-Snap": f"How many {PLURAL[kind]} are visible at this moment?",
                    "O2-Unique": f"How many different {PLURAL[kind]} have appeared so far?",
                    "E1-Action": f"How many times has a {kind} entered the view so far?"}[subtype]
        for i, (f, c) in enumerate(zip(frames, counts)):
            rows.append({"q_id": f"{qid}_{i}", "query_index": i, "id": qid, "source_dataset": SOURCE,
                         "video_path": video, "question": question, "counting_type": subtype.split("-")[0],
                         "counting_subtype": subtype, "query_time": round((f + 0.5) / FPS, 2), "count": c})
    sig = [[i.lane, i.oid] + [x for v in i.visits for x in v.times()] for i in plan.individuals]
    return VideoRecord(stem, rows, layout_signature([x for s in sig for x in s]))
