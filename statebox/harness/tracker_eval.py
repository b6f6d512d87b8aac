"""`statebox tracker eval`: the tracker baseline over a generated suite, as a normal run.

The suite is planned like `statebox run --suite` for two agents, `tracker` and
`chance-frequency`, and run through the one harness (`runner.run_planned`): every
query is an attempt in the tracker sandbox on the cut, de-identified video, audited and
scored by the shared scorer into `RUN_DIR/results.sqlite`. The per-family table is then
read back from the store (abstentions counted apart and scored wrong) and from each
attempt's `session.json` (which tracking program answered, network attempts seen).
Rerunning the same command continues the same run folder.

Tracking accuracy sits next to answer accuracy: each tracker attempt's `tracks.jsonl`
is scored against the generator's exact per-frame tracks (HOTA, IDF1, MOTA from
trackeval, statebox/tracker/runtime/metrics.py), per item on its longest attempt (the
latest query time sees the most frames). With `compare_ultralytics`, one extra tracker
container runs ultralytics' own `model.track` loop over the same videos with the same
weights (`sbtracker.cli peer`), scored on the very frames the statebox attempt saw
(both trackers are online, so a prefix of a full-video run is the run on the cut video).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field, JsonValue

from statebox.attempt_folder import (RUN_CONFIG_FILE, SESSION_FILE, STDERR_LOG, STDOUT_LOG, TRACKER_OUT_DIR, TRACKER_TRACKS,
                                     AttemptFolder, attempt_file_exists, open_attempt_file, read_attempt_file)
from statebox.benchmarks import load_benchmark
from statebox.errors import UserError
from statebox.harness.plan import RunConfig, datasets_from_suite
from statebox.harness.runner import run_planned
from statebox.harness.store import ResultRow, open_existing
from statebox.policies import load_policy
from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
from statebox.sandbox.workspace import limited_folder
from statebox.tracker import container as tc

TRACKER = "tracker"
BASELINE = "chance-frequency"


class TaskScore(BaseModel):
    task: str
    bench: str
    n: int = 0
    correct: int = 0
    abstained: int = 0
    chance_correct: float = 0.0  # correct answers of the frequency baseline on the same queries
    programs: dict[str, int] = Field(default_factory=dict)
    tracking: dict[str, dict[str, float]] = Field(default_factory=dict)  # side (statebox | ultralytics) -> metrics

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def chance(self) -> float:
        return self.chance_correct / self.n if self.n else 0.0


class SuiteScore(BaseModel):
    weights: str
    run_dir: str = ""
    tasks: dict[str, TaskScore] = Field(default_factory=dict)
    network_attempts: int = 0
    answers: list[dict] = Field(default_factory=list)
    tracking: dict[str, dict[str, float]] = Field(default_factory=dict)  # side -> metrics over every scored video


def tracker_run_config(suite_dir: Path, weights: Path | None = None, *, tasks: list[str] | None = None,
                       stride: int = 1, concurrency: int = 1, policy: str = "default", group: int = 1) -> RunConfig:
    """The run `tracker eval` makes: tracker + the frequency baseline over the suite's families.

    `group` > 1: up to that many concurrent tracker attempts share one container (one model load,
    batched forward passes; the tracker agent's `group` option), so the run's concurrency is at
    least `group`. Answers and tracks equal the one-container-per-attempt run's
    (tracks up to float rounding: a frame batched with other streams' may round differently on CPU)."""
    if not (Path(suite_dir) / "suite.json").exists():
        raise UserError(f"{suite_dir}: not a suite folder (no suite.json); make one with `statebox bench make`")
    datasets = datasets_from_suite(suite_dir)
    if tasks:
        unknown = sorted(set(tasks) - {d.label for d in datasets})
        if unknown:
            raise UserError(f"--task {', '.join(unknown)}: not in {suite_dir} (has: {', '.join(d.label for d in datasets)})")
        datasets = [d for d in datasets if d.label in tasks]
    weights_path = tc.resolve_weights(weights)
    extra: dict[str, JsonValue] = {"stride": stride}
    if group > 1:  # left out at 1, so an existing run folder's config (and run id) is unchanged
        extra["group"] = group
        concurrency = max(concurrency, group)
    tracker_options: dict[str, JsonValue] = {"weights": str(weights_path), "extra": extra}
    agents = [TRACKER, BASELINE]
    options: dict[str, dict[str, JsonValue]] = {TRACKER: tracker_options, BASELINE: {}}
    config = RunConfig(run_id="", agents=agents, datasets=datasets, concurrency=concurrency, policy=policy,
                       agent_options=options, suite=str(Path(suite_dir).resolve()))
    return config.model_copy(update={"run_id": config.fingerprint(command="tracker eval")})


def evaluate_suite(suite_dir: Path, weights: Path | None = None, *, tasks: list[str] | None = None,
                   run_dir: Path | None = None, stride: int = 1, concurrency: int = 1, policy: str = "default",
                   progress: Callable[[str], None] = lambda _m: None, compare_ultralytics: bool = False,
                   group: int = 1) -> SuiteScore:
    """Run (or continue) the tracker's run over the suite and read its per-family scores (and tracking metrics)."""
    config = tracker_run_config(suite_dir, weights, tasks=tasks, stride=stride, concurrency=concurrency, policy=policy,
                                group=group)
    run_dir = Path(run_dir) if run_dir is not None else Path("runs") / config.run_id
    if (run_dir / RUN_CONFIG_FILE).exists():
        config = config.model_copy(update={"run_id": RunConfig.load(run_dir).run_id})  # same folder: resume

    def on_progress(agent: str, row: ResultRow | None, tally) -> None:
        if row is not None and agent == TRACKER:
            progress(f"{row.dataset}/{row.item_id}#{row.query_index}: {row.status} "
                     f"({tally.done}/{tally.total})")

    progress(f"run folder {run_dir}")
    run_planned(config, run_dir, progress=on_progress).close()
    if compare_ultralytics:
        progress("ultralytics' model.track loop over the same videos (one tracker container)")
        run_peer(suite_dir, [d.label for d in config.datasets], tc.resolve_weights(weights), stride, run_dir / PEER_DIR,
                 policy)
    return suite_scores(run_dir, weights_name=tc.resolve_weights(weights).name)


PEER_DIR = "tracker-peer"  # in the run folder: <video stem>.ultralytics.tracks.jsonl


def _suite_videos(suite_dir: Path, families: list[str]) -> dict[str, dict[str, Path]]:
    """family -> {item id -> video path} for the suite's datasets of `families`."""
    from statebox.benchmarks.synthetic.suite import load_suite  # why: the generator's package (numpy, the renderer)

    out: dict[str, dict[str, Path]] = {}
    for ds in load_suite(suite_dir).datasets:
        if ds.family in families:
            items = load_benchmark(ds.bench, ds.data, ds.videos).items
            out[ds.family] = {it.id: Path(ds.videos) / it.video for it in items}
    return out


def run_peer(suite_dir: Path, families: list[str], weights: Path, stride: int, out_dir: Path, policy: str) -> None:
    """ultralytics' own tracking loop over every video of `families`, in one tracker container (network none)."""
    videos = sorted({v for per in _suite_videos(suite_dir, families).values() for v in per.values()})
    if not videos:
        return
    pol = load_policy(policy)
    pol = pol.model_copy(update={"limits": pol.limits.model_copy(update={
        "time_limit_s": max(pol.limits.time_limit_s, 60.0 * len(videos)), "memory_mb": max(pol.limits.memory_mb, 4096)})})
    engine = SandboxEngine()
    scratch = limited_folder(256, inodes=10_000)
    try:
        mounts = [Mount(source=weights, target=f"{tc.MODELS_MOUNT}/{weights.name}"),
                  Mount(source=scratch.path, target=tc.OUT_MOUNT, read_only=False)]
        command = [tc.PYTHON, "-m", "sbtracker.cli", "peer", "--weights", f"{tc.MODELS_MOUNT}/{weights.name}",
                   "--out", tc.OUT_MOUNT, "--stride", str(stride)]
        for i, video in enumerate(videos):
            mounts.append(Mount(source=video.resolve(), target=f"/videos/{i}/{video.name}"))
            command += ["--video", f"/videos/{i}/{video.name}"]
        out_dir.mkdir(parents=True, exist_ok=True)
        spec = ContainerSpec(image=tc.tracker_image(), command=command, workspace=None, policy=pol,
                             env=dict(tc.OFFLINE_ENV), mounts=mounts, gpu=True, time_limit_s=None)
        result = engine.run(spec, out_dir / STDOUT_LOG, out_dir / STDERR_LOG)
        if result.status != "ok" or result.exit_code not in (0, None):
            raise UserError(f"ultralytics' tracking loop failed ({result.status}, exit {result.exit_code}); "
                            f"see {out_dir / STDERR_LOG}")
        scratch.copy_out(out_dir)
    finally:
        scratch.cleanup()


def suite_scores(run_dir: Path, *, weights_name: str = "") -> SuiteScore:
    """The per-family table of a `tracker eval` run folder, from its store and attempt folders."""
    run_dir = Path(run_dir)
    store = open_existing(run_dir)
    try:
        rows = store.rows()
    finally:
        store.close()
    result = SuiteScore(weights=weights_name, run_dir=str(run_dir))
    baseline = {(r.dataset, r.item_id, r.query_index): r for r in rows if r.agent == BASELINE}
    for row in sorted((r for r in rows if r.agent == TRACKER), key=lambda r: (r.dataset, r.item_id, r.query_index)):
        score = result.tasks.setdefault(row.dataset, TaskScore(task=row.dataset, bench=row.bench))
        session = _session(run_dir, row.attempt_id)
        meta = session.get("meta", {})
        program = str(meta.get("program") or ("error" if row.status not in ("ok", "abstain") else "?"))
        abstain = row.status == "abstain"
        correct = 0.0 if abstain else float(row.metrics.get("correct") or 0.0)
        chance_row = baseline.get((row.dataset, row.item_id, row.query_index))
        score.n += 1
        score.correct += int(correct >= 0.5)
        score.abstained += int(abstain)
        score.chance_correct += float(chance_row.metrics.get("correct") or 0.0) if chance_row else 0.0
        score.programs[program] = score.programs.get(program, 0) + 1
        result.network_attempts += sum(1 for e in session.get("events", []) if e.get("kind") == "network_attempt")
        if not weights_name and meta.get("weights"):
            result.weights = str(meta["weights"])
        result.answers.append({"task": row.dataset, "key": f"{row.item_id}#{row.query_index}", "response": row.response,
                               "correct": correct, "program": program, "abstain": abstain,
                               "status": row.status, "verdict": row.verdict,
                               "explanation": str(meta.get("explanation") or row.reason or "")})
    _add_tracking(result, run_dir, rows)
    return result


def _add_tracking(result: SuiteScore, run_dir: Path, rows: list[ResultRow]) -> None:
    """HOTA / IDF1 / MOTA per task (and overall) for statebox's tracker and, when run, ultralytics' loop."""
    from statebox.tracker.runtime.metrics import combine, load_tracks_jsonl, load_truth, tracking_metrics  # why: trackeval and numpy, for this table only

    if not (run_dir / RUN_CONFIG_FILE).is_file():
        return
    suite = RunConfig.load(run_dir).suite
    if not suite or not Path(suite).is_dir():
        return
    videos = _suite_videos(Path(suite), sorted(result.tasks))
    longest: dict[tuple[str, str], tuple[int, Path]] = {}
    for row in rows:
        if row.agent != TRACKER:
            continue
        path = AttemptFolder(run_dir, row.attempt_id).file(TRACKER_OUT_DIR) / TRACKER_TRACKS
        if attempt_file_exists(str(path)):  # through the attempt folder's door: a link or FIFO is one line, exit 2
            with open_attempt_file(path) as fh:
                n = sum(1 for _ in fh)
            if n > longest.get((row.dataset, row.item_id), (-1, path))[0]:
                longest[(row.dataset, row.item_id)] = (n, path)
    per_task: dict[str, dict[str, list[dict]]] = {}
    for (task, item_id), (_n, path) in sorted(longest.items()):
        video = videos.get(task, {}).get(item_id)
        truth = video.parent.parent / "gt" / f"{video.stem}.tracks.jsonl" if video else None
        if video is None or truth is None or not truth.is_file():
            continue
        gt = load_truth(truth)
        frames, boxes = load_tracks_jsonl(path)
        sides = per_task.setdefault(task, {})
        sides.setdefault("statebox", []).append(tracking_metrics(gt, boxes, frames))
        peer = run_dir / PEER_DIR / f"{video.stem}.ultralytics.tracks.jsonl"
        if peer.is_file():
            _, peer_boxes = load_tracks_jsonl(peer)
            sides.setdefault("ultralytics", []).append(tracking_metrics(gt, peer_boxes, frames))  # the same frames
    everything: dict[str, list[dict]] = {}
    for task, sides in per_task.items():
        for side, per in sides.items():
            result.tasks[task].tracking[side] = combine(per)
            everything.setdefault(side, []).extend(per)
    result.tracking = {side: combine(per) for side, per in everything.items()}


def _session(run_dir: Path, attempt_id: str) -> dict:
    path = AttemptFolder(run_dir, attempt_id).file(SESSION_FILE)
    try:
        return json.loads(read_attempt_file(str(path)))
    except (OSError, ValueError):
        return {}
