"""eoc_objects: EOC-Bench-format object-referenced questions about past, present and future states.

Four coloured mats in a row; three objects (a cube, a cup, a ball) stand on three of
them. Objects slide, one at a time, along an arc to the free mat. The video is cut
while the last move is under way; the moving object is marked on the last frame by a
red box (EOC-Bench's default visual prompt, drawn into the video), and the row also
carries `box`, `point` and `mask` (COCO RLE) for it, as the released schema does.
Five rows per video, all about `<object 0>`:
- Past, Location Retrospection (single-choice): which mat was it on at the start?
- Past, Object State Retrospection (multi-choice): on which mats has it rested?
- Past, Absolute Time Perception (open-ended, seconds, MSTA): how many seconds ago did
  it start moving?
- Present, Immediate State Recognition (single-choice): what is it doing now (still,
  sliding left, sliding right)?
- Future, Trajectory and Motion Prediction (single-choice): which mat will it reach?
Ground-truth state: `mat` (the mat an object rests on, null while moving) and
`moving` (`left`, `right` or null).

The `duration` variant (lengths.py) sets `common.LENGTH_SCALE` to s: the video lasts
exactly round(s x frames) and is cut at the same fraction of the marked object's last
move, which now starts where that leaves it. The moves before it keep their times while
each ends at least GAP[0] before the last move starts (a shorter scene drops the later
ones); a longer scene adds distractor moves by the two other objects, drawn by the
family's rules from an independent (spawned) stream, then a still dwell shorter than
one more move. The marked object's last move goes to whichever mat is then free, and
every answer is the generator's, from the new plan; a plan whose last move would start
before the family's first-move time is no valid plan (the length is skipped).
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from statebox.benchmarks.synthetic.clip import FPS, HEIGHT, WIDTH, event, render_clip, save_clip
from statebox.benchmarks.synthetic.families import balance, common
from statebox.benchmarks.synthetic.families.common import VideoRecord, ease, layout_signature, lerp, rng_for
from statebox.benchmarks.synthetic.geometry import Part, Sphere, aim, box_mesh, frustum_mesh
from statebox.benchmarks.synthetic.render import Renderer, SceneObject

NAME = "eoc_objects"
BENCH = "eocbench"
CLASSES = ("cube", "cup", "ball")
ANNOTATION = "eocbench.jsonl"
COST = 2
SIZES = {"tiny": 2, "small": 6, "full": 40}

GROUND = (128, 128, 124)
MATS = ("red", "blue", "green", "yellow")
MAT_BGR = {"red": (50, 50, 190), "blue": (170, 90, 40), "green": (60, 150, 60), "yellow": (40, 190, 210)}
MAT_X = (-2.1, -0.7, 0.7, 2.1)
OBJ_COLOUR = {"cube": (190, 118, 52), "cup": (48, 52, 182), "ball": (40, 205, 240)}
MOVE_S = 1.6
FIRST = (0.6, 1.2)  # seconds before the first move starts
GAP = (0.4, 1.0)  # seconds of stillness between one move's end and the next one's start
LETTERS = "abcd"
PROMPT_RED = (0, 0, 255)


def n_videos(size: str) -> int:
    return SIZES[size]


class Plan:
    def __init__(self, rng) -> None:
        kinds = list(CLASSES)
        mats = [int(m) for m in rng.permutation(4)[:3]]
        self.start = {k: m for k, m in zip(kinds, mats)}
        where = dict(self.start)
        self.moves: list[tuple[str, int, int, float]] = []  # kind, from mat, to mat, start time
        t = float(rng.uniform(*FIRST))
        for _ in range(int(rng.integers(3, 6))):
            free = ({0, 1, 2, 3} - set(where.values())).pop()
            kind = str(rng.choice(kinds))
            t = round(t * FPS) / FPS  # moves start on a frame
            self.moves.append((kind, where[kind], free, t))
            where[kind] = free
            t += MOVE_S + float(rng.uniform(*GAP))
        self.marked = self.moves[-1][0]
        # the cut: part-way through the last move
        self.cut_part = float(rng.uniform(0.35, 0.65))
        self.cut_frame = int(round((self.moves[-1][3] + self.cut_part * MOVE_S) * FPS))

    def rescale(self, more) -> None:
        """Refit the plan to LENGTH_SCALE times its length (see the module docstring); `more` is the
        independent stream the added distractor moves are drawn from."""
        n_frames = common.scaled_frames(self.cut_frame + 1)
        if n_frames == self.cut_frame + 1:  # the suite's own length: the suite's own plan
            return
        cut = n_frames - 1
        last_start = (cut - round(self.cut_part * MOVE_S * FPS)) / FPS
        room = last_start - GAP[0]  # every earlier move ends by then
        if last_start < FIRST[0]:
            raise ValueError(f"the marked object's last move would start at {last_start:g} s")
        kept = [m for m in self.moves[:-1] if m[3] + MOVE_S <= room]
        where = dict(self.start)
        for kind, _, to, _ in kept:
            where[kind] = to
        if kept and len(kept) == len(self.moves) - 1:  # a longer scene: distractor moves by the other objects
            others = [k for k in CLASSES if k != self.marked]
            while True:
                t = round((kept[-1][3] + MOVE_S + float(more.uniform(*GAP))) * FPS) / FPS
                kind = str(more.choice(others))
                if t + MOVE_S > room:
                    break
                free = ({0, 1, 2, 3} - set(where.values())).pop()
                kept.append((kind, where[kind], free, t))
                where[kind] = free
        free = ({0, 1, 2, 3} - set(where.values())).pop()
        self.moves = kept + [(self.marked, where[self.marked], free, last_start)]
        self.cut_frame = cut

    def poses(self, t: float) -> dict[str, tuple[float, float, int | None, str | None]]:
        """kind -> (x, y, mat or None, moving direction or None)."""
        pose: dict[str, tuple[float, float, int | None, str | None]] = {k: (MAT_X[m], 0.0, m, None)
                                                                       for k, m in self.start.items()}
        for kind, a, b, start in self.moves:
            if t < start:
                break
            s = (t - start) / MOVE_S
            if s >= 1.0:
                pose[kind] = (MAT_X[b], 0.0, b, None)
            else:
                e = ease(s)
                pose[kind] = (lerp(MAT_X[a], MAT_X[b], e), 0.9 * math.sin(math.pi * e), None,
                              "right" if b > a else "left")
        return pose

    def scene(self, t: float) -> list[SceneObject]:
        objects = [SceneObject(100 + i, None, [box_mesh((x, 0.0), 0.0, (1.0, 0.9, 0.01), 0.0, MAT_BGR[m], 0.05)],
                               layer=-1, cast_shadow=False) for i, (m, x) in enumerate(zip(MATS, MAT_X))]
        for oid, (kind, (x, y, mat, moving)) in enumerate(self.poses(t).items(), 1):
            part: Part
            if kind == "cube":
                part = box_mesh((x, y), 0.0, (0.5, 0.5, 0.5), 0.3, OBJ_COLOUR[kind], 0.25)
            elif kind == "cup":
                part = frustum_mesh((x, y), 0.0, 0.3, 0.24, 0.55, OBJ_COLOUR[kind], 24, gloss=0.3)
            else:
                part = Sphere((x, y, 0.27), 0.27, OBJ_COLOUR[kind])
            objects.append(SceneObject(oid, kind, [part],
                                       state={"mat": MATS[mat] if mat is not None else None, "moving": moving}))
        return objects


def balanced_plan(rng, index: int) -> Plan:
    """A plan whose answers depend on the video index: the marked object's last move goes right on
    even videos and left on odd ones, and it starts on mat index % 4 when a draw allows it. Every
    question type (one item each per video) then gets different answers on consecutive videos, so
    the most frequent answer of a type cannot score 100% even on the two videos of the tiny suite."""
    fallback = None
    for _ in range(400):
        plan = Plan(rng)
        _, a, b, _ = plan.moves[-1]
        if (b > a) != (index % 2 == 0):
            continue
        fallback = fallback or plan
        if plan.start[plan.marked] == index % 4:
            return plan
    if fallback is None:  # pragma: no cover - half of all plans go each way
        raise RuntimeError(f"{NAME}: no plan with the wanted direction")
    return fallback


def rle(mask: np.ndarray) -> dict:
    """COCO compressed RLE (column-major run lengths, LEB128-like string), as pycocotools writes it."""
    flat = mask.astype(np.uint8).flatten(order="F")
    counts: list[int] = []
    prev, run = 0, 0
    for v in flat:
        if v != prev:
            counts.append(run)
            run, prev = 0, int(v)
        run += 1
    counts.append(run)
    chars = []
    for i, c in enumerate(counts):
        x = int(c) - (int(counts[i - 2]) if i > 2 else 0)
        more = True
        while more:
            ch = x & 0x1F
            x >>= 5
            more = (x != -1) if (ch & 0x10) else (x != 0)
            if more:
                ch |= 0x20
            chars.append(chr(ch + 48))
    return {"counts": "".join(chars), "size": [int(mask.shape[0]), int(mask.shape[1])]}


def answers_of(plan: Plan) -> dict[str, list[str]]:
    """The five rows' answers (EOC-Bench letters; seconds for the time question), by video type."""
    _, a, b, start = plan.moves[-1]
    rested = sorted({plan.start[plan.marked]} | {to for k, _, to, _ in plan.moves[:-1] if k == plan.marked})
    ago = round((plan.cut_frame - round(start * FPS)) / FPS, 1)
    return {"Location Retrospection": [LETTERS[plan.start[plan.marked]]],
            "Object State Retrospection": [LETTERS[m] for m in rested],
            "Absolute Time Perception": [f"{ago}s"],
            "Immediate State Recognition": ["c" if b > a else "b"],
            "Trajectory and Motion Prediction": [LETTERS[b]]}


def plan_answers(seed: int, index: int, n: int, salt: str) -> list[tuple[str, str]]:
    """Video `index`'s five answers drawn with `salt`, one per question type, from its plan (balance.py)."""
    plan = balanced_plan(rng_for(seed, NAME, index, salt), index)
    return [(kind, ",".join(answer)) for kind, answer in answers_of(plan).items()]


def make_video(family_dir: Path, seed: int, index: int, n: int) -> VideoRecord:
    rng = rng_for(seed, NAME, index, balance.item_salt(NAME, seed, index, n))
    plan = balanced_plan(rng, index)
    if common.LENGTH_SCALE is not None:  # the duration variant (lengths.py)
        plan.rescale(common.more_events(rng))
    renderer = Renderer(WIDTH, HEIGHT, GROUND, noise_sigma=1.5, seed=int(rng.integers(1 << 31)))
    cam = aim((0.0, -5.2, 3.4), (0.0, 0.4, 0.2), 62.0, WIDTH, HEIGHT)
    n_frames = plan.cut_frame + 1
    clip = render_clip(renderer, n_frames, FPS, lambda i, t: (cam, plan.scene(t)))
    ids = renderer.last_ids
    oid = list(CLASSES).index(plan.marked) + 1
    last = clip.seen[-1][oid]
    if last.stats.box is None:
        raise RuntimeError(f"{NAME}: the marked object is out of sight in the last frame")  # the plan keeps it in view
    box = [int(v) for v in last.stats.box]
    mask = ids == oid
    ys, xs = np.nonzero(mask)
    point = [int(round(float(xs.mean()))), int(round(float(ys.mean())))]
    frames = [f.copy() for f in clip.frames]
    cv2.rectangle(frames[-1], (box[0], box[1]), (box[2] - 1, box[3] - 1), PROMPT_RED, 2)
    kind, a, b, start = plan.moves[-1]
    rested = sorted({plan.start[plan.marked]} | {to for k, _, to, _ in plan.moves[:-1] if k == plan.marked})
    video_time = round(n_frames / FPS, 1)
    ago = round((plan.cut_frame - round(start * FPS)) / FPS, 1)
    moving = "sliding to the right" if b > a else "sliding to the left"
    events = [event(FPS, int(round(s * FPS)), "move", [list(CLASSES).index(k) + 1], frm=MATS[x], to=MATS[y])
              for k, x, y, s in plan.moves]
    stem = f"{NAME}_{index:04d}"
    params = {"start": {k: MATS[m] for k, m in plan.start.items()},
              "moves": [[k, MATS[x], MATS[y], round(s, 2)] for k, x, y, s in plan.moves], "marked": plan.marked,
              **balance.redraw_params(NAME, seed, index, n)}
    video = save_clip(family_dir, NAME, stem, clip, events, params,
                      {"start_mat": MATS[plan.start[plan.marked]], "rested": [MATS[m] for m in rested],
                       "ago_s": ago, "moving": moving, "target": MATS[b]}, frames=frames)
    mat_choices = {LETTERS[i]: f"the {m} mat" for i, m in enumerate(MATS)}
    base = {"video_path": video, "video_source": "synthetic", "frame_number": n_frames - 1, "video_time": video_time,
            "fps": float(FPS), "box": [box], "point": [point], "mask": [rle(mask)]}
    state_choices = {"a": "standing still on a mat", "b": "sliding to the left", "c": "sliding to the right",
                     "d": "being lifted up"}
    rows = [
        dict(base, idx=f"{stem}_q0", question="Where was <object 0> at the start of the video?", choices=mat_choices,
             answer=[LETTERS[plan.start[plan.marked]]], choice_type="single-choice",
             video_type="Location Retrospection"),
        dict(base, idx=f"{stem}_q1", question="On which mats has <object 0> rested during the video?",
             choices=mat_choices, answer=[LETTERS[m] for m in rested], choice_type="multi-choice",
             video_type="Object State Retrospection"),
        dict(base, idx=f"{stem}_q2", question="How many seconds ago did <object 0> start moving?", choices={},
             answer=[f"{ago}s"], choice_type="open-ended", video_type="Absolute Time Perception"),
        dict(base, idx=f"{stem}_q3", question="What is <object 0> doing at this moment?", choices=state_choices,
             answer=["c" if b > a else "b"], choice_type="single-choice", video_type="Immediate State Recognition"),
        dict(base, idx=f"{stem}_q4", question="If it keeps going, which mat will <object 0> come to rest on?",
             choices=mat_choices, answer=[LETTERS[b]], choice_type="single-choice",
             video_type="Trajectory and Motion Prediction"),
    ]
    sig = [plan.cut_frame] + [v for k, m in plan.start.items() for v in (CLASSES.index(k), m)] + \
          [v for k, x, y, s in plan.moves for v in (CLASSES.index(k), x, y, s)]
    return VideoRecord(stem, rows, layout_signature(sig))
