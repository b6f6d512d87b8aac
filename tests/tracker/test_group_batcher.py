"""The tracker's group batcher with `containers=1`: one group container at a time, and a group waiting
for its turn keeps taking members (so the attempts queue into full groups)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from statebox.agents.tracker import _Batcher
from statebox.policies import load_policy

PROVIDER = object()
POLICY = load_policy("default")


def _ctx(attempt_id: str) -> SimpleNamespace:
    return SimpleNamespace(engine=PROVIDER, policy=POLICY, attempt=SimpleNamespace(attempt_id=attempt_id))


def test_one_container_at_a_time_and_the_waiting_group_fills_up():
    started, release = threading.Event(), threading.Event()
    groups: list[list[str]] = []
    running, most = [0], [0]
    lock = threading.Lock()

    def run_group(ctxs):
        with lock:
            groups.append([c.attempt.attempt_id for c in ctxs])
            running[0] += 1
            most[0] = max(most[0], running[0])
        started.set()
        release.wait(30)
        with lock:
            running[0] -= 1
        return [f"session of {c.attempt.attempt_id}" for c in ctxs]

    batcher = _Batcher(run_group, size=4, wait_s=0.01, containers=1)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(batcher.submit, _ctx("a0"))
        assert started.wait(30)  # a0's group (alone: its wait ran out) holds the one container
        rest = [pool.submit(batcher.submit, _ctx(f"a{i}")) for i in (1, 2, 3)]
        while not any(len(g.members) == 3 for g in list(batcher._open.values())):  # all three queued, still open
            assert not any(f.done() for f in rest)
            threading.Event().wait(0.01)
        release.set()
        assert first.result(30) == "session of a0"
        assert [f.result(30) for f in rest] == ["session of a1", "session of a2", "session of a3"]
    assert most[0] == 1
    assert groups[0] == ["a0"] and sorted(groups[1]) == ["a1", "a2", "a3"]  # waited for its turn, took all three


def test_without_a_container_limit_groups_run_side_by_side():
    both = threading.Barrier(2, timeout=30)

    def run_group(ctxs):
        both.wait()  # returns only when two groups run at once
        return [c.attempt.attempt_id for c in ctxs]

    batcher = _Batcher(run_group, size=1, wait_s=0.01)
    with ThreadPoolExecutor(2) as pool:
        assert sorted(pool.map(batcher.submit, [_ctx("x"), _ctx("y")])) == ["x", "y"]


def test_a_large_group_gets_a_smaller_batch_so_a_forward_pass_stays_within_memory():
    from statebox.agents.tracker import GROUP_FRAMES_PER_PASS, TrackerAgent
    from statebox.attempt import AgentOptions

    agent = TrackerAgent(AgentOptions())
    assert [agent.group_batch(n) for n in (1, 8, 16, 100)] == [8, 8, 4, 1]
    assert all(n * agent.group_batch(n) <= GROUP_FRAMES_PER_PASS for n in range(1, 65))
    command = agent.command("/models/w.pt", streams_file="/input/streams.json", batch=agent.group_batch(16))
    assert command[command.index("--batch") + 1] == "4"
