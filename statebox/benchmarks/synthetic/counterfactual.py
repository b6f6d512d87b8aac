"""Counterfactual twins of generated items: the same scene and question, a different true answer.

A twin is re-rendered from the source video's own scene parameters (its ground-truth
`meta.json`), with one thing changed so the answer moves by a known amount. An agent that
gives the source's answer on the twin did not look (it remembered, or read something
other than the pixels). Families with a natural twin:

- `cube_count`: one more cube, placed in the same layout region at least the family's
  minimum gap from the others; same camera (main pan or control), same length, same size
  class; truth = count + 1. The main setting's invariant (no frame shows every cube) is
  checked on the twin, and another spot is tried when it fails.

- `shell_game`: the ball under another cup. The source's swaps, orbit and start angle are
  replayed from its meta.json through the family's own `Plan` motion (cup positions do not
  depend on which cup holds the ball); the ball goes under the cup that ends one place to the
  right (wrapping) of the source's, so the truth is read from the source's recorded final
  left-to-right order, and is checked on the rendered twin's last frame.

- `block_count`: one more block on the stack from the start. Its meta does not record every
  draw (sides, colours), so the source's plan is replayed from the suite's seed through the
  family's own `Plan` and checked against the recorded one (initial count and ops; a mismatch,
  e.g. a suite made by other code, is skipped with that reason); skipped too when one more
  block would rise above the board that hides the stack (the shortcut the family forbids).

VCBench-format counting families (each item asked at several query times; the twin keeps the
times, and every query's count must move, else the item is skipped with that reason; truths are
counted from the twin's per-frame states, and the rendered tracks must agree):

- `line_crossing`: one more ball, in a lane and colour the scene does not use, crossing the
  line once in the first second (before any query time): every count + 1. The source's draw is
  replayed from the suite seed (`line_crossing.draw`; colours are not in meta.json).
- `swing`: the first swing changed: a complete one turns back halfway, one that turned back
  reaches the far pad (same leg times; `swing.draw` replayed for the ball's colour). Skipped when
  a query comes before that cycle's end.
- `lamp_episodes`: the first burst left out (the lamp stays dark then); every count - 1, skipped
  when a query comes before that burst's end. All from meta.json.

- `cup_drops` (VSTAT MCQ, four questions a video): one ball that is never lifted out again
  dropped into another cup, the first such move (from the last drop back) that makes this
  question's answer another of its options (plan replayed from the suite seed).
- `bolts` / `ec_bolts`: the last loosening turn tightens instead (or, with none, the last
  tightening one loosens); same bolt, angle and time; ec_bolts twins carry the new evidence
  spans (`twin_item_for`).
- `ec_beeps`: one beep more (on the first flash without one), or one fewer where every flash
  would then beep; the beeps are found again in the twin's audio samples.
- `morse_light`: another word of the family's list, the one whose code lasts closest to the
  source's (same unit, lead-in, tail and lamp).

Families whose questions name left/right get a mirrored twin otherwise
(`statebox.benchmarks.transforms`), as real benchmark items do. `streaming_count` (O2-Unique,
E1-Action): the asked kind's earliest-entering object left out (`streaming_count.draw` replayed).
streaming_window, eoc_objects and O1-Snap questions have no re-rendered twin yet; `twin_family(label)` says
which are covered, and the run names the others' items as skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.clip import FPS, event, render_clip, save_clip
from statebox.benchmarks.synthetic.families import block_count as bc
from statebox.benchmarks.synthetic.families import bolts
from statebox.benchmarks.synthetic.families import cube_count as cc
from statebox.benchmarks.synthetic.families import cup_drops as cd
from statebox.benchmarks.synthetic.families import ec_beeps as eb
from statebox.benchmarks.synthetic.families import lamp_episodes as le
from statebox.benchmarks.synthetic.families import line_crossing as lc
from statebox.benchmarks.synthetic.families import morse_light as ml
from statebox.benchmarks.synthetic.families import shell_game as sg
from statebox.benchmarks.synthetic.families import streaming_count as sc
from statebox.benchmarks.synthetic.families import swing as sw
from statebox.benchmarks.synthetic.families.balance import redraw_salt
from statebox.benchmarks.synthetic.families.common import LayoutRejected, rng_for
from statebox.benchmarks.synthetic.families.ec_bolts import QUESTIONS, turn_runs
from statebox.benchmarks.synthetic.families.ec_common import clips_text, span
from statebox.benchmarks.synthetic.families.morse_light import lamp
from statebox.benchmarks.synthetic.geometry import aim, colour3
from statebox.benchmarks.synthetic.render import Light, Renderer
from statebox.errors import DataError
from statebox.schema import Item, Span

COVERED = {"cube_count": "one more cube", "shell_game": "the ball under another cup", "block_count": "one more block",
           "line_crossing": "one more ball crossing the line", "swing": "the first swing changed",
           "lamp_episodes": "the first episode left out", "cup_drops": "a ball dropped into another cup",
           "bolts": "one turn the other way", "ec_bolts": "one turn the other way",
           "ec_beeps": "one beep more (or fewer)", "morse_light": "another word",
           "streaming_count": "one object left out"}
CONSTRUCTION = {"cube_count": "cube_twin", "shell_game": "ball_moved", "block_count": "block_added",
                "line_crossing": "crossing_added", "swing": "swing_changed", "lamp_episodes": "episode_removed",
                "cup_drops": "ball_elsewhere", "bolts": "turn_flipped", "ec_bolts": "turn_flipped",
                "ec_beeps": "beep_changed", "morse_light": "word_changed", "streaming_count": "object_removed"}


def twin_family(label: str) -> str | None:
    """The covered family of a dataset label (variants `family@kind` are not re-rendered), or None."""
    return label if label in COVERED else None


def cube_twin_spec(family_dir: Path, item: Item) -> dict[str, Any]:
    """What the twin of a cube_count item will be (pure: reads the source's meta.json only)."""
    stem = Path(item.video).stem
    try:
        meta = gt.read_meta(family_dir, stem)
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc
    count = int(meta.answers.get("count", item.target))
    return {"family": "cube_count", "stem": stem, "setting": meta.params.get("setting", "main"),
            "positions": meta.params.get("positions") or [], "count": count, "truth": count + 1}


def _extra_positions(positions: np.ndarray, rng: np.random.Generator, tries: int = 400) -> list[tuple[float, float]]:
    out = []
    for _ in range(tries):
        p = (rng.uniform(*cc.X_RANGE), rng.uniform(*cc.Y_RANGE))
        if all((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2 >= cc.MIN_GAP ** 2 for q in positions):
            out.append(p)
    return out


def render_cube_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:
    """Render the twin into `out_family_dir/videos/<stem>.mp4` (+ its gt); returns the video path."""
    positions = np.array(spec["positions"], dtype=np.float64).reshape(-1, 2)
    n = len(positions) + 1
    rng = np.random.default_rng(seed)
    renderer = Renderer(cc.WIDTH, cc.HEIGHT, cc.GROUND)
    n_frames = int(cc.DURATION * FPS)
    main = spec["setting"] == "main"
    chosen = None
    for extra in _extra_positions(positions, rng)[:40]:
        layout = np.array(sorted([*map(tuple, positions), extra]))
        objects = cc.cubes(layout)
        if not main:
            clip = render_clip(renderer, n_frames, FPS, lambda i, t: (cc.control_camera(), objects))
            try:
                cc.check_control(clip, n)
            except LayoutRejected:
                continue
            chosen = (layout, clip)
            break
        clip = render_clip(renderer, n_frames, FPS, lambda i, t: (cc.main_camera(t), objects))
        try:
            cc.check_main(clip, n)
        except LayoutRejected:
            continue
        chosen = (layout, clip)
        break
    if chosen is None:
        raise DataError(Path(spec["stem"]), None, "no spot for one more cube keeps the setting's rules")
    layout, clip = chosen
    events = [event(FPS, 0, "scene", list(range(1, n + 1)), count=n)]
    params = {"setting": spec["setting"], "cube_size": cc.CUBE, "positions": [[round(float(x), 4), round(float(y), 4)] for x, y in layout],
              "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), "cube_count", stem, clip, events, params, {"count": n})
    return Path(out_family_dir) / "videos" / rel


def shell_twin_spec(family_dir: Path, item: Item) -> dict[str, Any]:
    """The shell_game twin's scene (the source's motion, another cup) and truth; pure."""

    stem = Path(item.video).stem
    try:
        meta = gt.read_meta(family_dir, stem)
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc
    order = [int(c) for c in meta.params["final_left_to_right"]]
    place = order.index(int(meta.params["ball_cup"]))
    new_place = (place + 1) % len(order)
    return {"family": "shell_game", "stem": stem, "swaps": meta.params["swaps"], "orbit": meta.params["orbit_deg"],
            "phi0": meta.params["phi0_deg"], "duration": meta.duration, "n_frames": meta.n_frames,
            "ball_cup": order[new_place], "place": new_place, "order": order, "truth": sg.CHOICES[new_place]}


def render_shell_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:
    """Replay the source's cup motion with the ball under `spec["ball_cup"]`; the last frame must name
    the planned place (else DataError: the twin would not have the truth the plan says)."""

    plan = sg.Plan.__new__(sg.Plan)  # the family's motion code, fed the recorded parameters instead of a draw
    plan.k = len(spec["swaps"])
    plan.ball_cup = int(spec["ball_cup"])
    plan.orbit, plan.phi0 = float(spec["orbit"]), float(spec["phi0"])
    plan.reveal = (0.5, 1.1, 1.6, 2.2)
    plan.swaps = [(float(a), float(b), int(x), int(y)) for a, b, x, y in spec["swaps"]]
    plan.duration = float(spec["duration"])
    renderer = Renderer(sg.WIDTH, sg.HEIGHT, sg.TABLE, Light(), noise_sigma=1.5, seed=seed)
    clip = render_clip(renderer, int(spec["n_frames"]), FPS, lambda i, t: (plan.camera(t), plan.scene(t)))
    place, order = sg.final_answer(plan)  # from the replayed plan, as the family now decides it (no pixels read)
    if place != spec["place"]:
        raise DataError(Path(spec["stem"]), None, f"shell_game twin: the ball ends at place {place}, planned {spec['place']}")
    events = [event(FPS, round(plan.reveal[0] * FPS), "reveal", [plan.ball_cup, 4])]
    params = {"swaps": spec["swaps"], "orbit_deg": spec["orbit"], "phi0_deg": spec["phi0"], "ball_cup": plan.ball_cup,
              "final_left_to_right": order, "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), "shell_game", stem, clip, events, params, {"answer": spec["truth"], "place": place})
    return Path(out_family_dir) / "videos" / rel


def _replayed_block_plan(family_dir: Path, item: Item) -> tuple[Any, dict[str, Any]] | str:
    """The source's block_count plan drawn again from the suite seed, or why it cannot be."""


    stem = Path(item.video).stem
    try:
        meta = gt.read_meta(family_dir, stem)
        seed = int(json.loads((Path(family_dir).parent / "suite.json").read_text())["seed"])
        index = int(stem.rsplit("_", 1)[1])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return f"cannot replay its scene ({type(exc).__name__})"
    redraw = int(meta.params.get("redraw", 0))  # balance.py drew the video again: replay that draw
    rng = rng_for(seed, bc.NAME, index, redraw_salt(redraw))
    plan = bc.Plan(rng)
    ops = [[k, round(s, 2), round(e, 2)] for k, s, e, _ in plan.timeline]
    if plan.initial != meta.params.get("initial") or ops != meta.params.get("ops"):
        return "its scene does not replay from the suite seed (made by other generator code)"
    spec = {"family": "block_count", "stem": stem, "seed": seed, "index": index, "renderer_seed": int(rng.integers(1 << 31)),
            "truth": plan.final + 1, **({"redraw": redraw} if redraw else {})}
    return plan, spec


def block_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """The block_count twin (one more block from the start) and its truth, or why there is none; pure."""

    replayed = _replayed_block_plan(family_dir, item)
    if isinstance(replayed, str):
        return replayed
    plan, spec = replayed
    height = peak = plan.initial
    for kind, *_ in plan.timeline:
        height += 1 if kind == "add" else -1
        peak = max(peak, height)
    if peak + 1 > bc.MAX_STACK:
        return "one more block would rise above the board that hides the stack"
    return spec


def render_block_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    plan = bc.Plan(rng_for(spec["seed"], bc.NAME, spec["index"], redraw_salt(int(spec.get("redraw", 0)))))
    extra = plan.initial  # the new block's index in the per-id lists: the last of the starting stack
    plan.colours.insert(extra, bc.PALETTE[seed % len(bc.PALETTE)])
    plan.yaws.insert(extra, 0.0)
    plan.initial += 1
    plan.final += 1
    renderer = Renderer(bc.WIDTH, bc.HEIGHT, bc.GROUND, noise_sigma=1.5, seed=int(spec["renderer_seed"]))
    cam = bc.camera()
    clip = render_clip(renderer, int(plan.duration * FPS), FPS, lambda i, t: (cam, plan.scene(t)))
    events = [event(FPS, 0, "initial", list(range(1, plan.initial + 1)), count=plan.initial)]
    params = {"initial": plan.initial, "ops": [[k, round(s, 2), round(e, 2)] for k, s, e, _ in plan.timeline],
              "board_time": [round(x, 2) for x in plan.board_time], "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), bc.NAME, stem, clip, events, params, {"count": plan.final})
    return Path(out_family_dir) / "videos" / rel


def twin_spec(label: str, family_dir: Path, item: Item) -> dict[str, Any] | str:
    """The twin's recipe and truth, or the reason this item has none."""
    if label == "cube_count":
        return cube_twin_spec(family_dir, item)
    if label == "block_count":
        return block_twin_spec(family_dir, item)
    if label == "line_crossing":
        return line_twin_spec(family_dir, item)
    if label == "swing":
        return swing_twin_spec(family_dir, item)
    if label == "lamp_episodes":
        return lamp_twin_spec(family_dir, item)
    if label == "cup_drops":
        return cup_twin_spec(family_dir, item)
    if label in ("bolts", "ec_bolts"):
        return bolt_twin_spec(label, family_dir, item)
    if label == "ec_beeps":
        return beep_twin_spec(family_dir, item)
    if label == "morse_light":
        return morse_twin_spec(family_dir, item)
    if label == "streaming_count":
        return streaming_twin_spec(family_dir, item)
    return shell_twin_spec(family_dir, item)


def render_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:
    render = {"cube_count": render_cube_twin, "shell_game": render_shell_twin, "block_count": render_block_twin,
              "line_crossing": render_line_twin, "swing": render_swing_twin, "lamp_episodes": render_lamp_twin,
              "cup_drops": render_cup_twin, "bolts": render_bolt_twin, "ec_bolts": render_bolt_twin,
              "ec_beeps": render_beep_twin, "morse_light": render_morse_twin,
              "streaming_count": render_streaming_twin}[spec["family"]]
    return render(spec, out_family_dir, stem, seed)


def twin_item(item: Item, new_id: str, video: Path, truth: Any, truths: list[Any] | None = None) -> Item:
    """The twin as the agent gets it: the same question, the new video and truth (`truths`: one per
    query, for streaming items asked at several times; `truth` is then the last)."""
    labels = dict(item.labels)
    if "count" in labels:
        labels["count"] = str(truth)
    if item.choices and isinstance(truth, str) and truth in item.choices:  # an option text: written as the item writes its answer
        index = item.choices.index(truth)
        truth = "ABCDEFGH"[index] if isinstance(item.target, str) else index
    return item.model_copy(update={"id": new_id, "video": str(video), "target": truth, "labels": labels,
                                   "queries": [q.model_copy(update={"target": truth if truths is None else truths[k]})
                                               for k, q in enumerate(item.queries)]})


# --- VCBench-format counting families: every query's count moves (per-query truths) ---------------------

def _suite_seed(family_dir: Path, stem: str) -> tuple[int, int] | str:
    """The suite seed and the video's index (a twin whose scene is not all in meta.json replays its draw)."""

    try:
        return int(json.loads((Path(family_dir).parent / "suite.json").read_text())["seed"]), int(stem.rsplit("_", 1)[1])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return f"cannot replay its scene ({type(exc).__name__})"


def _source_frames(family_dir: Path, item: Item) -> tuple[gt.VideoMeta, list[int], list[int]] | str:
    stem = Path(item.video).stem
    try:
        meta = gt.read_meta(family_dir, stem)
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc
    frames, counts = meta.answers.get("frames") or [], meta.answers.get("counts") or []
    if len(frames) != len(item.queries) or [int(q.target) for q in item.queries] != [int(c) for c in counts]:
        return "its queries are not the generated ones (another question or edited annotations)"
    return meta, [int(f) for f in frames], [int(c) for c in counts]


def _moved_counts(frames: list[int], changes: list[int], source: list[int], margin: int = 2) -> list[int] | str:
    """The twin's count at each query frame (events on or before it), or why the twin is unusable: a
    query that keeps its answer, or a change within `margin` frames of a query (an ambiguous cut)."""
    if any(abs(f - c) <= margin for f in frames for c in changes):
        return "a changed event would fall next to a query time"
    counts = [sum(1 for c in changes if c <= f) for f in frames]
    if any(a == b for a, b in zip(counts, source)):
        return "the change comes after a query time (that query's answer would not move)"
    return counts


def line_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """line_crossing: one more ball, in a free lane, crossing the line once before the first query time."""

    got = _source_frames(family_dir, item)
    if isinstance(got, str):
        return got
    meta, frames, source = got
    seeded = _suite_seed(family_dir, meta.stem)
    if isinstance(seeded, str):
        return seeded
    _, plan, _, replayed_frames = lc.draw(*seeded, redraw_salt(int(meta.params.get("redraw", 0))))
    if replayed_frames != frames or [round(x, 3) for x in plan.start] != meta.params.get("start_x"):
        return "its scene does not replay from the suite seed (made by other generator code)"
    n = len(plan.lanes)
    side = 1 if seeded[1] % 2 else -1
    plan.lanes.append(next(v for v in lc.LANES if v not in plan.lanes))
    plan.colours.append(next(c for c in lc.COLOURS if c not in plan.colours))
    plan.start.append(side * 0.6)
    plan.moves.insert(0, (n, 0.0, 0.5 + 1.2 / 2.2, -side * 0.6))
    n_frames = int(lc.DURATION * FPS)
    sides = [{o.oid: o.state["side"] for o in plan.scene(f / FPS) if o.cls} for f in range(n_frames)]
    changes = [f for f in range(1, n_frames) for k, s in sides[f].items() if s != sides[f - 1][k]]
    counts = _moved_counts(frames, changes, source)
    if isinstance(counts, str):
        return counts
    return {"family": "line_crossing", "stem": meta.stem, "seed": seeded[0], "index": seeded[1],
            "lanes": plan.lanes, "colours": plan.colours, "start": plan.start, "moves": plan.moves,
            "frames": frames, "truths": counts, "truth": counts[-1]}


def render_line_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    plan = lc.Plan.__new__(lc.Plan)  # the family's motion, fed the twin's balls instead of a draw
    plan.lanes, plan.start = [float(v) for v in spec["lanes"]], [float(v) for v in spec["start"]]
    plan.colours = [colour3(col) for col in spec["colours"]]
    plan.moves = [(int(b), float(s), float(e), float(x)) for b, s, e, x in spec["moves"]]
    n_frames = int(lc.DURATION * FPS)
    renderer = Renderer(lc.WIDTH, lc.HEIGHT, lc.GROUND, noise_sigma=1.5, seed=seed)
    clip = render_clip(renderer, n_frames, FPS, lambda i, t: (lc.camera(), plan.scene(t)))
    events = lc.crossings(clip, n_frames)
    counts = [sum(1 for e in events if e["frame"] <= f) for f in spec["frames"]]
    _check_truths(spec, counts)
    params = {"lanes": plan.lanes, "start_x": [round(x, 3) for x in plan.start],
              "moves": [[b + 1, round(s, 3), round(e, 3), round(x, 3)] for b, s, e, x in plan.moves], "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), lc.NAME, stem, clip, events, params, {"frames": spec["frames"], "counts": counts})
    return Path(out_family_dir) / "videos" / rel


def _check_truths(spec: dict[str, Any], counts: list[int]) -> None:
    if counts != list(spec["truths"]):
        raise DataError(Path(spec["stem"]), None, f"{spec['family']} twin: the rendered tracks count {counts}, planned {spec['truths']}")


def swing_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """swing: the first swing changed (a complete one turns back halfway; one that turned back reaches the
    far pad), so one cycle fewer or more from its end on."""

    got = _source_frames(family_dir, item)
    if isinstance(got, str):
        return got
    meta, frames, source = got
    seeded = _suite_seed(family_dir, meta.stem)
    if isinstance(seeded, str):
        return seeded
    _, plan, _, replayed_frames = sw.draw(*seeded, redraw_salt(int(meta.params.get("redraw", 0))))
    if replayed_frames != frames or [[round(v, 3) for v in leg] for leg in plan.legs] != meta.params.get("legs"):
        return "its scene does not replay from the suite seed (made by other generator code)"
    (s0, e0, a0, turn), (s1, e1, _, b1) = plan.legs[0], plan.legs[1]
    new_turn = 0.1 if turn == sw.FAR else sw.FAR
    plan.legs[0], plan.legs[1] = (s0, e0, a0, new_turn), (s1, e1, new_turn, b1)
    n_frames = int(sw.DURATION * FPS)
    ends = sw.cycles(plan.poses(n_frames))
    counts = _moved_counts(frames, ends, source)
    if isinstance(counts, str):
        return counts
    return {"family": "swing", "stem": meta.stem, "colour": list(plan.colour), "y": plan.y, "legs": plan.legs,
            "frames": frames, "truths": counts, "truth": counts[-1]}


def render_swing_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    plan = sw.Plan.__new__(sw.Plan)
    plan.colour, plan.y = colour3(spec["colour"]), float(spec["y"])
    plan.legs = [(float(leg[0]), float(leg[1]), float(leg[2]), float(leg[3])) for leg in spec["legs"]]
    renderer = Renderer(sw.WIDTH, sw.HEIGHT, sw.GROUND, noise_sigma=1.5, seed=seed)
    cam = sw.camera()
    clip = render_clip(renderer, int(sw.DURATION * FPS), FPS, lambda i, t: (cam, plan.scene(t)))
    ends = sw.cycles([s[1].state["pose"] for s in clip.seen])
    counts = [sum(1 for e in ends if e <= f) for f in spec["frames"]]
    _check_truths(spec, counts)
    events = [event(FPS, f, "cycle", [1]) for f in ends]
    params = {"y": round(plan.y, 3), "legs": [[round(v, 3) for v in leg] for leg in plan.legs], "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), sw.NAME, stem, clip, events, params, {"frames": spec["frames"], "counts": counts})
    return Path(out_family_dir) / "videos" / rel


def lamp_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """lamp_episodes: the first burst left out (the lamp stays dark), one episode fewer from its end on;
    the scene is all in meta.json (lamp place, bursts)."""

    got = _source_frames(family_dir, item)
    if isinstance(got, str):
        return got
    meta, frames, source = got
    bursts = [[int(f) for f in b] for b in meta.params["bursts"]][1:]
    ends = [b[-1] + le.FLASH for b in bursts]
    counts = _moved_counts(frames, ends, source)
    if isinstance(counts, str):
        return counts
    return {"family": "lamp_episodes", "stem": meta.stem, "lamp_x": float(meta.params["lamp_x"]), "bursts": bursts,
            "frames": frames, "truths": counts, "truth": counts[-1]}


def render_lamp_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    lit = [False] * le.N_FRAMES
    for b in spec["bursts"]:
        for s in b:
            for f in range(s, s + le.FLASH):
                lit[f] = True
    renderer = Renderer(le.WIDTH, le.HEIGHT, le.GROUND, noise_sigma=1.5, seed=seed)
    cam = aim((0.0, -3.6, 2.2), (0.0, 0.0, 0.75), 50.0, le.WIDTH, le.HEIGHT)
    clip = render_clip(renderer, le.N_FRAMES, FPS, lambda i, t: (cam, [lamp(lit[i], spec["lamp_x"])]))
    on = [bool(s[1].state["on"]) for s in clip.seen]  # the rendered lamp's state, frame by frame
    if on != lit:
        raise DataError(Path(spec["stem"]), None, "lamp_episodes twin: the rendered lamp does not flash as planned")
    ends = [b[-1] + le.FLASH for b in spec["bursts"]]  # the family's rule: an episode counts once its last flash ends
    counts = [sum(1 for e in ends if e <= f) for f in spec["frames"]]
    _check_truths(spec, counts)
    events = []
    for b in spec["bursts"]:
        events.append(event(FPS, b[0], "episode_start", [1], flashes=len(b)))
        events.append(event(FPS, b[-1] + le.FLASH, "episode_end", [1]))
    params = {"lamp_x": round(float(spec["lamp_x"]), 3), "bursts": spec["bursts"], "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), le.NAME, stem, clip, events, params, {"frames": spec["frames"], "counts": counts})
    return Path(out_family_dir) / "videos" / rel


# --- cup_drops (VSTAT MCQ, four questions per video): one ball dropped into another cup -----------------

_CUP_QUESTIONS = (("Which cups hold at least one ball at the end", "final_set"), ("At the end of the video, how many", "dict"),
                  ("The three cups look the same", "attribution"), ("Right after the", "mid_set"))


def _cup_answers(cups_per_frame: list[list[list[int]]], k: int, m: int) -> dict[str, str]:
    """The four answers from the cups' per-frame contents, by the family's rules (make_video's)."""

    counts = [[len(c) for c in frame] for frame in cups_per_frame]
    changes = [f for f in range(1, len(counts)) if counts[f] != counts[f - 1]]
    drops = [c for f in changes for c in range(3) if set(cups_per_frame[f][c]) - set(cups_per_frame[f - 1][c])]
    final, mid = counts[-1], counts[changes[m - 1]]
    return {"final_set": cd.set_text([c for c in range(3) if final[c]]), "dict": cd.dict_text(final),
            "attribution": f"{cd.PLACES[drops[k - 1]]} cup", "mid_set": cd.set_text([c for c in range(3) if mid[c]])}


def cup_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """cup_drops: one ball (never lifted out again) dropped into another cup, the first such move (from the
    last drop back) that changes this item's answer to another of its options; the rest of the scene as
    the source (its plan replayed from the suite seed: ball colours are not in meta.json)."""

    stem = Path(item.video).stem
    try:
        meta = gt.read_meta(family_dir, stem)
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc
    which = next((key for prefix, key in _CUP_QUESTIONS if item.question.startswith(prefix)), None)
    if which is None:
        return "not one of the family's questions"
    seeded = _suite_seed(family_dir, stem)
    if isinstance(seeded, str):
        return seeded
    plan = cd.Plan(rng_for(seeded[0], cd.NAME, seeded[1], redraw_salt(int(meta.params.get("redraw", 0)))))
    if [[kind, cup + 1, ball, round(t, 2)] for kind, cup, ball, t in plan.ops] != meta.params.get("ops"):
        return "its scene does not replay from the suite seed (made by other generator code)"
    k, m, n_frames = int(meta.params["question_k"]), int(meta.params["question_m"]), int(plan.duration * FPS)

    def answers(ops: list[tuple[str, int, int, float]]) -> dict[str, str]:
        plan.ops = ops
        return _cup_answers([plan.state(f / FPS)[0] for f in range(n_frames)], k, m)

    source_ops = list(plan.ops)
    source = answers(source_ops)[which]
    lifted = {ball for kind, _, ball, _ in source_ops if kind == "lift"}
    for i in reversed(range(len(source_ops))):
        kind, cup, ball, t = source_ops[i]
        if kind != "drop" or ball in lifted:
            continue
        for other in ((cup + 1) % 3, (cup + 2) % 3):
            ops = [*source_ops[:i], ("drop", other, ball, t), *source_ops[i + 1:]]
            truth = answers(ops)[which]
            if truth != source and truth in item.choices:
                return {"family": "cup_drops", "stem": stem, "question": which, "k": k, "m": m,
                        "ops": [list(op) for op in ops], "duration": plan.duration,
                        "colour": [[b, list(c)] for b, c in plan.colour.items()], "truth": truth}
    return "no ball moved to another cup gives another of its options"


def render_cup_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    plan = cd.Plan.__new__(cd.Plan)  # the family's motion, fed the twin's ops
    plan.ops = [(str(kind), int(cup), int(ball), float(t)) for kind, cup, ball, t in spec["ops"]]
    plan.duration = float(spec["duration"])
    plan.colour = {int(b): colour3(c) for b, c in spec["colour"]}
    renderer = Renderer(cd.WIDTH, cd.HEIGHT, cd.TABLE, noise_sigma=1.5, seed=seed)
    cam = aim((0.0, -4.8, 2.6), (0.0, 0.0, 1.1), 50.0, cd.WIDTH, cd.HEIGHT)
    clip = render_clip(renderer, int(plan.duration * FPS), FPS, lambda i, t: (cam, plan.scene(t)))
    cups = [[list(s[c + 1].state["balls"]) for c in range(3)] for s in clip.seen]
    got = _cup_answers(cups, int(spec["k"]), int(spec["m"]))
    if got[spec["question"]] != spec["truth"]:
        raise DataError(Path(spec["stem"]), None, f"cup_drops twin: the rendered cups answer {got[spec['question']]!r}, planned {spec['truth']!r}")
    events = []
    for f in range(1, len(cups)):
        for c in range(3):
            before, after = set(cups[f - 1][c]), set(cups[f][c])
            events += [event(FPS, f, "drop", [b, c + 1]) for b in sorted(after - before)]
            events += [event(FPS, f, "lift", [b, c + 1]) for b in sorted(before - after)]
    final = [len(c) for c in cups[-1]]
    params = {"ops": [[kind, cup + 1, ball, round(t, 2)] for kind, cup, ball, t in plan.ops],
              "question_k": spec["k"], "question_m": spec["m"], "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), cd.NAME, stem, clip, events, params,
                    {"final": final, "mid": got["mid_set"], "attribution": got["attribution"]})
    return Path(out_family_dir) / "videos" / rel


# --- bolts (VSTAT count) and ec_bolts (EC-Bench count + evidence spans): one turn the other way ----------

def _bolt_runs(plan: Any, n_frames: int) -> list[tuple[int, int, int, int]]:
    """The turns as the family reads them: runs of changing angle per bolt (ec_bolts.turn_runs) over
    the plan's per-frame bolt states."""

    states = [{o.oid: o.state["angle"] for o in plan.scene(f / FPS) if o.cls} for f in range(n_frames)]
    return turn_runs({oid: [s[oid] for s in states] for oid in range(1, plan.n_bolts + 1)})


def bolt_twin_spec(label: str, family_dir: Path, item: Item) -> dict[str, Any] | str:
    """bolts / ec_bolts: the last loosening turn turned the other way (tightening: one more; or, with no
    loosening turn, the last tightening one loosens instead); the same bolt, angle and time. The plan is
    replayed from the suite seed (the start angles are not in meta.json)."""

    if item.meta.get("probe_step") not in (None, "final"):
        return "a failure probe (asked about a step, not the count)"
    stem = Path(item.video).stem
    try:
        meta = gt.read_meta(family_dir, stem)
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc
    seeded = _suite_seed(family_dir, stem)
    if isinstance(seeded, str):
        return seeded
    plan = bolts.Plan(rng_for(seeded[0], label, seeded[1], redraw_salt(int(meta.params.get("redraw", 0)))))
    turns = [[b + 1, d, round(g, 2), round(s, 2), round(e, 2)] for b, d, g, s, e in plan.turns]
    if turns != meta.params.get("turns"):
        return "its scene does not replay from the suite seed (made by other generator code)"
    loosening = [k for k, t in enumerate(plan.turns) if t[1] > 0]
    k = loosening[-1] if loosening else len(plan.turns) - 1
    b, d, g, s, e = plan.turns[k]
    plan.turns[k] = (b, -d, g, s, e)
    n_frames = int(plan.duration * FPS)
    runs = _bolt_runs(plan, n_frames)
    spec: dict[str, Any] = {"family": label, "stem": stem, "n_bolts": plan.n_bolts, "start_angle": plan.start_angle,
                            "turns": [list(t) for t in plan.turns], "duration": plan.duration, "flipped": k,
                            "runs": [list(r) for r in runs]}
    if label == "bolts":
        spec["truth"] = sum(1 for _, direction, *_ in plan.turns if direction < 0)  # the family's answer rule
        return spec
    kind = next((key for key, q in _ec_bolt_questions().items() if q == item.question), None)
    if kind is None:
        return "not one of the family's questions"
    chosen = [r for r in runs if (r[1] < 0) == (kind == "tighten")]
    spans = [span((a - 1) / FPS, b_ / FPS) for _, _, a, b_ in chosen]
    spec.update({"kind": kind, "truth": str(len(chosen)), "evidence": [list(x) for x in spans], "clips": clips_text(spans),
                 "count_details": ", ".join(f"bolt {oid} at {(a - 1) / FPS:.1f}s" for oid, _, a, _ in chosen)})
    return spec


def _ec_bolt_questions() -> dict[str, str]:

    return QUESTIONS


def render_bolt_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    plan = bolts.Plan.__new__(bolts.Plan)  # the family's motion, fed the twin's turns
    plan.n_bolts, plan.start_angle = int(spec["n_bolts"]), [float(a) for a in spec["start_angle"]]
    plan.turns = [(int(b), int(d), float(g), float(s), float(e)) for b, d, g, s, e in spec["turns"]]
    plan.duration = float(spec["duration"])
    renderer = Renderer(bolts.WIDTH, bolts.HEIGHT, bolts.GROUND, noise_sigma=1.5, seed=seed)
    cam = bolts.camera(plan.n_bolts)
    clip = render_clip(renderer, int(plan.duration * FPS), FPS, lambda i, t: (cam, plan.scene(t)))

    angles = {oid: [s[oid].state["angle"] for s in clip.seen] for oid in range(1, plan.n_bolts + 1)}
    runs = turn_runs(angles)
    if [list(r) for r in runs] != spec["runs"]:
        raise DataError(Path(spec["stem"]), None, f"{spec['family']} twin: the rendered bolts turn otherwise than planned")
    events = [event(FPS, a, "tighten" if d < 0 else "loosen", [oid], end_frame=b) for oid, d, a, b in runs]
    answers = {"count": sum(1 for _, d, *_ in plan.turns if d < 0)} if spec["family"] == "bolts" else \
        {k: sum(1 for r in runs if (r[1] < 0) == (k == "tighten")) for k in ("tighten", "loosen")}
    params = {"n_bolts": plan.n_bolts, "turns": [[b + 1, d, round(g, 2), round(s, 2), round(e, 2)] for b, d, g, s, e in plan.turns],
              "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), spec["family"], stem, clip, events, params, answers)
    return Path(out_family_dir) / "videos" / rel


def twin_item_for(item: Item, new_id: str, video: Path, spec: dict[str, Any]) -> Item:
    """`twin_item` with everything the spec says about the twin's truth: per-query truths, and for
    EC-Bench items the evidence spans (the span metric reads them) and the clip/detail texts."""
    twin = twin_item(item, new_id, video, spec["truth"], spec.get("truths"))
    if "evidence" not in spec:
        return twin

    meta = {**twin.meta, "clips": spec["clips"], "count_details": spec.get("count_details", ""), "answer_raw": str(spec["truth"])}
    return twin.model_copy(update={"evidence": [Span(start=float(a), end=float(b)) for a, b in spec["evidence"]], "meta": meta})


# --- ec_beeps (EC-Bench audio cue) and morse_light (VSTAT text): lamp scenes, all in meta.json ------------

def _lamp_meta(family_dir: Path, item: Item) -> gt.VideoMeta:
    stem = Path(item.video).stem
    try:
        return gt.read_meta(family_dir, stem)
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc


def beep_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """ec_beeps: one more beep, with the first flash that had none; or, where that would make every flash
    beep (the family keeps fewer beeps than flashes, else counting flashes would do), one beep fewer
    (the last). The flashes and lamp as the source (meta.json)."""

    meta = _lamp_meta(family_dir, item)
    flashes = [(int(a), int(b)) for a, b in meta.params["flashes"]]
    beeped = [int(i) for i in meta.params["beeped"]]
    if len(beeped) + 1 < len(flashes):
        beeped = sorted([*beeped, next(i for i in range(len(flashes)) if i not in beeped)])
    elif len(beeped) >= 2:
        beeped = beeped[:-1]
    else:
        return "neither one more beep (every flash would beep) nor one fewer (none would) keeps the family's rules"
    spans = [span(flashes[i][0] / FPS, flashes[i][1] / FPS) for i in beeped]
    return {"family": "ec_beeps", "stem": meta.stem, "flashes": [list(f) for f in flashes], "beeped": beeped,
            "lamp_x": float(meta.params["lamp_x"]), "n_frames": meta.n_frames, "truth": str(len(beeped)),
            "evidence": [list(s) for s in spans], "clips": clips_text(spans),
            "count_details": ", ".join(f"flash at {flashes[i][0] / FPS:.1f}s" for i in beeped)}


def render_beep_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:


    flashes, beeped, n_frames = [tuple(f) for f in spec["flashes"]], list(spec["beeped"]), int(spec["n_frames"])
    lit = [False] * n_frames
    for a, b in flashes:
        for g in range(a, b):
            lit[g] = True
    renderer = Renderer(eb.WIDTH, eb.HEIGHT, eb.GROUND, noise_sigma=1.5, seed=seed)
    cam = aim((0.0, -3.6, 2.2), (0.0, 0.0, 0.75), 50.0, eb.WIDTH, eb.HEIGHT)
    clip = render_clip(renderer, n_frames, FPS, lambda i, t: (cam, [lamp(lit[i], spec["lamp_x"])]))
    audio = eb.beep_track(n_frames, [flashes[i][0] for i in beeped])
    loud = np.flatnonzero(np.abs(audio) > 0)  # beeps: runs of sound more than 50 ms apart (a tone crosses zero)
    onsets = loud[np.concatenate(([True], np.diff(loud) > eb.RATE // 20))] if len(loud) else loud
    at = sorted({int(round(i / eb.RATE * FPS)) for i in onsets})
    if at != sorted(flashes[i][0] for i in beeped) or str(len(at)) != spec["truth"]:
        raise DataError(Path(spec["stem"]), None, f"ec_beeps twin: its audio beeps at frames {at}, planned {spec['truth']} beeps")
    events = []
    for i, (a, b) in enumerate(flashes):
        events.append(event(FPS, a, "on", [1]))
        events.append(event(FPS, b, "off", [1]))
        if i in beeped:
            events.append(event(FPS, a, "beep", [], duration_s=eb.BEEP_S, hz=eb.BEEP_HZ))
    params = {"flashes": [list(f) for f in flashes], "beeped": beeped, "lamp_x": round(float(spec["lamp_x"]), 3),
              "audio_rate": eb.RATE, "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), eb.NAME, stem, clip, events, params, {"count": len(beeped), "flashes": len(flashes)},
                    audio=audio, audio_rate=eb.RATE)
    return Path(out_family_dir) / "videos" / rel


def morse_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """morse_light: another word of the family's list, the one whose code lasts closest to the source's
    (same unit, lead-in, tail and lamp); truth = that word."""

    meta = _lamp_meta(family_dir, item)
    unit, lead = int(meta.params["unit_frames"]), int(meta.params["lead_frames"])
    source = str(meta.answers.get("text", "")).lower()
    if source not in ml.WORDS:
        return "its word is not one of the family's"

    def length(word: str) -> int:
        pattern = ml.flashes(word, unit)
        return pattern[-1][0] + pattern[-1][1]

    tail = meta.n_frames - lead - length(source)
    word = min((w for w in ml.WORDS if w != source), key=lambda w: (abs(length(w) - length(source)), ml.WORDS.index(w)))
    return {"family": "morse_light", "stem": meta.stem, "word": word, "unit": unit, "lead": lead, "tail": tail,
            "lamp_x": float(meta.params["lamp_x"]), "truth": word}


def render_morse_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    unit, lead, word = int(spec["unit"]), int(spec["lead"]), str(spec["word"])
    pattern = ml.flashes(word, unit)
    n_frames = lead + pattern[-1][0] + pattern[-1][1] + int(spec["tail"])
    lit = [False] * n_frames
    for start, length in pattern:
        for f in range(lead + start, lead + start + length):
            lit[f] = True
    renderer = Renderer(ml.WIDTH, ml.HEIGHT, ml.GROUND, noise_sigma=1.5, seed=seed)
    cam = aim((0.0, -3.6, 2.2), (0.0, 0.0, 0.75), 50.0, ml.WIDTH, ml.HEIGHT)
    clip = render_clip(renderer, n_frames, FPS, lambda i, t: (cam, [ml.lamp(lit[i], spec["lamp_x"])]))
    if [bool(s[1].state["on"]) for s in clip.seen] != lit:
        raise DataError(Path(spec["stem"]), None, "morse_light twin: the rendered lamp does not flash the planned code")
    events = []
    for start, length in pattern:
        events.append(event(FPS, lead + start, "on", [1]))
        events.append(event(FPS, lead + start + length, "off", [1]))
    params = {"unit_frames": unit, "lead_frames": lead, "code": " ".join(ml.MORSE[c] for c in word.upper()),
              "lamp_x": round(float(spec["lamp_x"]), 3), "twin_of": spec["stem"]}
    rel = save_clip(Path(out_family_dir), ml.NAME, stem, clip, events, params, {"text": word})
    return Path(out_family_dir) / "videos" / rel


# --- streaming_count (O2-Unique, E1-Action): one individual of the asked kind left out ----------------------

def streaming_twin_spec(family_dir: Path, item: Item) -> dict[str, Any] | str:
    """streaming_count: the individual of the asked kind that first comes into view earliest left out
    (one fewer unique / fewer entries from then on). Whether an object is in view does not depend on
    the others (its own silhouette in the image), so the twin's counts follow from the replayed source
    clip's flags; O1-Snap (visible now, occlusion-dependent) is not covered."""

    stem = Path(item.video).stem
    subtype = item.labels.get("counting_subtype", "")
    if subtype not in ("O2-Unique", "E1-Action"):
        return f"{subtype or 'this'} question (visible now: leaving an object out changes what hides what)"
    seeded = _suite_seed(family_dir, stem)
    if isinstance(seeded, str):
        return seeded
    try:
        j = int(item.id.rsplit("_q", 1)[1])
    except (IndexError, ValueError):
        return "not one of the family's questions"
    try:
        redraw = int(gt.read_meta(family_dir, stem).params.get("redraw", 0))
    except (OSError, ValueError) as exc:
        raise DataError(gt.meta_path(family_dir, stem), None, f"cannot read the scene of {item.id}: {exc}") from exc
    _, plan, _, events, in_view, questions = sc.draw(*seeded, redraw_salt(redraw))
    if j >= len(questions) or questions[j][0] != subtype or [int(q.target) for q in item.queries] != questions[j][3]:
        return "its scene does not replay from the suite seed (made by other generator code)"
    _, kind, frames, source = questions[j]
    firsts = {e["ids"][0]: e["frame"] for e in reversed(events) if e["kind"] == "enter" and e["data"]["cls"] == kind}
    if not firsts:
        return "no object of the asked kind comes into view"
    gone = min(firsts, key=lambda oid: (firsts[oid], oid))
    kept = [ind for ind in plan.individuals if ind.oid != gone]
    counts = [sc.answers_at(None, kept, in_view, kind, subtype, f) for f in frames]
    if any(a == b for a, b in zip(counts, source)):
        return "a query comes before the left-out object first enters (its answer would not move)"
    individuals = [{"oid": i.oid, "kind": i.kind, "colour": list(i.colour), "lane": i.lane,
                    "visits": [[v.start, v.side_in, v.stop_x, v.dwell, v.side_out] for v in i.visits]} for i in kept]
    return {"family": "streaming_count", "stem": stem, "gone": gone, "individuals": individuals, "drift": list(plan.drift),
            "kind": kind, "subtype": subtype, "frames": frames, "truths": counts, "truth": counts[-1]}


def render_streaming_twin(spec: dict[str, Any], out_family_dir: Path, stem: str, seed: int) -> Path:

    plan = sc.Plan.__new__(sc.Plan)  # the family's motion and camera, fed the source's individuals less one
    plan.drift = (float(spec["drift"][0]), float(spec["drift"][1]), float(spec["drift"][2]))
    plan.individuals = [sc.Individual(int(i["oid"]), str(i["kind"]), colour3(i["colour"]), float(i["lane"]),
                                      [sc.Visit(float(a), int(b), float(c), float(d), int(e)) for a, b, c, d, e in i["visits"]])
                        for i in spec["individuals"]]
    n_frames = int(sc.DURATION * FPS)
    renderer = Renderer(sc.WIDTH, sc.HEIGHT, sc.GROUND, noise_sigma=1.5, seed=seed)
    clip = render_clip(renderer, n_frames, FPS, lambda i, t: (plan.camera(t), plan.scene(t)))
    events, in_view = sc.view_events(clip, plan.individuals)
    counts = [sc.answers_at(clip, plan.individuals, in_view, spec["kind"], spec["subtype"], f) for f in spec["frames"]]
    _check_truths(spec, counts)
    params = {"individuals": [{"id": i.oid, "kind": i.kind, "colour": list(i.colour), "lane": i.lane,
                               "visits": [[round(x, 3) for x in v.times()] for v in i.visits]} for i in plan.individuals],
              "drift": [round(x, 3) for x in plan.drift], "in_view_threshold": sc.IN_VIEW, "twin_of": spec["stem"]}
    answers = {"questions": [{"subtype": spec["subtype"], "kind": spec["kind"], "frames": spec["frames"], "counts": counts}]}
    rel = save_clip(Path(out_family_dir), sc.NAME, stem, clip, events, params, answers)
    return Path(out_family_dir) / "videos" / rel
