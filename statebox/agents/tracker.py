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
`stride` (process every n-th frame), `batch`, `imgsz`, `conf`, `device` (auto|cpu|cuda),
`group` (up to N concurrent attempts share one container: `run_group`; default 1; on a Ray
cluster N attempts are one task, `harness/cluster_worker.run_group`) and `group_wait_s` (how
long the first attempt of a group waits for others; default 2), `containers` (with `group`: at
most this many group containers at once, 0 = no limit; a group waiting for its turn keeps taking
members, and starts after the earlier ones filed their detections), `cache` (1: reuse the run's
detections of identical frames, statebox/tracker/detection_cache.py; 0: detect every frame).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from statebox.attempt import AgentOptions, AttemptContext
from statebox.attempt_folder import (EVENTS_FILE, STDERR_LOG, STDOUT_LOG, TRACKER_ANSWER, TRACKER_NETWORK, TRACKER_OUT_DIR,
                                     TRACKER_RUN_FILE, TRACKER_TRACKS, tracker_out)
from statebox.capped_log import CAP_REACHED, CappedFile, clamp_tree, read_tail
from statebox.errors import UserError
from statebox.json_text import json_value
from statebox.recorder import SessionRecorder
from statebox.sandbox.spec import ContainerSpec, Mount
from statebox.sandbox.cleanup import remove_tree
from statebox.sandbox.workspace import limited_folder
from statebox.schema import EventKind, Session, resolve_video
from statebox.tracker import container as tc
from statebox.tracker.detection_cache import ROWS_FILE, VideoCache, run_folder_of, settings_key


# the runtime's decoders (sbtracker.decoders.DECODERS; the runtime is not importable on the host:
# tests/tracker/test_tracking.py checks the two lists agree)
DECODERS = ("auto", "thread", "process", "torchcodec")
TRACKER_OUT_MB = 256  # tracks.jsonl of a long video, answer.json, run.json, network.jsonl
# Frames in one forward pass of a group container: streams x batch frames go through the network at
# once, and the activations of that many frames (not the model) are what fills the policy's 2 GiB: a
# group of 11 streams at batch 8 peaked at 1.3 GiB on the CPU, so a larger group gets a smaller batch.
GROUP_FRAMES_PER_PASS = 64


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
        # `decoder=thread|process|torchcodec|auto` (the runtime's --decoder; auto = thread on the CPU)
        self.decoder = str(extra.get("decoder", "auto"))
        if self.decoder not in DECODERS:
            raise UserError(f"tracker option decoder={self.decoder!r}: expected one of {', '.join(DECODERS)}")
        self.weights = tc.resolve_weights(options.weights)
        # `group=N`: concurrent attempts (the runner's -c) share one container, up to N at a time
        self.group = max(1, int(extra.get("group", 1)))
        self.group_wait_s = float(extra.get("group_wait_s", 2.0))
        self.containers = max(0, int(extra.get("containers", 0)))
        self._batcher = (_Batcher(self.run_group, self.group, self.group_wait_s, self.containers)
                         if self.group > 1 else None)
        # `cache=0`: every attempt detects every frame itself (the cache changes no answer; this is for measuring)
        self.cache = str(extra.get("cache", "1")).lower() not in ("0", "false", "no", "off")

    def command(self, weights_in_container: str, streams_file: str | None = None, det_cache: bool = False,
                batch: int | None = None) -> list[str]:
        where = (["--streams", streams_file] if streams_file else
                 ["--question-file", f"{tc.INPUT_MOUNT}/question.json", "--out", tc.OUT_MOUNT]
                 + (["--det-cache", f"{tc.INPUT_MOUNT}/{ROWS_FILE}"] if det_cache else []))
        return [tc.PYTHON, "-m", "sbtracker.cli", "track", *where, "--weights", weights_in_container,
                "--imgsz", str(self.imgsz), "--conf", str(self.conf), "--stride", str(self.stride),
                "--batch", str(batch or self.batch), "--device", self.device, "--decoder", self.decoder]

    def run(self, ctx: AttemptContext) -> Session:
        if self._batcher is not None:
            return self._batcher.submit(ctx)
        return self.run_single(ctx)

    def expect_group(self, attempt_ids: list[str]) -> None:
        """These attempts (a cluster task's group) are about to `run` at once from their own threads:
        they share one container whatever the order and timing of their arrival (`_Batcher.expect`)."""
        if self._batcher is not None:
            self._batcher.expect(attempt_ids)

    def left_group(self, attempt_id: str) -> None:
        """An expected attempt is done (or failed before its agent ran): stop waiting for it."""
        if self._batcher is not None:
            self._batcher.left(attempt_id)

    def run_single(self, ctx: AttemptContext) -> Session:
        """One attempt, one container (`track --question-file ... --out /out`)."""
        with SessionRecorder(ctx.attempt_dir, time.time(), limits=ctx.policy.recording) as rec:
            return self._run_alone(ctx, rec)

    def _run_alone(self, ctx: AttemptContext, rec: SessionRecorder, *, first_line: int = 0,
                   instruction: bool = True, meta_extra: dict | None = None) -> Session:
        """`run_single`'s container, recorded in `rec`. A member of a group whose container failed
        runs again here, in its own recorder: `first_line` is how many lines its stdout.log has
        already (the new lines are appended, so event line numbers go on counting)."""
        assert ctx.engine is not None and ctx.workspace is not None, "the tracker runs in a sandbox"
        input_dir, out_dir, scratch, cache = self._prepare(ctx)
        weights_target = f"{tc.MODELS_MOUNT}/{self.weights.name}"
        command = self.command(weights_target, det_cache=cache is not None)
        self._record_launch(ctx, rec, command, instruction=instruction)
        state = _StreamState(line_no=first_line)
        on_event = self._event_handler(rec, state)

        def on_line(line: str) -> None:
            state.line_no += 1
            event = tc.parse_event_line(line)
            if event is not None:
                on_event(event, state.line_no)

        spec = ContainerSpec(
            image=ctx.engine.ensure_image(tc.IMAGE_TARGET),
            command=command,
            workspace=Path(ctx.workspace.path),
            policy=ctx.policy,
            env=dict(tc.OFFLINE_ENV),
            mounts=[Mount(source=self.weights, target=weights_target, read_only=True),
                    Mount(source=input_dir, target=tc.INPUT_MOUNT, read_only=True),
                    Mount(source=scratch.path, target=tc.OUT_MOUNT, read_only=False)],
            gpu=True,  # a device request only when the engine offers GPUs (runtime or CDI) and policy allows
            time_limit_s=None,  # the policy's
            run_id=ctx.attempt.run_id,
            attempt_id=ctx.attempt.attempt_id,
        )
        try:
            result = ctx.engine.run(spec, ctx.attempt_dir / STDOUT_LOG, ctx.attempt_dir / STDERR_LOG,
                                    on_stdout_line=on_line)
        finally:
            scratch.copy_out(out_dir)
            scratch.cleanup()
        meta = {**self._meta(), **(meta_extra or {})}
        return self._finish(ctx, rec, result, out_dir, out_dir, state, meta, cache)

    def run_group(self, ctxs: list[AttemptContext]) -> list[Session]:
        """Several attempts in ONE tracker container: one model load, frames of every attempt's video
        batched into shared forward passes (`sbtracker.cli track --streams`), one ByteTrack state each.

        Isolation per attempt is kept: attempt i's workspace is its own read-only mount
        (`/streams/i/workspace`), its question its own (`/streams/i/input`), its output its
        own size-limited folder (`/streams/i/out`), copied into its own attempt folder; its
        events, stdout.log (the lines of its stream plus the untagged ones: model load,
        progress, network attempts, which every member records) and session are its own.
        The container gets the group's summed time limit. A container that fails (an exit
        code, a timeout: the runtime has one process for all streams, so one bad stream
        ends them all) costs a member that has no answer of its own a second run ALONE, in
        its own container, recorded in the same session after a harness note
        (`meta.group.rerun_alone`): one failing attempt costs only itself. Tracks equal a
        single-attempt run's up to float rounding (a frame batched with other streams' frames may
        round its last bit differently on CPU: boxes within 0.5 px, same ids and classes; tested).
        """
        if not ctxs:
            return []
        if len(ctxs) == 1:
            return [self.run_single(ctxs[0])]
        first = ctxs[0]
        assert first.engine is not None and all(c.workspace is not None for c in ctxs), "the tracker runs in a sandbox"
        started = time.time()
        weights_target = f"{tc.MODELS_MOUNT}/{self.weights.name}"
        group_in = Path(tempfile.mkdtemp(prefix="statebox-tracker-group-"))
        group_in.chmod(0o755)  # read-only mount; the runtime (uid 1000) reads streams.json
        mounts = [Mount(source=self.weights, target=weights_target, read_only=True),
                  Mount(source=group_in, target=tc.INPUT_MOUNT, read_only=True)]
        entries, members = [], []
        batch = self.group_batch(len(ctxs))
        command = self.command(weights_target, streams_file=f"{tc.INPUT_MOUNT}/streams.json", batch=batch)
        try:
            with ExitStack() as stack:
                for i, ctx in enumerate(ctxs):
                    workspace = ctx.workspace
                    assert workspace is not None
                    input_dir, out_dir, scratch, cache = self._prepare(ctx)
                    stack.callback(scratch.cleanup)
                    root = f"/streams/{i}"
                    mounts += [Mount(source=Path(workspace.path), target=f"{root}/workspace", read_only=True),
                               Mount(source=input_dir, target=f"{root}/input", read_only=True),
                               Mount(source=scratch.path, target=f"{root}/out", read_only=False)]
                    entry = {"video": f"{root}/workspace/{workspace.video_name}",
                             "question_file": f"{root}/input/question.json", "out": f"{root}/out"}
                    if cache is not None:
                        entry["det_cache"] = f"{root}/input/{ROWS_FILE}"
                    entries.append(entry)
                    rec = stack.enter_context(SessionRecorder(ctx.attempt_dir, started, limits=ctx.policy.recording))
                    self._record_launch(ctx, rec, command, group={"size": len(ctxs), "index": i})
                    log = CappedFile(ctx.attempt_dir / STDOUT_LOG, ctx.policy.recording.raw_log_bytes)
                    stack.callback(log.close)
                    state = _StreamState()
                    members.append((ctx, rec, state, self._event_handler(rec, state), log, out_dir, scratch, cache))
                (group_in / "streams.json").write_text(json.dumps(entries))

                def on_line(line: str) -> None:
                    event = tc.parse_event_line(line)
                    stream = event.get("stream") if event else None
                    for i, (_, _, state, on_event, log, *_rest) in enumerate(members):
                        if isinstance(stream, int) and stream != i:
                            continue
                        if log.write((line.rstrip("\n") + "\n").encode()):
                            state.line_no += 1
                        if event is not None:
                            on_event(event, state.line_no)

                env = dict(tc.OFFLINE_ENV, STATEBOX_NETLOG="/streams/0/out/network.jsonl")
                limit = sum(c.policy.limits.time_limit_s for c in ctxs)
                spec = ContainerSpec(image=first.engine.ensure_image(tc.IMAGE_TARGET), command=command,
                                     workspace=None, policy=first.policy, env=env, mounts=mounts, gpu=True,
                                     time_limit_s=limit, run_id=first.attempt.run_id,
                                     attempt_id=first.attempt.attempt_id)
                try:
                    result = first.engine.run(spec, group_in / STDOUT_LOG, group_in / STDERR_LOG,
                                              on_stdout_line=on_line)
                finally:
                    for ctx, *_m, out_dir, scratch, _c in members:
                        scratch.copy_out(out_dir)
                stderr = (group_in / STDERR_LOG).read_bytes() if (group_in / STDERR_LOG).exists() else b""
                netlog_dir = members[0][5]
                failed = result.status != "ok" or result.exit_code not in (0, None)
                sessions = []
                for i, (ctx, rec, state, _h, log, out_dir, _s, cache) in enumerate(members):
                    err = CappedFile(ctx.attempt_dir / STDERR_LOG, ctx.policy.recording.raw_log_bytes)
                    err.write(stderr[-ctx.policy.recording.raw_log_bytes // 2:])
                    err.close()
                    group = {"size": len(ctxs), "index": i}
                    if failed and not state.answer and not (out_dir / TRACKER_ANSWER).is_file():
                        sessions.append(self._rerun_alone(ctx, rec, state, log, out_dir, result, group))
                        continue
                    meta = {**self._meta(), "batch": batch}
                    meta["group"] = group
                    sessions.append(self._finish(ctx, rec, result, out_dir, netlog_dir, state, meta, cache))
                return sessions
        finally:
            remove_tree(group_in)

    def _rerun_alone(self, ctx: AttemptContext, rec: SessionRecorder, state: "_StreamState", log: CappedFile,
                     out_dir: Path, result, group: dict) -> Session:
        """A member of a failed group container with no answer of its own runs again in its own
        container (the group's lines stay first in its stdout.log and events)."""
        why = result.reason or (f"exit code {result.exit_code}" if result.exit_code not in (0, None) else result.status)
        rec.add(EventKind.message, f"statebox: the group's container ({group['size']} attempts) ended ({why}) before this "
                "attempt's answer; it runs again alone, in its own container",
                data={"role": "harness", "group": group, "group_status": result.status, "group_exit_code": result.exit_code})
        log.close()
        remove_tree(out_dir)  # the group's partial output: the new run writes its own
        return self._run_alone(ctx, rec, first_line=state.line_no, instruction=False,
                               meta_extra={"group": {**group, "rerun_alone": True}})

    # ------------------------------------------------------------------ shared by run and run_group

    def group_batch(self, streams: int) -> int:
        """Frames per stream per step in a group container: at most GROUP_FRAMES_PER_PASS frames a pass
        (the batch changes no track: tests/tracker/test_tracking.py, batches 1, 5 and 8)."""
        return max(1, min(self.batch, GROUP_FRAMES_PER_PASS // max(1, streams)))

    def _meta(self) -> dict:
        return {"weights": self.weights.name, "stride": self.stride, "batch": self.batch, "imgsz": self.imgsz}

    def _prepare(self, ctx: AttemptContext):
        """The attempt's input folder (question.json, and detections.jsonl when the run's cache applies),
        its output folder, the limited scratch /out and the video's cache (or None)."""
        input_dir = ctx.attempt_dir / "tracker-input"
        out_dir = ctx.attempt_dir / TRACKER_OUT_DIR
        input_dir.mkdir(parents=True, exist_ok=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        # the container writes /out into a kernel-limited tmpfs; regular files are copied here afterwards
        scratch = limited_folder(TRACKER_OUT_MB, inodes=1000)
        question = {"question": ctx.item.question, "choices": list(ctx.item.choices)}
        (input_dir / "question.json").write_text(json.dumps(question))
        cache = self._video_cache(ctx)
        if cache is not None:
            assert ctx.workspace is not None
            cache.hand_over(input_dir / ROWS_FILE, until=ctx.workspace.query_time)
        return input_dir, out_dir, scratch, cache

    def _video_cache(self, ctx: AttemptContext) -> VideoCache | None:
        """This attempt's video's detections in the run folder, or None (no run folder, no source video,
        `cache=0`). The key is the SOURCE video's content: every cut of it shares the rows of its frames."""
        run_dir = run_folder_of(ctx.attempt_dir)
        if not self.cache or run_dir is None or ctx.engine is None or ctx.workspace is None:
            return None
        try:
            video = resolve_video(ctx.item, ctx.videos_dir)
            if not video.is_file():
                return None
            settings = settings_key(self.weights, imgsz=self.imgsz, conf=self.conf, device=self.device,
                                    image=ctx.engine.ensure_image(tc.IMAGE_TARGET))
            return VideoCache(run_dir, settings, video)
        except OSError:
            return None  # an unreadable source video: this attempt detects every frame itself

    @staticmethod
    def _record_launch(ctx: AttemptContext, rec: SessionRecorder, command: list[str], group: dict | None = None,
                       instruction: bool = True) -> None:
        if instruction:
            rec.add(EventKind.message, ctx.instruction, data={"role": "user"})
        # statebox chose this command and its mounts (/input, /models, /out), not an agent:
        # it is recorded as a harness message, so the auditor judges only what ran inside
        # (the runtime's own network guard events below are still audited)
        data = {"role": "harness", "env": {k: v for k, v in tc.OFFLINE_ENV.items() if k.startswith("YOLO_")}}
        if group:
            data["group"] = group
        rec.add(EventKind.message, "statebox launched: " + " ".join(command), source="tracker", data=data)

    @staticmethod
    def _event_handler(rec: SessionRecorder, state: "_StreamState"):
        def on_event(event: dict, line_no: int) -> None:
            kind = event.get("event")
            if kind == "network_attempt":
                rec.add(EventKind.network_attempt, f"{event.get('kind')} {event.get('target')}",
                        source=STDOUT_LOG, line=line_no, data=event)
            elif kind == "frames":
                rec.add_frames(decoded=[float(t) for t in event.get("decoded", [])])
            elif kind == "answer":
                state.answer = event
                rec.add(EventKind.tool_output, f"program {event.get('program')}: {event.get('explanation', '')}",
                        source=STDOUT_LOG, line=line_no, data=event)
            elif kind == "detection_cache":
                state.cache = {k: event.get(k) for k in ("hits", "misses")}
                rec.add(EventKind.tool_output, json.dumps(event), source=STDOUT_LOG, line=line_no, data=event)
            elif kind == "error":
                rec.add(EventKind.error, str(event.get("message", "")), source=STDOUT_LOG, line=line_no, data=event)
            else:
                rec.add(EventKind.tool_output, json.dumps(event), source=STDOUT_LOG, line=line_no, data=event)
        return on_event

    def _finish(self, ctx: AttemptContext, rec: SessionRecorder, result, out_dir: Path, netlog_dir: Path,
                state: "_StreamState", meta: dict, cache: VideoCache | None = None) -> Session:
        answer = state.answer
        stderr_path = ctx.attempt_dir / STDERR_LOG
        meta["gpu"] = result.gpu
        rec.note_capped_logs([STDOUT_LOG, STDERR_LOG])
        # /out was written by the container straight into the attempt folder: held to the same caps
        # (links and special files removed, never followed) before anything here reads it
        lim = ctx.policy.recording
        for name in clamp_tree(out_dir, lim.raw_log_bytes, 4 * lim.raw_log_bytes):
            rec.add(EventKind.message, f"statebox: {tracker_out(name)} was over its cap or not a regular file; cut",
                    source=tracker_out(name),
                    data={"role": "harness", "statebox": CAP_REACHED, "file": tracker_out(name),
                          "cap_bytes": lim.raw_log_bytes})
        for attempt in tc.read_network_log(netlog_dir):  # from processes whose stdout was not ours
            if not any(e.kind == EventKind.network_attempt and e.data.get("time") == attempt.get("time")
                       for e in rec.events):
                rec.add(EventKind.network_attempt, f"{attempt.get('kind')} {attempt.get('target')}",
                        source=tracker_out(TRACKER_NETWORK), data=attempt)
        answer_file = out_dir / TRACKER_ANSWER
        if not answer and answer_file.exists():
            try:
                answer = json_value(answer_file.read_text())
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
            rec.add(EventKind.error, "\n".join(tail), source=STDERR_LOG)
        meta.update({k: answer.get(k) for k in ("program", "explanation") if k in answer})
        if state.cache:
            meta["detection_cache"] = state.cache
        if cache is not None and status in ("ok", "abstain") and result.exit_code in (0, None):
            cache.keep(out_dir / ROWS_FILE, ctx.attempt.attempt_id)  # checked rows only (detection_cache.py)
        run_file = out_dir / TRACKER_RUN_FILE
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
            raw_logs=[EVENTS_FILE, STDOUT_LOG, STDERR_LOG, tracker_out(TRACKER_TRACKS)],
            meta=meta,
        )


@dataclass
class _StreamState:
    """What one attempt's event handler collects while its container runs."""

    line_no: int = 0
    answer: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)  # the runtime's detection_cache event: hits, misses


class _Batcher:
    """Turns concurrent `run(ctx)` calls into `run_group` calls of up to `size` attempts.

    The harness runs attempts on a thread pool (`-c N`); with `group=N` the first caller
    waits up to `wait_s` for others (or until `size` have arrived), runs them all in one
    container and hands each caller its own session. Attempts only share a container with
    attempts of the same sandbox provider and policy (the key is the run's provider under
    each attempt's `AttemptSandboxes`, which is new per attempt). Nothing changes in the
    runner: each attempt is still planned, prepared, audited, scored and stored on its own.

    `expect(ids)` names attempts known to run together (a Ray task's group on a cluster
    node, `harness/cluster_worker.py`): the first of them to arrive waits for all the
    others instead of `wait_s`, until each has arrived or been declared gone (`left(id)`:
    it failed before its agent ran), so the group is one container however long their
    workspaces took to prepare. A retry after an infrastructure failure is not expected
    again: it groups with whatever arrives within `wait_s`.

    `containers=N` (> 0): at most N groups run at once. A group whose wait is over but whose
    turn has not come stays open (more attempts join it, up to `size`), so on a small machine
    the attempts queue into full groups, and a group starts after the earlier ones have filed
    their rows in the run's detection cache (the queries of a video split over two groups
    then detect its frames once).
    """

    EXPECT_TIMEOUT_S = 1800.0  # a safety net only: every expected attempt arrives or is declared gone

    def __init__(self, run_group, size: int, wait_s: float, containers: int = 0) -> None:
        self._run_group = run_group
        self.size = size
        self.wait_s = wait_s
        self.containers = containers
        self._running = 0  # groups whose container is running (counted only with `containers`)
        self._cond = threading.Condition()
        self._open: dict[tuple, _Group] = {}  # the group still taking members, per (provider, policy)
        self._expected: set[str] = set()  # attempt ids named by expect() that have not arrived or left

    def expect(self, attempt_ids: list[str]) -> None:
        with self._cond:
            self._expected |= set(attempt_ids)

    def left(self, attempt_id: str) -> None:
        with self._cond:
            self._expected.discard(attempt_id)
            self._cond.notify_all()

    def submit(self, ctx: AttemptContext) -> Session:
        provider = getattr(ctx.engine, "provider", ctx.engine)  # AttemptSandboxes wraps the run's provider
        key = (id(provider), ctx.policy.model_dump_json())
        future: Future = Future()
        with self._cond:
            found = self._open.get(key)
            leader = found is None
            group = found if found is not None else _Group(expected=ctx.attempt.attempt_id in self._expected)
            if leader:
                self._open[key] = group
            self._expected.discard(ctx.attempt.attempt_id)
            group.members.append((ctx, future))
            if len(group.members) >= self.size:
                del self._open[key]  # closed: the next caller starts a new group
            self._cond.notify_all()
        if leader:
            with self._cond:
                deadline = time.monotonic() + (self.EXPECT_TIMEOUT_S if group.expected else self.wait_s)
                while self._open.get(key) is group:
                    left = deadline - time.monotonic()
                    if left <= 0 or (group.expected and not self._expected):
                        break
                    self._cond.wait(left)
                while self.containers and self._running >= self.containers:
                    self._cond.wait()  # not our turn yet: the group stays open, up to `size`
                if self._open.get(key) is group:
                    del self._open[key]
                batch = list(group.members)
                self._running += 1
            try:
                sessions = self._run_group([c for c, _ in batch])
                for (_, fut), session in zip(batch, sessions):
                    fut.set_result(session)
            except BaseException as exc:  # noqa: BLE001 - every member of the group gets the failure
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()
        return future.result()


@dataclass
class _Group:
    members: list = field(default_factory=list)
    expected: bool = False  # its leader was named by expect(): it waits for every expected attempt
