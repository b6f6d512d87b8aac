"""`statebox tracker eval`: the tracker baseline over a generated suite, as a normal run.

The suite is planned like `statebox run --suite` for two agents, `tracker` and
`chance-frequency`, and run through the one harness (`runner.run_planned`): every
query is an attempt in the tracker sandbox on the cut, de-identified video, audited and
scored by the shared scorer into `RUN_DIR/results.sqlite`. The per-family table is then
read back from the store (abstentions counted apart and scored wrong) and from each
attempt's `session.json` (which tracking program answered, network attempts seen).
Rerunning the same command continues the same run folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from statebox.errors import UserError
from statebox.harness.plan import RunConfig, datasets_from_suite, run_id_for
from statebox.harness.runner import ATTEMPTS_DIR, run_planned
from statebox.harness.store import ResultRow, open_existing
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


def tracker_run_config(suite_dir: Path, weights: Path | None = None, *, tasks: list[str] | None = None,
                       stride: int = 1, concurrency: int = 1, policy: str = "default") -> RunConfig:
    """The run `tracker eval` makes: tracker + the frequency baseline over the suite's families."""
    if not (Path(suite_dir) / "suite.json").exists():
        raise UserError(f"{suite_dir}: not a suite folder (no suite.json); make one with `statebox bench make`")
    datasets = datasets_from_suite(suite_dir)
    if tasks:
        unknown = sorted(set(tasks) - {d.label for d in datasets})
        if unknown:
            raise UserError(f"--task {', '.join(unknown)}: not in {suite_dir} (has: {', '.join(d.label for d in datasets)})")
        datasets = [d for d in datasets if d.label in tasks]
    weights_path = tc.resolve_weights(weights)
    tracker_options = {"weights": str(weights_path), "extra": {"stride": stride}}
    agents = [TRACKER, BASELINE]
    options = {TRACKER: tracker_options, BASELINE: {}}
    run_id = run_id_for({"agents": agents, "datasets": [d.model_dump() for d in datasets], "limit": None,
                         "epochs": 1, "policy": policy, "options": options, "command": "tracker eval"})
    return RunConfig(run_id=run_id, agents=agents, datasets=datasets, concurrency=concurrency, policy=policy,
                     agent_options=options, suite=str(Path(suite_dir).resolve()))


def evaluate_suite(suite_dir: Path, weights: Path | None = None, *, tasks: list[str] | None = None,
                   run_dir: Path | None = None, stride: int = 1, concurrency: int = 1, policy: str = "default",
                   progress: Callable[[str], None] = lambda _m: None) -> SuiteScore:
    """Run (or continue) the tracker's run over the suite and read its per-family scores."""
    config = tracker_run_config(suite_dir, weights, tasks=tasks, stride=stride, concurrency=concurrency, policy=policy)
    run_dir = Path(run_dir) if run_dir is not None else Path("runs") / config.run_id
    if (run_dir / "run.json").exists():
        config = config.model_copy(update={"run_id": RunConfig.load(run_dir).run_id})  # same folder: resume

    def on_progress(agent: str, row: ResultRow | None, tally) -> None:
        if row is not None and agent == TRACKER:
            progress(f"{row.dataset}/{row.item_id}#{row.query_index}: {row.status} "
                     f"({tally.done}/{tally.total})")

    progress(f"run folder {run_dir}")
    run_planned(config, run_dir, progress=on_progress).close()
    return suite_scores(run_dir, weights_name=tc.resolve_weights(weights).name)


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
    return result


def _session(run_dir: Path, attempt_id: str) -> dict:
    path = run_dir / ATTEMPTS_DIR / attempt_id / "session.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
