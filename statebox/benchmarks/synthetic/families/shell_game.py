"""shell_game: three identical cups, a ball shown under one, k swaps, optional slow camera orbit.

Question (VSTAT MCQ): which cup hides the ball at the end, named by its place (left,
middle, right) in the final frame. The orbit can turn the camera up to 50 degrees, so
the final left-to-right order need not match the cups' starting slots: the answer is
read from the final frame's image positions, and layouts whose final cups are closer
than MIN_GAP_PX horizontally are redrawn so "left/middle/right" is never ambiguous.
"""

from __future__ import annotations

import math
from pathlib import Path

from statebox.benchmarks.synthetic.clip import FPS, HEIGHT, WIDTH, event, render_clip, save_clip
from statebox.benchmarks.synthetic.families import balance, common
from statebox.benchmarks.synthetic.families.common import (LayoutRejected, VideoRecord, ease, layout_signature,
                                                           lerp, rng_for, vstat_doc)
from statebox.benchmarks.synthetic.geometry import Sphere, aim, frustum_mesh
from statebox.benchmarks.synthetic.render import Light, Renderer, SceneObject

NAME = "shell_game"
BENCH = "vstat"
CLASSES = ("cup", "ball")
ANNOTATION = "vstat.json"
COST = 2
SIZES = {"tiny": 2, "small": 10, "full": 50}

TABLE = (62, 104, 146)  # BGR: a wooden table
CUP_COLOUR = (48, 52, 182)
BALL_COLOUR = (40, 205, 240)
SLOTS = (-1.3, 0.0, 1.3)
CUP_RB, CUP_RT, CUP_H = 0.42, 0.3, 0.75
BALL_R = 0.17
LIFT = 0.6
MIN_GAP_PX = 30
CHOICES = ["left cup", "middle cup", "right cup"]
QUESTION = ("A ball is shown under one of three identical cups, then the cups are shuffled. "
            "At the end of the video, which cup hides the ball, as seen in the final frame?")


def n_videos(size: str) -> int:
    return SIZES[size]


class Plan:
    """The cups' and camera's motion over time, sampled once per video."""

    def __init__(self, rng) -> None:
        self.k = int(rng.integers(2, 7))
        self.ball_cup = int(rng.integers(1, 4))  # cup ids 1..3 start at slots 0..2
        self.orbit = 0.0 if rng.random() < 0.4 else float(rng.choice([-1, 1]) * rng.uniform(20, 50))
        self.phi0 = float(rng.uniform(-15, 15))
        self.reveal = (0.5, 1.1, 1.6, 2.2)  # lift start, lifted, lower start, down
        t = 2.5
        self.swaps: list[tuple[float, float, int, int]] = []  # start, end, slot a, slot b
        for _ in range(self.k):
            a, b = sorted(int(x) for x in rng.choice(3, size=2, replace=False))
            dur = float(rng.uniform(0.8, 1.3))
            self.swaps.append((t, t + dur, a, b))
            t += dur + float(rng.uniform(0.15, 0.4))
        self.duration = round(t + 1.0, 1)
        if common.LENGTH_SCALE is not None:  # the duration variant (lengths.py)
            self._rescale(rng, t)

    def _rescale(self, rng, t: float) -> None:
        """Refit the plan to LENGTH_SCALE times its length: the same first swaps (at least two, as above),
        each ending at least 1 s before the end; a longer scene draws more swaps by the same rules. The
        camera's orbit keeps its total angle over the new length."""
        n_frames = common.scaled_frames(int(self.duration * FPS))
        if n_frames == int(self.duration * FPS):  # the suite's own length: the suite's own plan
            return
        last = n_frames / FPS - 1.0
        kept = [swap for swap in self.swaps if swap[1] <= last]
        if len(kept) == len(self.swaps):
            more = common.more_events(rng)
            while True:
                a, b = sorted(int(x) for x in more.choice(3, size=2, replace=False))
                dur = float(more.uniform(0.8, 1.3))
                if t + dur > last:
                    break
                kept.append((t, t + dur, a, b))
                t += dur + float(more.uniform(0.15, 0.4))
        if len(kept) < 2:
            raise ValueError("fewer than two swaps fit")
        self.swaps, self.k = kept, len(kept)
        if n_frames != int(self.duration * FPS):
            self.duration = common.duration_for(n_frames, FPS)

    def cup_positions(self, t: float) -> dict[int, tuple[float, float, float]]:
        slot_of = {1: 0, 2: 1, 3: 2}
        for start, end, a, b in self.swaps:
            cup_a = next(c for c, s in slot_of.items() if s == a)
            cup_b = next(c for c, s in slot_of.items() if s == b)
            if t < start:
                break
            if t < end:
                s = ease((t - start) / (end - start))
                amp = 0.55 if b - a == 1 else 1.0
                pos = {c: (SLOTS[sl], 0.0, 0.0) for c, sl in slot_of.items() if c not in (cup_a, cup_b)}
                pos[cup_a] = (lerp(SLOTS[a], SLOTS[b], s), -amp * math.sin(math.pi * s), 0.0)
                pos[cup_b] = (lerp(SLOTS[b], SLOTS[a], s), amp * math.sin(math.pi * s), 0.0)
                return pos
            slot_of[cup_a], slot_of[cup_b] = b, a
        pos = {c: (SLOTS[sl], 0.0, 0.0) for c, sl in slot_of.items()}
        r0, r1, r2, r3 = self.reveal
        lift = ease((t - r0) / (r1 - r0)) if t < r2 else 1.0 - ease((t - r2) / (r3 - r2))
        x, y, _ = pos[self.ball_cup]
        pos[self.ball_cup] = (x, y, LIFT * max(0.0, lift) if t >= r0 else 0.0)
        return pos

    def slots_at(self, t: float) -> dict[int, int]:
        slot_of = {1: 0, 2: 1, 3: 2}
        for start, end, a, b in self.swaps:
            if t < end:
                break
            cup_a = next(c for c, s in slot_of.items() if s == a)
            cup_b = next(c for c, s in slot_of.items() if s == b)
            slot_of[cup_a], slot_of[cup_b] = b, a
        return slot_of

    def camera(self, t: float):
        phi = math.radians(self.phi0 + self.orbit * t / self.duration)
        r, z = 4.6, 3.4
        return aim((r * math.sin(phi), -r * math.cos(phi), z), (0.0, 0.0, 0.25), 52.0, WIDTH, HEIGHT)

    def scene(self, t: float) -> list[SceneObject]:
        pos = self.cup_positions(t)
        objects = [SceneObject(c, "cup", [frustum_mesh((x, y), z, CUP_RB, CUP_RT, CUP_H, CUP_COLOUR, 28, gloss=0.3)],
                               state={"has_ball": c == self.ball_cup})
                   for c, (x, y, z) in sorted(pos.items())]
        bx, by, _ = pos[self.ball_cup]
        objects.append(SceneObject(4, "ball", [Sphere((bx, by, BALL_R), BALL_R, BALL_COLOUR)],
                                   state={"under": self.ball_cup}))
        return objects


def final_answer(plan: Plan) -> tuple[int, list[int]]:
    """Index 0/1/2 (left/middle/right) of the ball's cup in the last frame, and the cups' left-to-right order,
    from the cups' image centres (the middle of each cup's projected outline, as its amodal box has it),
    worked out from the plan without rendering: the balance of the family's answers is decided on plans."""
    t = (int(plan.duration * FPS) - 1) / FPS
    camera = plan.camera(t)
    centres: dict[int, float] = {}
    for oid, (x, y, z) in sorted(plan.cup_positions(t).items()):
        mesh = frustum_mesh((x, y), z, CUP_RB, CUP_RT, CUP_H, CUP_COLOUR, 28)
        u = camera.project(mesh.vertices)[0][:, 0]
        centres[oid] = (float(u.min()) + float(u.max())) / 2
    order = sorted(centres, key=centres.__getitem__)
    xs = sorted(centres.values())
    if min(b - a for a, b in zip(xs, xs[1:])) < MIN_GAP_PX:
        raise LayoutRejected("final cups too close to name left/middle/right")
    return order.index(plan.ball_cup), order


def valid_plan(rng) -> tuple[Plan, int, list[int]]:
    """The first plan from `rng` whose final cups can be named left/middle/right, its answer and cup order."""
    for _ in range(200):
        plan = Plan(rng)
        try:
            place, order = final_answer(plan)
        except LayoutRejected:
            continue
        return plan, place, order
    raise RuntimeError(f"{NAME}: no valid plan")  # pragma: no cover


def plan_answers(seed: int, index: int, n: int, salt: str) -> list[tuple[str, str]]:
    """The correct option of video `index` drawn with `salt`, from its plan alone (balance.py)."""
    rng = rng_for(seed, NAME, index, salt)
    rng.integers(1 << 31)  # the renderer's seed, drawn first as make_video does
    return [("place", str(valid_plan(rng)[1]))]


def make_video(family_dir: Path, seed: int, index: int, n: int) -> VideoRecord:
    rng = rng_for(seed, NAME, index, balance.item_salt(NAME, seed, index, n))
    renderer = Renderer(WIDTH, HEIGHT, TABLE, Light(), noise_sigma=1.5, seed=int(rng.integers(1 << 31)))
    plan, place, order = valid_plan(rng)
    clip = render_clip(renderer, int(plan.duration * FPS), FPS, lambda i, t: (plan.camera(t), plan.scene(t)))
    stem = f"{NAME}_{index:04d}"
    events = [event(FPS, round(plan.reveal[0] * FPS), "reveal", [plan.ball_cup, 4])]
    for start, end, a, b in plan.swaps:
        slots = plan.slots_at(start)
        cups = sorted(c for c, s in slots.items() if s in (a, b))
        events.append(event(FPS, round(start * FPS), "swap", cups, end_frame=round(end * FPS), slots=[a, b]))
    answer = CHOICES[place]
    params = {"swaps": [[round(s, 2), round(e, 2), a, b] for s, e, a, b in plan.swaps], "orbit_deg": round(plan.orbit, 2),
              "phi0_deg": round(plan.phi0, 2), "ball_cup": plan.ball_cup, "final_left_to_right": order,
              **balance.redraw_params(NAME, seed, index, n)}
    video = save_clip(family_dir, NAME, stem, clip, events, params, {"answer": answer, "place": place})
    challenge = "camera motion" if plan.orbit else "homogeneity"
    doc = vstat_doc(NAME, stem, video, QUESTION, answer, CHOICES, element="Location", structure="Atomic",
                    challenge=challenge)
    return VideoRecord(stem, [doc], layout_signature([plan.ball_cup, plan.orbit, plan.phi0] + [x for s in plan.swaps for x in s]))
