"""ec_bolts: EC-Bench counting with evidence spans, on the bolts scene.

Two Counting rows per video (EC-Bench `dataset.csv`): how many times a bolt was turned
clockwise (tightened), and counter-clockwise (loosened). `clips` holds each counted
turn's evidence span, exact from the truth: from the last frame before the bolt's
angle starts changing to the last frame it changes, widened to whole seconds
(EC-Bench spans are h:mm:ss). `count_details` lists the turns (bolt number from the
left and time).
"""

from __future__ import annotations

from pathlib import Path

from statebox.benchmarks.synthetic.clip import FPS, HEIGHT, WIDTH, event, render_clip, save_clip
from statebox.benchmarks.synthetic.families import balance, bolts
from statebox.benchmarks.synthetic.families.common import VideoRecord, layout_signature, rng_for
from statebox.benchmarks.synthetic.families.ec_common import annotation_text, row, span  # noqa: F401 (suite uses it)
from statebox.benchmarks.synthetic.render import Renderer

NAME = "ec_bolts"
BENCH = "ecbench"
CLASSES = ("bolt",)
ANNOTATION = "dataset.csv"
COST = 2
SIZES = {"tiny": 1, "small": 6, "full": 40}
QUESTIONS = {"tighten": "How many times was a bolt turned clockwise (tightened)?",
             "loosen": "How many times was a bolt turned counter-clockwise (loosened)?"}


def n_videos(size: str) -> int:
    return SIZES[size]


def turn_runs(angles: dict[int, list[float]], hold: int = 1) -> list[tuple[int, int, int, int]]:
    """(bolt id, direction (-1 clockwise), first changing frame, last changing frame) from per-frame angles.

    `hold` > 1 reads a stretched video (each frame held `hold` times): fewer than `hold`
    still frames inside a rotation are the holds, not a pause."""
    runs: list[list[int]] = []
    for oid, series in sorted(angles.items()):
        current: list[int] | None = None
        for f in range(1, len(series)):
            step = 0 if abs(series[f] - series[f - 1]) < 1e-6 else (1 if series[f] > series[f - 1] else -1)
            if step and current and current[1] == step and f - 1 - current[3] < hold:
                current[3] = f
            elif step:
                current = [oid, step, f, f]
                runs.append(current)
            elif current and f - current[3] >= hold:
                current = None
    return [(r[0], r[1], r[2], r[3]) for r in sorted(runs, key=lambda r: (r[2], r[0]))]


def plan_answers(seed: int, index: int, n: int, salt: str) -> list[tuple[str, str]]:
    """Video `index`'s two counts (tightened, loosened) drawn with `salt`, from its plan alone (balance.py):
    each turn is one rotation run (turns are separated by still pauses). Both questions are one
    EC-Bench group (category A, Counting), so the two counts of a video differ too."""
    plan = bolts.Plan(rng_for(seed, NAME, index, salt))
    tightened = bolts.tightenings(plan)
    return [("count", str(tightened)), ("count", str(len(plan.turns) - tightened))]


def make_video(family_dir: Path, seed: int, index: int, n: int) -> VideoRecord:
    rng = rng_for(seed, NAME, index, balance.item_salt(NAME, seed, index, n))
    plan = bolts.Plan(rng)
    renderer = Renderer(WIDTH, HEIGHT, bolts.GROUND, noise_sigma=1.5, seed=int(rng.integers(1 << 31)))
    cam = bolts.camera(plan.n_bolts)
    clip = render_clip(renderer, int(plan.duration * FPS), FPS, lambda i, t: (cam, plan.scene(t)))
    angles = {oid: [s[oid].state["angle"] for s in clip.seen] for oid in range(1, plan.n_bolts + 1)}
    runs = turn_runs(angles)
    stem = f"{NAME}_{index:04d}"
    events = [event(FPS, a, "tighten" if d < 0 else "loosen", [oid], end_frame=b) for oid, d, a, b in runs]
    answers = {k: sum(1 for r in runs if (r[1] < 0) == (k == "tighten")) for k in QUESTIONS}
    params = {"n_bolts": plan.n_bolts, "turns": [[b + 1, d, round(g, 2), round(s, 2), round(e, 2)]
                                                 for b, d, g, s, e in plan.turns], **balance.redraw_params(NAME, seed, index, n)}
    video = save_clip(family_dir, NAME, stem, clip, events, params, answers)
    rows = []
    for j, (kind, question) in enumerate(QUESTIONS.items()):
        chosen = [r for r in runs if (r[1] < 0) == (kind == "tighten")]
        spans = [span((a - 1) / FPS, b / FPS) for _, _, a, b in chosen]
        details = ", ".join(f"bolt {oid} at {(a - 1) / FPS:.1f}s" for oid, _, a, _ in chosen)
        rows.append(row(stem, video, f"{stem}_q{j}", "A", question, answers[kind], spans, details))
    sig = [plan.n_bolts] + plan.start_angle + [x for turn in plan.turns for x in turn]
    return VideoRecord(stem, rows, layout_signature(sig))
