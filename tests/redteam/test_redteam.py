"""Every attacker must be contained, and the harness must keep working after all of them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.redteam.attacks import ATTACKS
from tests.redteam.conftest import DECOYS

# xdist_group: every test here reads the session-scoped `redteam` fixture (each attacker run once); one worker makes it once
pytestmark = [pytest.mark.docker, pytest.mark.timeout(600), pytest.mark.xdist_group("redteam")]


def _problems(outcome, ctx) -> list[str]:
    a = outcome.attack
    problems = []
    text = (outcome.stdout + "\n" + outcome.stderr).lower()
    for needle in ctx["needles"]:
        if needle.lower() in text:
            problems.append(f"the output names the source: {needle!r}")
    for key, value in DECOYS.items():
        if value.lower() in text:
            problems.append(f"the host's decoy {key} leaked")
    escaped = [line for line in outcome.lines if line.startswith("ESCAPED")]
    if escaped:
        problems.append(f"escaped: {escaped[:5]}")
    if outcome.status not in a.statuses:
        problems.append(f"status {outcome.status} ({outcome.reason}) not in {a.statuses}")
    if a.needs_done and "DONE" not in outcome.lines:
        problems.append("the attacker did not run to its end (no DONE): " + outcome.stderr[-300:])
    if outcome.count("BLOCKED") < a.min_blocked:
        problems.append(f"only {outcome.count('BLOCKED')} BLOCKED lines, expected >= {a.min_blocked}")
    # measured from the container's start (the host's wall clock), not from create: load can slow create
    if a.max_duration_s is not None and outcome.duration_s > a.max_duration_s:
        problems.append(f"ran {outcome.duration_s:.1f}s, limit {a.max_duration_s}s")
    if outcome.leftover_containers:
        problems.append("its container was not removed")
    return problems


@pytest.mark.parametrize("name", [a.name for a in ATTACKS])
def test_attacker_is_contained(redteam, name):
    outcome = redteam["outcomes"][name]
    print(outcome.summary())
    print("stdout (tail):", outcome.stdout[-1500:])
    print("stderr (tail):", outcome.stderr[-500:])
    assert not _problems(outcome, redteam), _problems(outcome, redteam)


def test_red_team_is_large(redteam):
    print(f"{len(redteam['outcomes'])} attackers in {redteam['total_s']:.1f}s (not asserted: speed varies by machine)")
    assert len(redteam["outcomes"]) >= 35


def test_host_listener_never_reached(redteam):
    assert redteam["listener"].accepted == 0
    assert "BLOCKED tcp 127.0.0.1" in redteam["outcomes"]["host_loopback_service"].stdout


def test_workspace_mount_source_reveals_nothing(redteam):
    """The bind source in mountinfo is the random folder: only hex, under the statebox root."""
    outcome = redteam["outcomes"]["name_in_mountinfo"]
    ws_path = str(outcome.workspace.path)
    lines = [line for line in outcome.lines if " /workspace " in line]
    assert lines, outcome.stdout[:500]
    name = Path(ws_path).name
    assert len(name) == 32 and all(c in "0123456789abcdef" for c in name)
    for needle in redteam["needles"]:
        assert needle.lower() not in ws_path.lower()


def test_output_flood_is_capped(redteam):
    from statebox.sandbox import docker as sdocker

    outcome = redteam["outcomes"]["output_flood"]
    size = (redteam["logs"] / "output_flood.out").stat().st_size
    print(f"flood produced {outcome.stdout_bytes} bytes, kept {size}")
    assert outcome.stdout_bytes > 0
    assert size <= sdocker.OUTPUT_CAP_BYTES + 200


def _used_bytes(path) -> tuple[int, int]:
    """(bytes, inodes) in use on the filesystem at `path`, as the host's kernel counts them."""
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree


def test_workspace_fill_stops_in_the_kernel(redteam):
    """The write past 48 MB fails inside the container (ENOSPC); the host holds no more than the budget."""
    outcome = redteam["outcomes"]["fill_workspace"]
    assert outcome.status == "ok" and "No space left" in outcome.stdout, outcome.stdout[-800:]
    used, _ = _used_bytes(outcome.workspace.path)
    print(f"workspace on the host after the fill: {used / 2**20:.1f} MB (budget 48 MB)")
    assert used <= 48 * 2**20 + 64 * 1024  # + the instruction and the tmpfs's own rounding


def test_inode_fill_stops_in_the_kernel(redteam):
    outcome = redteam["outcomes"]["fill_inodes"]
    for top in ("/workspace", "/tmp", "/home/agent", "/dev/shm"):
        line = next((l for l in outcome.lines if l.startswith(f"BLOCKED {top} ")), "")
        assert "No space left" in line, outcome.stdout[-800:]
        made = int(line.split(" after ")[1].split()[0])
        assert made <= 2000, line
    _, inodes = _used_bytes(outcome.workspace.path)
    print(f"inodes in use in the workspace on the host: {inodes} (limit 2000)")
    assert inodes <= 2000


def test_workspace_video_cannot_be_changed(redteam):
    """The video is a read-only bind from disk: the kernel refuses every change, even a rename over it."""
    outcome = redteam["outcomes"]["tamper_with_the_video"]
    ws = outcome.workspace
    assert outcome.count("BLOCKED") >= 7 and "size unchanged" in outcome.stdout, outcome.stdout[-800:]
    assert (ws.video_store / ws.video_name).read_bytes() == ws.video_path.read_bytes()


def test_deep_tree_is_cleaned_up(redteam):
    outcome = redteam["outcomes"]["deep_tree"]
    ws = outcome.workspace
    assert outcome.status == "ok" and "made 5000 nested folders" in outcome.stdout, outcome.stderr[-500:]
    ws.cleanup()
    assert not ws.path.exists() and not ws.video_store.exists()
    assert Path("/etc/hostname").exists()  # the links to / were never followed


def test_detached_processes_do_not_outlive_the_attempt(redteam, docker_engine):
    outcome = redteam["outcomes"]["detached_processes"]
    assert outcome.status == "ok" and "DONE" in outcome.lines, outcome.stderr[-500:]
    assert outcome.leftover_containers == 0
    assert docker_engine.api.containers(all=True, filters={"label": "statebox.run=redteam", "status": "running"}) == []


def test_detached_processes_in_an_exec_sandbox_die_with_it(redteam, docker_engine, limited_dir):
    """The long-lived sandbox (react, tools): a daemon started by one exec dies with stop()."""
    from statebox.policies import load_policy
    from statebox.sandbox.provider import get_provider
    from statebox.sandbox.spec import ContainerSpec

    spec = ContainerSpec(image=redteam["image"], command=["sleep", "infinity"], workspace=limited_dir(8),
                         policy=load_policy("default"), run_id="redteam", attempt_id="rt-exec-detach")
    box = get_provider("docker").start(spec)
    try:
        box.exec("setsid sleep 1000 < /dev/null > /dev/null 2>&1 & nohup sleep 999 > /dev/null 2>&1 &", timeout_s=20)
        seen = box.exec("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c '^sleep 99[09]'",
                        timeout_s=20).stdout.strip()
        print("sleepers after the exec returned:", seen)
        assert int(seen or 0) >= 1  # the setsid daemon outlived its exec
        init = box.exec("kill -STOP 1; echo rc=$?; stat -c %u /proc/1", timeout_s=20)
        assert "rc=1" in init.stdout and init.stdout.strip().endswith("0"), init.stdout + init.stderr
    finally:
        box.stop()
    assert docker_engine.api.containers(all=True, filters={"label": "statebox.attempt=rt-exec-detach"}) == []


def test_symlinks_planted_by_the_agent_are_not_followed_by_the_host(redteam):
    from statebox.errors import UserError

    outcome = redteam["outcomes"]["symlink_planted_in_workspace"]
    ws = outcome.workspace
    assert (ws.path / "answer.txt").is_symlink()
    with pytest.raises(UserError, match="not a regular file"):
        ws.read_output("answer.txt")
    with pytest.raises(UserError):
        ws.read_output("out.json")
    ws.cleanup()
    assert not ws.path.exists()
    assert redteam["canary"].read_text() == "CANARY-ANSWER-42\n"  # cleanup did not follow the link
    assert Path("/etc/hostname").exists()  # nor the rootlink -> /


def test_source_video_untouched_and_never_linked(redteam):
    video = redteam["video"]
    assert hashlib.sha256(video.read_bytes()).hexdigest() == redteam["video_hash"]
    for outcome in redteam["outcomes"].values():
        ws_video = outcome.workspace.path / outcome.workspace.video_name
        if ws_video.exists():
            assert ws_video.stat().st_ino != video.stat().st_ino
            assert not ws_video.is_symlink()


def test_read_only_mount_still_intact(redteam):
    assert (redteam["ro_dir"] / "token.txt").read_text() == "lease-token-not-a-secret\n"
    assert not (redteam["ro_dir"] / "new").exists()


def test_harness_keeps_working_after_the_attacks(redteam, docker_engine, tmp_path, limited_dir):
    """After fork bombs, OOMs, floods and killed inits, a plain attempt still runs and nothing is left over."""
    from statebox.policies import load_policy
    from statebox.sandbox.provider import get_provider
    from statebox.sandbox.spec import ContainerSpec

    spec = ContainerSpec(image=redteam["image"], command=["python3", "-c", "print(6*7)"], workspace=limited_dir(8),
                         policy=load_policy("default"), run_id="redteam", attempt_id="rt-after")
    result = get_provider("docker").run(spec, tmp_path / "o", tmp_path / "e")
    assert result.status == "ok" and (tmp_path / "o").read_text().strip() == "42"
    left = docker_engine.api.containers(all=True, filters={"label": "statebox.run=redteam"})
    assert left == []
