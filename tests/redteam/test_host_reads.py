"""Attack: make the HOST read a file for the agent through a link it planted in the workspace.

The react agent ran on the host and read `answer.txt` with `Path.read_text`, which follows
symlinks: an agent that planted `answer.txt -> /proc/self/environ` (a path that, resolved on
the host, is the harness's own environment with the real API key) and ended without
submitting got the host's environment recorded as its response. Every host-side read of a
workspace file must refuse links and special files (`Workspace.read_output`).
"""

from __future__ import annotations

import pytest

from statebox.attempt import AgentOptions
from statebox.testing.scripted_model import Turn
from tests.agents.test_react import attempt_setup, run_react  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.docker

HOST_SECRET = "sk-ant-host-secret-" + "9d1c" * 8


def test_react_answer_link_to_host_environ_is_refused(attempt_setup, monkeypatch):  # noqa: F811
    monkeypatch.setenv("STATEBOX_RT_HOST_SECRET", HOST_SECRET)
    script = [Turn(shell="ln -s /proc/self/environ answer.txt; ls -la answer.txt"),
              Turn(text="I wrote my answer to answer.txt.")]
    session, _ = run_react(attempt_setup, script, provider_model="claude-sonnet-4-6")
    print("status", session.status, "response", session.response[:200])
    assert HOST_SECRET not in session.response
    assert "STATEBOX_RT_HOST_SECRET" not in session.response
    events_text = (attempt_setup["attempt_dir"] / "events.jsonl").read_text()
    assert HOST_SECRET not in events_text
    assert any(e.kind.value == "error" and "not a regular file" in e.text for e in session.events), \
        [e.text[:100] for e in session.events]


def test_react_answer_fifo_does_not_hang_the_host(attempt_setup):  # noqa: F811
    script = [Turn(shell="mkfifo answer.txt; ls -la answer.txt"), Turn(text="Done.")]
    session, _ = run_react(attempt_setup, script, provider_model="claude-sonnet-4-6")
    assert session.response == "Done." or session.response == ""
