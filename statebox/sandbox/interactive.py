"""`statebox sandbox run`: one command in a fresh sandbox, exactly as an agent would see it.

Without a terminal the command runs through `SandboxEngine.run` (the agents' path: output
streamed, stdin closed). With a terminal on both ends (`-- bash`) it runs through the
docker CLI with the same hardening plus `-it`, so a person can look around inside.
`--print-cli` prints that `docker run` command (`SandboxEngine.cli_args`) instead of running.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from statebox import signals
from statebox.attempt_folder import STDERR_LOG, STDOUT_LOG
from statebox.errors import UserError
from statebox.policies import load_policy
from statebox.sandbox.docker import ContainerSpec, SandboxEngine
from statebox.sandbox.images import ensure_image
from statebox.sandbox.workspace import prepare_workspace
from statebox.schema import Item, Query

STATUS_EXIT = {"timeout": 124, "oom": 137}


def _say(msg: str) -> None:
    print(f"[sandbox] {msg}", file=sys.stderr, flush=True)


def run_command(*, video: Path, question: str, query_time: float | None, policy_name: str, command: list[str],
                reencode: bool = False, keep: bool = False, interactive: bool | None = None,
                print_cli: bool = False) -> int:
    """Run `command` in a fresh sandbox; with `print_cli`, print the equivalent `docker run`
    command instead (from `SandboxEngine.cli_args`, i.e. the one hardening table) and keep the
    workspace it mounts, so the command can be run by hand."""
    policy = load_policy(policy_name)
    if not Path(video).is_file():
        raise UserError(f"{video}: video not found")
    engine = SandboxEngine()
    image = ensure_image("sandbox", progress=_say)
    item = Item(id=f"manual-{secrets.token_hex(4)}", benchmark="vstat", video=str(video), question=question,
                answer_type="text", queries=[Query(time=query_time)])
    workspace = prepare_workspace(item, item.queries[0], video, policy, reencode=reencode)
    tty = sys.stdin.isatty() and sys.stdout.isatty() if interactive is None else interactive
    spec = ContainerSpec(image=image, command=command, workspace=workspace.path, policy=policy, tty=tty,
                         run_id="manual", attempt_id=item.id)
    try:
        if print_cli:
            print(shlex.join(engine.cli_args(spec, by_hand=True)), flush=True)
            keep = True  # the printed command mounts it (a refused spec, e.g. gpu: require without one, keeps nothing)
            return 0
        if tty:
            return _run_tty(engine, spec)
        logs = Path(tempfile.mkdtemp(prefix="statebox-run-"))
        result = engine.run(spec, logs / STDOUT_LOG, logs / STDERR_LOG,
                            on_stdout_line=lambda line: print(line, flush=True),
                            on_stderr_line=lambda line: print(line, file=sys.stderr, flush=True))
        _say(f"status={result.status} exit_code={result.exit_code} duration={result.duration_s:.2f}s"
             + (f" ({result.reason})" if result.reason else "") + f" logs={logs}")
        if result.status in STATUS_EXIT:
            return STATUS_EXIT[result.status]
        return result.exit_code if result.exit_code is not None else 1
    finally:
        if keep:
            _say(f"workspace kept at {workspace.path}")
        else:
            workspace.cleanup()


def _run_tty(engine: SandboxEngine, spec: ContainerSpec) -> int:
    """A terminal session through the docker CLI; the policy's wall clock still applies."""
    if shutil.which("docker") is None:
        raise UserError("an interactive sandbox needs the docker CLI on PATH")
    name = f"statebox-tty-{secrets.token_hex(4)}"
    args = engine.cli_args(spec)
    args.insert(2, f"--name={name}")
    limit = spec.time_limit_s or spec.policy.limits.time_limit_s
    proc = subprocess.Popen(args)
    try:
        code = signals.wait_process(proc, timeout=limit)  # a stop signal raises here, at a safe point
        _say(f"status={'ok' if code == 0 else 'error'} exit_code={code}")
        return code
    except subprocess.TimeoutExpired:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        proc.wait()
        _say(f"status=timeout (wall-clock limit of {limit:g}s)")
        return STATUS_EXIT["timeout"]
    except BaseException:  # Ctrl-C, SIGTERM/SIGHUP (statebox.signals.Interrupted), anything else
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        raise
