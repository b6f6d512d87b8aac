"""swing: VCBench E2-Periodic. A ball slides between a left pad and a right pad, back and forth.

Question (3-6 query points): "How many complete cycles has the ball made so far? (A cycle
starts on the left pad, reaches the right pad and ends back on the left pad.)" Some
swings turn back halfway (incomplete cycles, not counted, as VCBench's rule). The
ball's `pose` state is `home` (on the left pad), `far` (on the right pad) or
`between`; a cycle completes on the frame the ball is back home after reaching `far`.
"""

from __future__ import annotations

from pathlib import Path

from statebox.benchmarks.synthetic import clip as clip_mod
from statebox.benchmarks.synthetic.clip import FPS, HEIGHT, WIDTH, event, render_clip, save_clip
from statebox.benchmarks.synthetic.families import balance
from statebox.benchmarks.synthetic.families.common import LayoutRejected, VideoRecord, ease, layout_signature, lerp, rng_for
from statebox.benchmarks.synthetic.families.vc_common import eval_rows, pick_frames
from statebox.benchmarks.synthetic.geometry import Camera, Sphere, aim, box_mesh, colour3
from statebox.benchmarks.synthetic.render import Renderer, SceneObject

NAME = "swing"
BENCH = "vcbench"
CLASSES = ("ball",)
ANNOTATION = "vcbench_eval.jsonl"
COST = 1
SIZES = {"tiny": 1, "small": 6, "full": 40}
BALANCE_EVERY_PREFIX = True  # each question asks 3-6 query points, a varying count (balance.py)

GROUND = (140, 130, 150)
PAD_COLOUR = (70, 70, 80)
HOME, FAR = -1.6, 1.6
R = 0.25
DURATION = 14.0
QUESTION = ("How many complete cycles has the ball made so far? (A cycle starts on the left pad, reaches the "
            "right pad and ends back on the left pad.)")
SUBTYPE = "E2-Periodic"


def n_videos(size: str) -> int:
    return SIZES[size]


class Plan:
    def __init__(self, rng) -> None:
        self.colour = colour3(rng.integers(40, 230, size=3))
        self.y = float(rng.uniform(0.0, 0.8))
        self.legs: list[tuple[float, float, float, float]] = []  # start, end, from x, to x
        t, x = float(rng.uniform(0.4, 1.2)), HOME
        while True:
            full = rng.random() < 0.8
            turn = FAR if full else float(rng.uniform(-0.4, 0.6))
            leg = float(rng.uniform(0.7, 1.1))
            pause = float(rng.uniform(0.15, 0.5))
            if t + 2 * leg + pause > DURATION - 0.5:
                break
            self.legs.append((t, t + leg, x, turn))
            self.legs.append((t + leg + pause, t + 2 * leg + pause, turn, HOME))
            t += 2 * leg + pause + float(rng.uniform(0.2, 0.8))

    def x(self, t: float) -> float:
        x = HOME
        for start, end, a, b in self.legs:
            if t <= start:
                break
            x = lerp(a, b, ease((t - start) / (end - start)))
        return x

    def scene(self, t: float) -> list[SceneObject]:
        pads = [SceneObject(100 + k, None, [box_mesh((px, self.y), 0.0, (0.8, 0.8, 0.01), 0.0, PAD_COLOUR, 0.05)],
                            layer=-1, cast_shadow=False) for k, px in enumerate((HOME, FAR))]
        x = self.x(t)
        return pads + [SceneObject(1, "ball", [Sphere((x, self.y, R), R, self.colour)], state={"pose": pose_of(x)})]

    def poses(self, n_frames: int) -> list[str]:
        """The ball's `pose` state in each frame, as the scene (and so the rendered tracks) states it."""
        return [pose_of(self.x(f / FPS)) for f in range(n_frames)]


def pose_of(x: float) -> str:
    return "home" if abs(x - HOME) < 0.05 else ("far" if abs(x - FAR) < 0.05 else "between")


def cycles(poses: list[str]) -> list[int]:
    """Frames on which a complete cycle ends (back home after reaching far)."""
    out, reached = [], False
    for f, pose in enumerate(poses):
        if pose == "far":
            reached = True
        elif pose == "home" and reached:
            out.append(f)
            reached = False
    return out


def camera() -> Camera:
    return aim((0.0, -4.6, 2.6), (0.0, 0.4, 0.2), 60.0, WIDTH, HEIGHT)


def draw(seed: int, index: int, salt: str = "") -> tuple[int, Plan, list[int], list[int]]:
    """Video `index`'s draw as make_video makes it, from the plan alone: the renderer's noise seed, plan,
    cycle-end frames, query frames (counterfactual twins replay it from the suite seed: the ball's colour
    is not in meta.json; `salt`: balance.py's redraw of the video)."""
    rng = rng_for(seed, NAME, index, salt)
    noise_seed = int(rng.integers(1 << 31))
    n_frames = int(DURATION * FPS)
    for _ in range(100):
        plan = Plan(rng)
        ends = cycles(plan.poses(n_frames))
        try:
            if len(ends) < 3:
                raise LayoutRejected("too few cycles")
            frames = pick_frames(rng, n_frames, ends)
        except LayoutRejected:
            continue
        break
    else:  # pragma: no cover
        raise RuntimeError(f"{NAME}: no valid plan")
    return noise_seed, plan, ends, frames


def counts_at(ends: list[int], frames: list[int]) -> list[int]:
    return [sum(1 for e in ends if e <= f) for f in frames]


def plan_answers(seed: int, index: int, n: int, salt: str) -> list[tuple[str, str]]:
    """(subtype, count) of every query point of video `index` drawn with `salt`, from its plan (balance.py)."""
    _, _, ends, frames = draw(seed, index, salt)
    return [(SUBTYPE, str(c)) for c in counts_at(ends, frames)]


def make_video(family_dir: Path, seed: int, index: int, n: int) -> VideoRecord:
    noise_seed, plan, ends, frames = draw(seed, index, balance.item_salt(NAME, seed, index, n))
    renderer = Renderer(WIDTH, HEIGHT, GROUND, noise_sigma=1.5, seed=noise_seed)
    cam = camera()
    clip = render_clip(renderer, int(DURATION * FPS), FPS, lambda i, t: (cam, plan.scene(t)))
    if cycles([s[1].state["pose"] for s in clip.seen[::clip_mod.TIME_SCALE]]) != ends:
        raise RuntimeError(f"{NAME}: the rendered tracks' cycles differ from the plan's")
    counts = counts_at(ends, frames)
    events = [event(FPS, f, "cycle", [1]) for f in ends]
    stem = f"{NAME}_{index:04d}"
    params = {"y": round(plan.y, 3), "legs": [[round(v, 3) for v in leg] for leg in plan.legs],
              **balance.redraw_params(NAME, seed, index, n)}
    video = save_clip(family_dir, NAME, stem, clip, events, params, {"frames": frames, "counts": counts})
    rows = eval_rows(f"{stem}_q0", video, QUESTION, SUBTYPE, frames, counts)
    return VideoRecord(stem, rows, layout_signature([plan.y] + [v for leg in plan.legs for v in leg]))
