"""How does `statebox report` scale with the run? (a real evaluation has 10,000+ attempts)

Synthesises runs of 1k, 10k and 100k attempts (5 agents x 3 datasets x 2 epochs; the
datasets' items grow with the size: a CP-Bench count manifest, a VSTAT multiple-choice
file and a VCBench streaming file with 5 query points per question). Rows are written
through the real store API (`ResultStore.add`), ~8% of them flagged by the auditor; every
attempt has an `events.jsonl` of 60 events (~9 KB, hard links to a few templates so the
disk stays small; the report still opens and reads every one).

Measured in the same run, each in a fresh process (peak memory = that process's max RSS):
- floor: reading the same rows from SQLite (`SELECT *`, the two JSON columns decoded);
- rows-only: `statebox report`'s writer (`write_report_output`) on the same rows with no attempt
  folders: everything the report computes and writes except copying transcripts, which no SQLite
  floor includes. The target (at 100k: <= 5x the floor) is this ratio;
- report: the first report after the run (every transcript read and copied into chunks), with
  the seconds of its transcript part;
- again: the next report of the unchanged run (transcript chunks linked from the last report);
- store API: the rows as `ResultRow`s through `ResultStore.rows()`; score_run: `aggregate.score_run`.

Prints CPU seconds (user+sys, steadier on a shared machine) and wall seconds, peak MB, the ratios
to the floor, report.html size and the chunk folder. Usage:
.venv/bin/python perf/report_scale.py [SIZE ...] [--keep DIR]

Measured 2026-11-23 (issue 16), shared 2-core machine, load ~2.5-3, CPU seconds, ratio = CPU / floor CPU
of the same run (wall ratio after the slash); orjson for the per-attempt JSON and `harness.plan` no longer
importing the gateway (httpx), against the commit before them, measured back to back on the same rows:

  attempts   floor   rows-only             first report (transcripts s)   again         peak MB (report)
       960   0.03    0.43  12.8x/10.3x     0.49  14.6x/12.3x  (0.07)       0.41 12.4x    57
     9,960   0.08    0.59   7.3x/ 6.0x     1.20  14.9x/12.3x  (0.54)       0.66  8.1x    70
    99,960   0.53    2.69   5.0x/ 4.9x     8.64  16.2x/15.3x  (5.32)       3.15  5.9x   160
  before:    0.53    3.07   5.8x/ 5.8x     8.77  16.4x/15.6x  (5.17)       3.52  6.6x   171
  (100k, four more runs: rows-only 2.50-2.65 CPU s, 4.7-5.1x CPU / 4.6-5.1x wall; the commit before,
  two more: 2.86-2.89, 5.3-5.4x / 5.1-5.2x)

Before issue 16 (same rows, load 5-12): rows-only 9.13 CPU s (16.2x), first report 16.35 (29x), peak
205 MB. The <= 5x target at 100k is met, at the edge: 4.7-5.1x CPU without transcripts (the floor itself
moves 0.50-0.54 s between runs). What is left (100k, rows-only, CPU s): fixed ~0.3 imports and ~0.2
loading the items; reading the rows ~0.5 (the floor's own work); scoring ~0.9 (30 epoch tables ~0.15,
bootstrap ~0.35 = three multinomial draws, one per dataset, plus 15 weight x sums products, chance
baselines 0.07, views/groups/match the rest); per-attempt index, details and plots ~0.55 (Python per row;
their JSON, through orjson, is now ~0.02: json.dumps of the index alone was ~0.18). The transcripts (1.6 GB here) cost 5-8 s, I/O-bound, and only
the first report after a run pays them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGENTS = ["agent-opus", "agent-codex", "agent-gemini", "chance-frequency", "oracle-ish"]
ACCURACY = {"agent-opus": 0.72, "agent-codex": 0.64, "agent-gemini": 0.55, "chance-frequency": 0.3, "oracle-ish": 0.97}
EPOCHS = 2
EVENTS_PER_ATTEMPT = 60
TEMPLATES = 16


def write_datasets(root: Path, attempts: int) -> list[dict]:
    """Three datasets sized so that agents x epochs x queries ~= attempts."""
    per_dataset = max(1, attempts // (len(AGENTS) * EPOCHS * 3))
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    counts = root / "counts.jsonl"
    with counts.open("w") as fh:
        for i in range(per_dataset):
            fh.write(json.dumps({"id": f"count_{i:06d}", "video": f"count_{i:06d}.mp4", "count": rng.randint(1, 9),
                                 "setting": "main" if i % 2 else "control"}) + "\n")
    shell = []
    for i in range(per_dataset):
        answer = rng.randint(0, 2)
        shell.append({"id": f"shell_{i:06d}", "source_task": "shell_game", "video_id": f"shell_{i // 2:06d}",
                      "video_path": f"shell_{i:06d}.mp4", "question": "Which cup hides the ball at the end of the video?",
                      "answer": "ABC"[answer], "choices": ["left cup", "middle cup", "right cup"], "answer_index": answer,
                      "labels": {"task": "shell_game", "difficulty": ["easy", "hard"][i % 2]}})
    (root / "shell.json").write_text(json.dumps({"data": {"shell_game": shell}}))
    stream = root / "stream.jsonl"
    with stream.open("w") as fh:
        for i in range(max(1, per_dataset // 5)):
            count = 0
            for k in range(5):
                count += rng.randint(0, 2)
                fh.write(json.dumps({"q_id": f"stream_{i:06d}_{k}", "query_index": k, "id": f"stream_{i:06d}",
                                     "source_dataset": "synthetic", "video_path": f"stream_{i:06d}.mp4",
                                     "question": "How many balls have entered so far?", "counting_type": "O2",
                                     "counting_subtype": "O2-Gain", "query_time": 5.0 * (k + 1), "count": count}) + "\n")
    return [
        {"label": "counts", "bench": "cpbench", "data": str(counts), "videos": None},
        {"label": "shell", "bench": "vstat", "data": str(root / "shell.json"), "videos": None},
        {"label": "stream", "bench": "vcbench", "data": str(stream), "videos": None},
    ]


def event_templates(root: Path) -> list[Path]:
    rng = random.Random(1)
    out = []
    words = "ffmpeg probe frame grid crop motion count cup ball left right moved under python numpy opencv".split()
    for t in range(TEMPLATES):
        path = root / f"events-{t}.jsonl"
        with path.open("w") as fh:
            for seq in range(EVENTS_PER_ATTEMPT):
                kind = ["message", "command", "tool_output", "tool_call"][seq % 4]
                text = " ".join(rng.choice(words) for _ in range(rng.randint(10, 40)))
                fh.write(json.dumps({"seq": seq, "kind": kind, "time": seq * 1.5, "source": "claude.stream.jsonl", "line": seq + 1,
                                     "text": text, "data": {"role": "assistant"} if kind == "message" else {}}) + "\n")
        out.append(path)
    return out


def synthesise(run_dir: Path, attempts: int) -> float:
    """Write run.json, the datasets, the rows (through ResultStore.add) and the attempt folders."""
    from statebox.agents.baselines import format_target
    from statebox.harness.plan import DatasetSpec, RunConfig, load_datasets, plan_attempts
    from statebox.harness.store import ResultRow, ResultStore
    from statebox.scoring import score_query

    started = time.perf_counter()
    datasets = write_datasets(run_dir / "data", attempts)
    config = RunConfig(run_id="perf", agents=AGENTS, datasets=[DatasetSpec(**d) for d in datasets], epochs=EPOCHS)
    run_dir.mkdir(parents=True, exist_ok=True)
    config.save(run_dir)
    templates = event_templates(run_dir / "data")
    loaded = load_datasets(config)
    store = ResultStore(run_dir)
    rng = random.Random(2)
    for n, p in enumerate(plan_attempts(config, loaded)):
        target = p.query.target if p.query.target is not None else p.item.target
        right = rng.random() < ACCURACY[p.attempt.agent]
        if right:
            response = format_target(p.item, target)
        elif p.item.answer_type == "mcq":
            response = rng.choice("ABC")
        else:
            response = str(int(float(target)) + rng.choice((-1, 1, 2)))
        roll = rng.random()
        verdict, action, findings = "clean", "none", []
        if roll < 0.03:
            verdict, action = "contaminated", "void"
            findings = [{"category": "honeytoken", "severity": "high", "event": 7, "quote": "cat /opt/annotations/labels.json"}]
        elif roll < 0.08:
            verdict, action = "suspicious", "flag"
            findings = [{"category": rng.choice(["network", "filename", "metadata"]), "severity": "medium", "event": 3,
                         "quote": "curl https://example.com/answers"}]
        metrics = score_query(p.dataset.bench, p.item, p.query.index, response).metrics
        status = "ok" if rng.random() > 0.01 else "timeout"
        tokens = 0 if p.attempt.agent.startswith(("chance", "oracle")) else rng.randint(20_000, 90_000)
        store.add(ResultRow(
            attempt_id=p.attempt.attempt_id, run_id="perf", agent=p.attempt.agent, dataset=p.dataset.label,
            bench=p.dataset.bench, item_id=p.item.id, query_index=p.query.index, epoch=p.attempt.epoch, status=status,
            response=response, verdict=verdict, action=action, findings=findings,
            metrics={k: (float(v) if v is not None else None) for k, v in dict(metrics).items()},
            duration_s=rng.uniform(20, 200), input_tokens=tokens, output_tokens=tokens // 20,
            cost_usd=tokens * 3e-6, finished_at=time.time(),
        ))
        folder = run_dir / "attempts" / p.attempt.attempt_id
        folder.mkdir(parents=True)
        os.link(templates[n % TEMPLATES], folder / "events.jsonl")
    store.close()
    return time.perf_counter() - started


CHILD = {
    "floor": """
import json, sqlite3, sys, time
t = time.perf_counter()
conn = sqlite3.connect(sys.argv[1] + '/results.sqlite')
cur = conn.execute('SELECT * FROM results')
names = [d[0] for d in cur.description]
fi, mi = names.index('findings'), names.index('metrics')
n = 0
for row in cur:
    json.loads(row[fi]); json.loads(row[mi]); n += 1
print(json.dumps({'seconds': time.perf_counter() - t, 'rows': n}))
""",
    "store": """
import json, sys, time
t = time.perf_counter()
from statebox.harness.store import open_existing
rows = open_existing(sys.argv[1]).rows()
print(json.dumps({'seconds': time.perf_counter() - t, 'rows': len(rows)}))
""",
    "score": """
import json, sys, time
t = time.perf_counter()
from statebox.report.aggregate import score_run
from statebox.harness.plan import RunConfig, load_datasets
from statebox.harness.store import open_existing
items = {d.spec.label: d.items for d in load_datasets(RunConfig.load(sys.argv[1]))}
scores = score_run(open_existing(sys.argv[1]).rows(), items)
print(json.dumps({'seconds': time.perf_counter() - t, 'rows': sum(s.extra['rows'] for s in scores)}))
""",
    "report": """
import json, sys, time
t = time.perf_counter()
from statebox.report.page import write_report_output
r = write_report_output(sys.argv[1])
print(json.dumps({'seconds': time.perf_counter() - t, 'rows': r.n_rows, 'bytes': r.bytes, 'single': r.single_file,
                  'files': r.files_count, 'files_bytes': r.files_bytes, 'written': r.transcripts_written,
                  'reused': r.transcripts_reused, 'transcript_s': r.transcript_seconds}))
""",
}

# The child's own peak resident memory, printed last. Not `wait4`'s ru_maxrss: Linux starts a process that execs
# at the peak of the process it replaces, so a child of this script (which may hold a large generated run)
# would report at least this script's peak.
PEAK = """
from pathlib import Path as _Path
print(json.dumps({'vm_hwm_kb': int(_Path('/proc/self/status').read_text().split('VmHWM:')[1].split()[0])}))
"""


def measure(kind: str, run_dir: Path) -> dict:
    """Run one measurement in a fresh process; returns its figures plus its peak RSS."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD[kind] + PEAK, str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    started = time.perf_counter()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    out = proc.stdout.read().decode()  # type: ignore[union-attr]
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed: {err[-2000:]}")
    lines = out.strip().splitlines()
    result = json.loads(lines[-2])
    result["peak_mb"] = json.loads(lines[-1])["vm_hwm_kb"] / 1024
    result["cpu"] = usage.ru_utime + usage.ru_stime  # steadier than wall time on a shared machine
    result["wall"] = wall
    return result


def _clear_report(run_dir: Path) -> None:
    for old in (run_dir / "report.html", run_dir / "report_files"):  # a fresh report, as after a run
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()


def main(argv: list[str]) -> None:
    keep = None
    if "--keep" in argv:
        keep = Path(argv[argv.index("--keep") + 1])
        argv = [a for a in argv if a not in ("--keep", str(keep))]
    sizes = [int(a.replace("k", "000")) for a in argv] or [1_000, 10_000, 100_000]
    base = keep or Path(tempfile.mkdtemp(prefix="statebox-report-scale-"))
    print(f"{'attempts':>9} | {'floor cpu':>9} {'wall':>5} {'MB':>4} | {'rows-only cpu':>13} {'wall':>5} {'MB':>4} "
          f"{'x floor cpu':>11} {'wall':>5} | {'report cpu':>10} {'wall':>5} {'MB':>4} {'x floor cpu':>11} {'wall':>5} "
          f"{'transcripts s':>13} | {'again cpu':>9} {'wall':>5} {'x floor cpu':>11} {'wall':>5} | "
          f"{'store cpu':>9} {'score_run cpu':>13} | {'html':>7} {'chunks':>15}")
    try:
        for size in sizes:
            run_dir = base / f"run-{size}"
            if run_dir.exists() and (run_dir / "results.sqlite").exists():
                pass
            else:
                shutil.rmtree(run_dir, ignore_errors=True)
                made = synthesise(run_dir, size)
                print(f"{'':>9}   (synthesised {size:,} attempts in {made:.1f} s)", flush=True)
            _clear_report(run_dir)
            rows_only = base / f"rows-{size}"  # the same rows and run.json, no attempt folders
            shutil.rmtree(rows_only, ignore_errors=True)
            rows_only.mkdir()
            shutil.copy(run_dir / "results.sqlite", rows_only / "results.sqlite")
            shutil.copy(run_dir / "run.json", rows_only / "run.json")
            floor = measure("floor", run_dir)
            store = measure("store", run_dir)
            score = measure("score", run_dir)
            bare = measure("report", rows_only)
            report = measure("report", run_dir)  # first report after the run: every transcript read and written
            again = measure("report", run_dir)  # the next report of the unchanged run: transcript chunks linked
            assert again["reused"] == report["written"], (again, report)

            def ratio(m: dict, key: str) -> float:
                return m[key] / floor[key]

            chunks = "inline" if report["single"] else f"{report['files']} / {report['files_bytes'] / 1e6:.0f} MB"
            print(f"{floor['rows']:>9,} | {floor['cpu']:>9.2f} {floor['wall']:>5.2f} {floor['peak_mb']:>4.0f} | "
                  f"{bare['cpu']:>13.2f} {bare['wall']:>5.2f} {bare['peak_mb']:>4.0f} {ratio(bare, 'cpu'):>10.1f}x "
                  f"{ratio(bare, 'wall'):>4.1f}x | {report['cpu']:>10.2f} {report['wall']:>5.2f} {report['peak_mb']:>4.0f} "
                  f"{ratio(report, 'cpu'):>10.1f}x {ratio(report, 'wall'):>4.1f}x {report['transcript_s']:>13.2f} | "
                  f"{again['cpu']:>9.2f} {again['wall']:>5.2f} {ratio(again, 'cpu'):>10.1f}x {ratio(again, 'wall'):>4.1f}x | "
                  f"{store['cpu']:>9.2f} {score['cpu']:>13.2f} | {report['bytes'] / 1e6:>5.2f}MB {chunks:>15}", flush=True)
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print("""
Timed (each in a fresh process, imports included; cpu = user+sys seconds of that process, steadier than wall
on a shared machine; MB = its peak RSS; ratios are against the floor of the same size, measured in the same run):
  floor      = SELECT * of the results table + its two JSON columns decoded (no statebox code; no transcripts)
  rows-only  = `statebox report`'s writer on the same rows and run.json with no attempt folders: scores (all,
               clean-only, voided views, CIs, chance baselines), plots, the attempt index and per-attempt details,
               the page. This is the report's cost over the same rows as the floor: TARGET at 100k <= 5x floor.
  report     = the first report after the run, as users get it: rows-only plus every attempt's events.jsonl read
               and copied into transcript chunks (`transcripts s`: wall seconds of that part, inside the report)
  again      = the next report of the unchanged run: transcript chunks linked from the last report's folder
  store      = ResultStore.rows() (pydantic rows); score_run = scoring the way `statebox run --json` does""")


if __name__ == "__main__":
    main(sys.argv[1:])
