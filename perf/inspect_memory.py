"""Memory and CPU of auditing one large Inspect `.eval` log, against inspect_ai's own reader in the same run.

A real evaluation's Inspect log holds thousands of samples; inspect_ai's `read_eval_log` builds every one before it
returns, and `statebox audit` used to read the log that way (127 MB of samples held ~600 MB, so a 2 GB log, what
admission lets in, wanted ~10 GB). It now reads an `.eval` a sample at a time through the same public reader
(`inspect_logs.opened_inspect_log`). The peer is inspect_ai's whole-log read alone (what any tool that loads the log with
it holds, before judging anything); statebox's figure is the whole audit (reading, normalising, judging every sample).

Each contender runs in a fresh process forked from this one after the imports, so its peak resident memory (VmHWM)
is its own and the imports are left out of both. Target: the audit's peak growth at most 0.25x the whole read's
(`ratio_memory`), i.e. memory that follows the largest sample, not the log. CPU is reported beside it, no target.
The same for `--write-scores OUT.eval` (`ratio_memory_write_scores`): the audit, then the copy with a score per
sample, which used to read the log whole and is now streamed too (audits/inspect_scores.py).

Usage: python perf/inspect_memory.py [--samples 3000] [--turns 30] [--keep DIR]
The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, read_eval_log, write_eval_log  # noqa: E402
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser  # noqa: E402
from inspect_ai.tool import ToolCall  # noqa: E402

from statebox.audits import external  # noqa: E402,F401 - imported here so neither child counts it
from statebox.cli import app  # noqa: E402
from statebox.commands import audit as audit_command  # noqa: E402,F401 - the same

TARGET_RATIO = 0.25
COMMANDS = ["ls -la", "python3 count.py --stride 2", "ffprobe -v error -show_streams v.mp4 | head -20", "cat /tmp/frames/stats.json"]
PROMPT = "How many blocks are on the table at the end? Do not use the network (no curl, wget); do not read annotations."


def make_log(path: Path, samples: int, turns: int) -> None:
    rng = random.Random(0)
    out = []
    for i in range(samples):
        messages = [ChatMessageSystem(content="You are a coding agent. " + PROMPT), ChatMessageUser(content=PROMPT)]
        for t in range(turns):
            command = "find / -name '*annotation*' 2>/dev/null" if i % 10 == 0 and t == turns // 2 else rng.choice(COMMANDS)
            messages.append(ChatMessageAssistant(content="Let me look.", tool_calls=[
                ToolCall(id=f"c{t}", function="bash", arguments={"cmd": command})]))
            messages.append(ChatMessageTool(content="\n".join(
                f"t={rng.uniform(0, 20):.2f}s blobs={rng.randint(1, 9)} area={rng.randint(100, 5000)}" for _ in range(40)),
                tool_call_id=f"c{t}", function="bash"))
        messages.append(ChatMessageAssistant(content="ANSWER: 4"))
        out.append(EvalSample(id=f"s{i}", epoch=1, input=PROMPT, target="4", messages=messages,
                              metadata={"original_name": f"blocks_{i}.mp4", "item_id": f"q{i}"}))
    log = EvalLog(eval=EvalSpec(created="2026-12-01T00:00:00+00:00", task="t", dataset=EvalDataset(),
                                model="anthropic/claude", config=EvalConfig()), samples=out, status="success")
    write_eval_log(log, str(path))


def _peak_kb() -> int:
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0])


def in_child(work) -> dict[str, float]:
    """`work()` in a forked child: its peak resident memory growth (MB) and CPU seconds."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            before, cpu = _peak_kb(), time.process_time()
            work()
            figures = {"peak_mb": (_peak_kb() - before) / 1024, "cpu_s": time.process_time() - cpu}
            os.write(write_fd, json.dumps(figures).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    if not text:
        raise SystemExit("a measured child failed")
    return json.loads(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="keep (or reuse) the log in this folder")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="inspect-memory-"))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"log-{args.samples}x{args.turns}.eval"
    if not log.exists():
        print(f"writing {log} ({args.samples} samples of {args.turns} tool turns) ...", flush=True)
        make_log(log, args.samples, args.turns)
    with zipfile.ZipFile(log) as archive:
        sample_mb = sum(i.file_size for i in archive.infolist() if i.filename.startswith("samples/")) / 1e6
    print(f"log: {log.stat().st_size / 1e6:.1f} MB on disk, {sample_mb:.1f} MB of samples", flush=True)

    def whole() -> None:
        with open(log, "rb") as fh:
            read_eval_log(fh, resolve_attachments=True, format="eval")

    def audit() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                app(["audit", str(log), "--no-write", "--jobs", "1"], standalone_mode=False)
            except SystemExit:
                pass

    scored = folder / "scored.eval"

    def write_scores() -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                app(["audit", str(log), "--no-write", "--jobs", "1", "--write-scores", str(scored)], standalone_mode=False)
            except SystemExit:
                pass

    peer = in_child(whole)
    print(f"inspect_ai read_eval_log (whole log): peak +{peer['peak_mb']:.0f} MB, CPU {peer['cpu_s']:.2f} s", flush=True)
    ours = in_child(audit)
    print(f"statebox audit LOG (every sample judged): peak +{ours['peak_mb']:.0f} MB, CPU {ours['cpu_s']:.2f} s", flush=True)
    copy = in_child(write_scores)
    if not scored.is_file():
        raise SystemExit(f"--write-scores wrote no {scored}")
    print(f"statebox audit LOG --write-scores OUT.eval (judged, then copied with a score per sample): "
          f"peak +{copy['peak_mb']:.0f} MB, CPU {copy['cpu_s']:.2f} s", flush=True)
    ratio = ours["peak_mb"] / peer["peak_mb"] if peer["peak_mb"] > 0 else float("inf")
    ratio_copy = copy["peak_mb"] / peer["peak_mb"] if peer["peak_mb"] > 0 else float("inf")
    met = ratio <= TARGET_RATIO and ratio_copy <= TARGET_RATIO
    print(f"memory ratio: audit {ratio:.3f}, --write-scores {ratio_copy:.3f} (target <= {TARGET_RATIO}): "
          f"{'met' if met else 'NOT met'}")
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"samples": args.samples, "sample_mb": round(sample_mb, 1),
                      "inspect_read_peak_mb": round(peer["peak_mb"], 1), "inspect_read_cpu_s": round(peer["cpu_s"], 3),
                      "audit_peak_mb": round(ours["peak_mb"], 1), "audit_cpu_s": round(ours["cpu_s"], 3),
                      "ratio_memory": round(ratio, 3),
                      "write_scores_peak_mb": round(copy["peak_mb"], 1), "write_scores_cpu_s": round(copy["cpu_s"], 3),
                      "ratio_memory_write_scores": round(ratio_copy, 3), "target_ratio_memory": TARGET_RATIO, "met": met}))


if __name__ == "__main__":
    main()
