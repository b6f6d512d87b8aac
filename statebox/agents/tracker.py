"""The detector/tracker baseline as an agent (`tracker`): YOLO + ByteTrack + a tracking program.

It answers "would a plain tracker do better?" under the same sandbox rules as every
other agent: the tracker image runs with no network, a read-only root and the policy's
limits; it sees only the de-identified workspace video, the question (a read-only
`/input/question.json`, the same text every agent gets) and the weights file (mounted
read-only). Inside, `sbtracker` decodes in its own thread, detects in batches (half
precision on a GPU), tracks with ByteTrack and maps the question to a tracking program
(docs/tracker.md). A question no rule maps ends as status `abstain` with an empty
response: the scorer counts it wrong and reports abstentions separately.

Agent options: `--weights FILE` (default: the shipped suite model), and `extra` keys
`stride` (process every n-th frame), `batch`, `imgsz`, `conf`, `device` (auto|cpu|cuda).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from statebox.attempt import AgentOptions, AttemptContext
from statebox.capped_log import CAP_REACHED, clamp_tree, read_tail
from statebox.recorder import SessionRecorder
from statebox.sandbox.spec import ContainerSpec, Mount
from statebox.sandbox.workspace import limited_folder
from statebox.schema import EventKind, Session
from statebox.tracker import container as tc


TRACKER_OUT_MB = 256  # tracks.jsonl of a long video, answer.json, run.json, network.jsonl


class TrackerAgent:
    name = "tracker"
    needs_sandbox = True
    needs_gateway = False

    def __init__(self, options: AgentOptions) -> None:
        self.options = options
        extra = dict(options.extra or {})
        for key in ("stride", "batch", "imgsz", "conf", "device"):  # also accepted as top-level options
            if getattr(options, key, None) is not None and key not in extra:
                extra[key] = getattr(options, key)
        self.stride = int(extra.get("stride", 1))
        self.batch = int(extra.get("batch", 8))
        self.imgsz = int(extra.get("imgsz", 320))
        self.conf = float(extra.get("conf", 0.1))
        self.device = str(extra.get("device", "auto"))
        self.weights = tc.resolve_weights(options.weights)

    def command(self, weights_in_container: str) -> list[str]:
        return [tc.PYTHON, "-m", "sbtracker.cli", "track",
                "--question-file", f"{tc.INPUT_MOUNT}/question.json",
                "--weights", weights_in_container, "--out", tc.OUT_MOUNT,
                "--imgsz", str(self.imgsz), "--conf", str(self.conf), "--stride", str(self.stride),
                "--batch", str(self.batch), "--device", self.device]

    def run(self, ctx: AttemptContext) -> Session:
        assert ctx.engine is not None and ctx.workspace is not None, "the tracker runs in a sandbox"
        started = time.time()
        input_dir = ctx.attempt_dir / "tracker-input"
        out_dir = ctx.attempt_dir / "tracker-out"
        input_dir.mkdir(parents=True, exist_ok=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        # the container writes /out into a kernel-limited tmpfs; regular files are copied here afterwards
        scratch = limited_folder(TRACKER_OUT_MB, inodes=1000)
        question = {"question": ctx.item.question, "choices": list(ctx.item.choices)}
        (input_dir / "question.json").write_text(json.dumps(question))
        weights_target = f"{tc.MODELS_MOUNT}/{self.weights.name}"
        command = self.command(weights_target)
        meta: dict = {"weights": self.weights.name, "stride": self.stride, "batch": self.batch, "imgsz": self.imgsz}
        with SessionRecorder(ctx.attempt_dir, started, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, ctx.instruction, data={"role": "user"})
            # statebox chose this command and its mounts (/input, /models, /out), not an agent:
            # it is recorded as a harness message, so the auditor judges only what ran inside
            # (the runtime's own network guard events below are still audited)
            rec.add(EventKind.message, "statebox launched: " + " ".join(command), source="tracker",
                    data={"role": "harness", "env": {k: v for k, v in tc.OFFLINE_ENV.items() if k.startswith("YOLO_")}})
            stdout_path = ctx.attempt_dir / "stdout.log"
            stderr_path = ctx.attempt_dir / "stderr.log"
            line_no = 0
            answer: dict = {}

            def on_line(line: str) -> None:
                nonlocal line_no, answer
                line_no += 1
                event = tc.parse_event_line(line)
                if event is None:
                    return
                kind = event.get("event")
                if kind == "network_attempt":
                    rec.add(EventKind.network_attempt, f"{event.get('kind')} {event.get('target')}",
                            source="stdout.log", line=line_no, data=event)
                elif kind == "frames":
                    rec.add_frames(decoded=[float(t) for t in event.get("decoded", [])])
                elif kind == "answer":
                    answer = event
                    rec.add(EventKind.tool_output, f"program {event.get('program')}: {event.get('explanation', '')}",
                            source="stdout.log", line=line_no, data=event)
                elif kind == "error":
                    rec.add(EventKind.error, str(event.get("message", "")), source="stdout.log", line=line_no, data=event)
                else:
                    rec.add(EventKind.tool_output, json.dumps(event), source="stdout.log", line=line_no, data=event)

            spec = ContainerSpec(
                image=ctx.engine.ensure_image(tc.IMAGE_TARGET),
                command=command,
                workspace=Path(ctx.workspace.path),
                policy=ctx.policy,
                env=dict(tc.OFFLINE_ENV),
                mounts=[Mount(source=self.weights, target=weights_target, read_only=True),
                        Mount(source=input_dir, target=tc.INPUT_MOUNT, read_only=True),
                        Mount(source=scratch.path, target=tc.OUT_MOUNT, read_only=False)],
                gpu=True,  # a device request only when the engine has the NVIDIA runtime and policy allows
                run_id=ctx.attempt.run_id,
                attempt_id=ctx.attempt.attempt_id,
            )
            try:
                result = ctx.engine.run(spec, stdout_path, stderr_path, on_stdout_line=on_line)
            finally:
                scratch.copy_out(out_dir)
                scratch.cleanup()
            meta["gpu"] = result.gpu
            rec.note_capped_logs(["stdout.log", "stderr.log"])
            # /out was written by the container straight into the attempt folder: held to the same caps
            # (links and special files removed, never followed) before anything here reads it
            lim = ctx.policy.recording
            for name in clamp_tree(out_dir, lim.raw_log_bytes, 4 * lim.raw_log_bytes):
                rec.add(EventKind.message, f"statebox: tracker-out/{name} was over its cap or not a regular file; cut",
                        source=f"tracker-out/{name}",
                        data={"role": "harness", "statebox": CAP_REACHED, "file": f"tracker-out/{name}",
                              "cap_bytes": lim.raw_log_bytes})
            for attempt in tc.read_network_log(out_dir):  # from processes whose stdout was not ours
                if not any(e.kind == EventKind.network_attempt and e.data.get("time") == attempt.get("time")
                           for e in rec.events):
                    rec.add(EventKind.network_attempt, f"{attempt.get('kind')} {attempt.get('target')}",
                            source="tracker-out/network.jsonl", data=attempt)
            answer_file = out_dir / "answer.json"
            if not answer and answer_file.exists():
                try:
                    answer = json.loads(answer_file.read_text())
                except json.JSONDecodeError:
                    answer = {}
            status, reason, response = result.status, result.reason, ""
            if status == "ok" and result.exit_code not in (0, None):
                status, reason = "error", f"tracker exited with code {result.exit_code}"
            if status == "ok":
                if not answer:
                    status, reason = "error", "the tracker wrote no answer"
                elif answer.get("abstain"):
                    status, reason = "abstain", str(answer.get("explanation") or "no tracking program for this question")
                else:
                    response = str(answer.get("response", ""))
            if status not in ("ok", "abstain") and stderr_path.exists():
                tail = read_tail(stderr_path).strip().splitlines()[-3:]
                rec.add(EventKind.error, "\n".join(tail), source="stderr.log")
            meta.update({k: answer.get(k) for k in ("program", "explanation") if k in answer})
            run_file = out_dir / "run.json"
            if run_file.exists():
                try:
                    meta["run"] = json.loads(run_file.read_text())
                except json.JSONDecodeError:
                    pass
            rec.add(EventKind.final_answer, response, data={"status": status})
            return rec.session(
                ctx.attempt.attempt_id,
                self.name,
                status=status,
                reason=reason,
                response=response,
                raw_logs=["events.jsonl", "stdout.log", "stderr.log", "tracker-out/tracks.jsonl"],
                meta=meta,
            )
