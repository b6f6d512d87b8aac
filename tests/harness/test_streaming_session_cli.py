"""Streaming sessions with the real coding-agent CLIs: they continue their own conversation.

`statebox run --streaming session` with `claude-code` (and `codex`): the real binary in one
container per item, the real gateway, the scripted model server upstream. At each question
the scripted model runs a shell command that counts the video cuts in the workspace and
decodes every file's last frame; it then answers with the count. The model's turn index
is the number of turns already in the conversation it receives, so the k-th question
arriving at turn 2(k-1) proves the CLI resumed its conversation (claude `--resume`,
`codex exec resume`) rather than starting afresh.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from statebox.harness.plan import DatasetSpec, RunConfig
from statebox.harness.runner import run_planned
from statebox.testing.scripted_model import ScriptedModelServer, ScriptRequest, Turn

pytestmark = [pytest.mark.docker]

TIMES = (1.0, 2.0, 3.0)
COUNT = r"""python3 -c "
import av, glob, os
ends = {}
for name in os.listdir('.'):
    try:
        with av.open(name) as c:
            if c.streams.video and 'mp4' in c.format.name:
                ends[name] = max(f.time for f in c.decode(video=0))
    except Exception:
        pass
print('CUTS', len(ends), 'LAST', max(ends.values()))
open('answer.txt', 'w').write(str(len(ends)))
" """


def _answer(req: ScriptRequest) -> Turn:
    found = re.findall(r"CUTS (\d+)", req.last_tool_output or "")
    return Turn(text=f"ANSWER: {found[-1] if found else 'none'}")


SCRIPT = [Turn(shell=COUNT), _answer] * len(TIMES)


def _dataset(root: Path) -> DatasetSpec:
    videos = root / "videos"
    videos.mkdir()
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10:duration=4",
                    "-pix_fmt", "yuv420p", str(videos / "clip_a.mp4")], check=True)
    data = root / "vcbench_eval.jsonl"
    data.write_text("".join(json.dumps({"id": "q_alpha", "query_index": i, "question": "How many squares so far?",
                                        "video_path": "clip_a.mp4", "counting_subtype": "O1-Snap", "query_time": t,
                                        "count": i + 1}) + "\n" for i, t in enumerate(TIMES)))
    return DatasetSpec(label="vcbench", bench="vcbench", data=str(data), videos=str(videos))


def _run(tmp_path: Path, agent: str, model: str, keys: dict[str, str]) -> tuple[list, list]:
    server = ScriptedModelServer(list(SCRIPT)).start()
    try:
        config = RunConfig(run_id="clisession", agents=[agent], datasets=[_dataset(tmp_path)], streaming="session",
                           agent_options={agent: {"model": model}})
        upstream = {"anthropic_base_url": server.base_url} if "ANTHROPIC_API_KEY" in keys else {"openai_base_url": server.openai_base_url}
        store = run_planned(config, tmp_path / "run", gateway_options={"env": keys, **upstream})
        rows = sorted(store.rows(), key=lambda r: r.query_index)
        store.close()
        return rows, server.model_requests()
    finally:
        server.stop()


@pytest.mark.parametrize("agent,model,keys", [
    ("claude-code", "claude-sonnet-4-6", {"ANTHROPIC_API_KEY": "sk-ant-DECOY-session-0123456789"}),
    ("codex", "gpt-5-codex", {"OPENAI_API_KEY": "sk-proj-DECOY-session-0123456789"}),
])
def test_cli_agent_continues_its_conversation_across_query_points(tmp_path, docker_engine, agent, model, keys):
    rows, requests = _run(tmp_path, agent, model, keys)
    assert [r.status for r in rows] == ["ok"] * len(TIMES), [r.reason for r in rows]
    assert [r.response for r in rows] == ["1", "2", "3"]  # k cuts at the k-th question
    first_turns = sorted({r.turn_index for r in requests if not r.side})
    assert first_turns == list(range(2 * len(TIMES))), first_turns  # one conversation: turns 0..5, not 0,1 three times
    for row in rows:
        folder = Path(tmp_path / "run" / "attempts" / row.attempt_id)
        assert (folder / "gateway.jsonl").read_text().strip()  # each point its own lease and log
        session = json.loads((folder / "session.json").read_text())
        assert session["meta"]["streaming"] == "session" and session["meta"]["conversation"]
    conversations = {json.loads((tmp_path / "run" / "attempts" / r.attempt_id / "session.json").read_text())["meta"]["conversation"]
                     for r in rows}
    assert len(conversations) == 1


def test_an_agent_without_a_conversation_gets_the_earlier_answers_in_its_question(tmp_path, docker_engine):
    """mllm builds its prompt from the question alone: in a session the earlier Q&A is appended to it."""
    server = ScriptedModelServer([Turn(text="ANSWER: 7")]).start()
    try:
        config = RunConfig(run_id="mllmsession", agents=["mllm"], datasets=[_dataset(tmp_path)], streaming="session",
                           agent_options={"mllm": {"model": "claude-sonnet-4-6", "frames": 4, "extra": {"vtools": "local"}}})
        store = run_planned(config, tmp_path / "run", gateway_options={
            "env": {"ANTHROPIC_API_KEY": "sk-ant-DECOY-session-0123456789"}, "anthropic_base_url": server.base_url})
        rows = sorted(store.rows(), key=lambda r: r.query_index)
        store.close()
        bodies = [json.dumps(r.body) for r in server.model_requests() if not r.side]
    finally:
        server.stop()
    assert [r.status for r in rows] == ["ok"] * len(TIMES) and [r.response for r in rows] == ["7"] * len(TIMES)
    assert len(bodies) == len(TIMES)
    assert "Earlier in this session" not in bodies[0]
    assert "answered: at 1 s: 7." in bodies[1]
    assert "answered: at 1 s: 7; at 2 s: 7." in bodies[2]
