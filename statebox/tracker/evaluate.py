"""Score the tracker baseline on a generated suite, per task, next to the frequency baseline.

One sandboxed tracker run per task (network none, videos and weights read-only, one
model load) tracks each video once and answers every query about it: streaming queries are answered on the frames
before their query time, which equals a run on the cut video because tracking is online
(see sbtracker.cli `--questions-file`). Each answer goes through the shared scorer
(`statebox.scoring.score_query`); abstentions count as wrong and are reported apart.
The full agent path (`statebox run --agent tracker`) gives the same answers one query
at a time through the harness.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from statebox.tracker import container as tc


class TaskScore(BaseModel):
    task: str
    bench: str
    n: int = 0
    correct: int = 0
    abstained: int = 0
    chance_correct: float = 0.0  # expected correct of the frequency baseline
    programs: dict[str, int] = Field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def chance(self) -> float:
        return self.chance_correct / self.n if self.n else 0.0


class SuiteScore(BaseModel):
    weights: str
    tasks: dict[str, TaskScore] = Field(default_factory=dict)
    network_attempts: int = 0
    answers: list[dict] = Field(default_factory=list)


def evaluate_suite(suite_dir: Path, weights: Path | None = None, *, tasks: list[str] | None = None,
                   engine=None, policy=None, progress=lambda _m: None, workdir: Path | None = None,
                   stride: int = 1) -> SuiteScore:
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.policies import load_policy
    from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
    from statebox.schema import resolve_video
    from statebox.scoring import chance_response, score_query

    suite = load_suite(Path(suite_dir))
    weights_path = tc.resolve_weights(weights)
    engine = engine or SandboxEngine()
    if policy is None:  # the default sandbox rules, with every core (one container at a time)
        policy = load_policy("default")
        policy = policy.model_copy(update={"limits": policy.limits.model_copy(update={"cpus": float(os.cpu_count() or 1)})})
    image = tc.tracker_image(progress=progress)
    result = SuiteScore(weights=weights_path.name)
    work = Path(workdir or tempfile.mkdtemp(prefix="statebox-tracker-eval-"))
    rng = random.Random(0)
    for ds in suite.datasets:
        if tasks and ds.family not in tasks:
            continue
        items = load_benchmark(ds.bench, ds.data, ds.videos).items
        score = result.tasks.setdefault(ds.family, TaskScore(task=ds.family, bench=ds.bench))
        questions, keys = [], {}
        for item in items:
            video = resolve_video(item, ds.videos)
            for q in item.queries:
                key = f"{item.id}#{q.index}"
                keys[key] = (item, q.index)
                questions.append({"key": key, "question": item.question, "choices": item.choices, "until": q.time,
                                  "video": f"/videos/{video.relative_to(ds.videos)}"})
        run_dir = work / ds.family
        if run_dir.exists():
            shutil.rmtree(run_dir)
        (run_dir / "in").mkdir(parents=True)
        (run_dir / "out").mkdir()
        os.chmod(run_dir / "out", 0o777)
        (run_dir / "in" / "questions.json").write_text(json.dumps(questions))
        command = [tc.PYTHON, "-m", "sbtracker.cli", "track", "--questions-file", f"{tc.INPUT_MOUNT}/questions.json",
                   "--weights", f"{tc.MODELS_MOUNT}/{weights_path.name}", "--out", tc.OUT_MOUNT,
                   "--stride", str(stride)]
        spec = ContainerSpec(image=image, command=command, workspace=None, policy=policy, env=dict(tc.OFFLINE_ENV),
                             mounts=[Mount(source=ds.videos, target="/videos"),
                                     Mount(source=weights_path, target=f"{tc.MODELS_MOUNT}/{weights_path.name}"),
                                     Mount(source=run_dir / "in", target=tc.INPUT_MOUNT),
                                     Mount(source=run_dir / "out", target=tc.OUT_MOUNT, read_only=False,
                                           writer="statebox")],
                             gpu=True)
        net: list[dict] = []

        def on_line(line: str) -> None:
            event = tc.parse_event_line(line)
            if not event:
                return
            if event.get("event") == "network_attempt":
                net.append(event)
            elif event.get("event") == "tracked":
                progress(f"{ds.family}/{event.get('video')}: {event.get('frames')} frames at {event.get('fps')} fps")

        run = engine.run(spec, run_dir / "stdout.log", run_dir / "stderr.log", on_stdout_line=on_line)
        result.network_attempts += len(net) + len(tc.read_network_log(run_dir / "out"))
        answers = {}
        answers_file = run_dir / "out" / "answers.jsonl"
        if answers_file.exists():
            for line in answers_file.read_text().splitlines():
                row = json.loads(line)
                answers[row["key"]] = row
        for key, (item, qi) in keys.items():
            row = answers.get(key, {"response": "", "abstain": False, "program": "error",
                                    "explanation": f"tracker run {run.status} (exit {run.exit_code})"})
            correct = 0.0 if row.get("abstain") else score_query(ds.bench, item, qi, row["response"]).metrics.get("correct", 0.0)
            chance = score_query(ds.bench, item, qi, chance_response(ds.bench, item, qi, items, "frequency", rng))
            score.n += 1
            score.correct += int(correct >= 0.5)
            score.abstained += int(bool(row.get("abstain")))
            score.chance_correct += chance.metrics.get("correct", 0.0)
            score.programs[row.get("program", "?")] = score.programs.get(row.get("program", "?"), 0) + 1
            target = item.queries[qi].target if item.queries[qi].target is not None else item.target
            result.answers.append({"task": ds.family, "key": key, "response": row.get("response"), "target": target,
                                   "correct": correct, "program": row.get("program"), "abstain": bool(row.get("abstain")),
                                   "explanation": row.get("explanation", "")})
        progress(f"{ds.family}: {score.correct}/{score.n} correct")
    return result
