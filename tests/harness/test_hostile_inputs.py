"""Inputs that cannot take the host down, run folders that hold one configuration, pinned models.

Each hostile input is handed to the real CLI in a subprocess: `--data /dev/zero` (which once
grew host memory by ~0.9 GB/s), a FIFO (which once hung `run` forever), a 2 GB sparse file, a
garbage / foreign / truncated results.sqlite, and another configuration written into an
existing run folder. Each must end as one line on stderr with exit code 2, well inside a
generous timeout, with the child's peak memory bounded (read from `wait4`'s rusage of that one
child, started by a small launcher: see `LAUNCHER`) and the files it was given left as they were.

Pinned models: `--model X` makes run.json record X (plus the agent's helper models) as the
gateway allow-list, and a lease opened the way every attempt opens it admits X and refuses
another model before anything reaches the (scripted) upstream.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import anthropic
import pytest

from statebox.agents.model_clients import anthropic_client
from statebox.attempt import AttemptContext, SecretFacts, open_gateway
from statebox.harness.plan import RunConfig, agent_options, pinned_models
from statebox.policies.model import load_policy
from statebox.sandbox.gateway import Gateway
from statebox.schema import Attempt, Item
from statebox.testing.scripted_model import ScriptedModelServer, Turn

STATEBOX = [sys.executable, "-m", "statebox.cli"]
TIMEOUT_S = 120  # generous: the bad inputs are refused in about a second; the old failure modes never end
MAX_RSS_MB = 1024  # the CLI with its imports is ~150 MB; /dev/zero read whole passed this in about a second
DECOY_KEY = "sk-DECOY-pinned-0123456789abcdef"


class Finished:
    def __init__(self, returncode: int, stdout: str, stderr: str, seconds: float, max_rss_mb: float) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.seconds, self.max_rss_mb = seconds, max_rss_mb


# Linux gives a process that execs the peak resident size of the memory it replaces: a child forked from
# this test's worker starts its `ru_maxrss` at the worker's own peak (a worker that ran a test holding 1 GB
# measured every CLI after it at 1 GB, whatever the CLI did: a figure that depended on test order). So the
# CLI is forked by a fresh, small interpreter, and that one reports the CLI's own rusage.
LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump({"exit": os.waitstatus_to_exitcode(status), "max_rss_kb": usage.ru_maxrss}, fh)
"""


def _run(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> Finished:
    """The CLI in a child of its own, its peak memory from `wait4` (that child alone), killed at TIMEOUT_S."""
    out, err, measured = tmp_path / "cli.out", tmp_path / "cli.err", tmp_path / "cli.rusage.json"
    start = time.monotonic()
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(measured), *STATEBOX, *args], stdout=o, stderr=e,
                                stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, start_new_session=True)
    killer = threading.Timer(TIMEOUT_S, lambda: os.killpg(proc.pid, signal.SIGKILL))
    killer.start()
    try:
        proc.wait()
    finally:
        killer.cancel()
    seconds = time.monotonic() - start
    if not measured.exists():  # killed at the timeout before the launcher could tell
        return Finished(-signal.SIGKILL, out.read_text(), err.read_text(), seconds, 0.0)
    figures = json.loads(measured.read_text())
    return Finished(figures["exit"], out.read_text(), err.read_text(), seconds, figures["max_rss_kb"] / 1024)


def test_the_memory_bound_measures_the_cli_not_the_worker_that_started_it(tmp_path: Path) -> None:
    """A worker that held a lot before (another test's) must not lend its peak to the CLI's figure."""
    held = bytearray(MAX_RSS_MB * 1024 * 1024)
    for at in range(0, len(held), 4096):  # touched: resident
        held[at] = 1
    done = _run(["--help"], tmp_path)
    del held
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.max_rss_mb < MAX_RSS_MB / 2, f"peak memory {done.max_rss_mb:.0f} MB"


def _one_line(done: Finished, *words: str) -> str:
    assert done.seconds < TIMEOUT_S, f"still running after {TIMEOUT_S} s (killed)"
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert done.max_rss_mb < MAX_RSS_MB, f"peak memory {done.max_rss_mb:.0f} MB"
    return lines[0]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, Path]:
    """A three-question VSTAT file and its one-second video."""
    root = tmp_path_factory.mktemp("data")
    videos = root / "videos"
    videos.mkdir()
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1",
                    "-pix_fmt", "yuv420p", str(videos / "clip.mp4")], check=True)
    docs = [{"source_task": "t", "video_id": "c", "video_path": "clip.mp4", "question": f"q{i}?", "answer": "3",
             "choices": [], "answer_index": -1} for i in range(3)]
    data = root / "data.json"
    data.write_text(json.dumps({"data": {"t": docs}}))
    return data, videos


@pytest.fixture(scope="module")
def finished_run(dataset, tmp_path_factory) -> Path:
    """A finished oracle run (no Docker needed): run.json and a real results.sqlite."""
    data, videos = dataset
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    done = subprocess.run(STATEBOX + ["run", "--agent", "oracle", "--bench", "vstat", "--data", str(data),
                                      "--videos", str(videos), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return run_dir


# ---------------------------------------------------------------- files that are not regular files


def _hostile(kind: str, tmp_path: Path) -> Path:
    if kind == "dev-zero":
        return Path("/dev/zero")
    if kind == "fifo":
        path = tmp_path / "data.jsonl"
        os.mkfifo(path)  # nobody ever writes: opening it for reading the plain way blocks forever
        return path
    if kind == "sparse-2g":
        path = tmp_path / "data.jsonl"
        with open(path, "wb") as handle:
            handle.truncate(2 * 1024 ** 3)  # 2 GB of zeros, no disk used: over the cap, one long "line"
        return path
    if kind == "folder":
        path = tmp_path / "data.jsonl"
        path.mkdir()
        return path
    raise AssertionError(kind)


WHY = {"dev-zero": "character device", "fifo": "FIFO", "sparse-2g": "limit", "folder": "folder"}


@pytest.mark.parametrize("kind", list(WHY))
def test_run_refuses_a_data_file_that_is_not_a_regular_file(kind, tmp_path):
    data = _hostile(kind, tmp_path)
    done = _run(["run", "--agent", "oracle", "--bench", "vcbench", "--data", str(data), "--run-dir", str(tmp_path / "run")],
                tmp_path)
    _one_line(done, str(data), WHY[kind])
    assert not (tmp_path / "run" / "results.sqlite").exists()


@pytest.mark.parametrize("kind", list(WHY))
def test_score_refuses_data_and_predictions_that_are_not_regular_files(kind, tmp_path, dataset):
    hostile = _hostile(kind, tmp_path)
    _one_line(_run(["score", "--bench", "vcbench", "--data", str(hostile), "--predictions", str(hostile)], tmp_path),
              str(hostile), WHY[kind])
    good_data, _ = dataset
    _one_line(_run(["score", "--bench", "vstat", "--data", str(good_data), "--predictions", str(hostile)], tmp_path),
              str(hostile), WHY[kind])


def test_a_line_past_the_line_cap_is_refused_before_it_is_held(tmp_path):
    """A 100 MB file that is one line (under the 256 MB file cap, over the 16 MB line cap)."""
    data = tmp_path / "eval.jsonl"
    with open(data, "wb") as handle:
        handle.truncate(100 * 1024 ** 2)
    baseline = _run(["score", "--bench", "vcbench", "--data", "/dev/zero", "--predictions", "/dev/zero"], tmp_path)
    _one_line(baseline, "character device")  # the same CLI refusing without reading a byte
    done = _run(["score", "--bench", "vcbench", "--data", str(data), "--predictions", str(data)], tmp_path)
    line = _one_line(done, f"{data}:1:", "line longer than")
    assert done.max_rss_mb < baseline.max_rss_mb + 64, line  # at most the 16 MiB cap held, never the 100 MB


def test_policy_and_suite_description_that_are_not_regular_files(tmp_path, dataset):
    data, videos = dataset
    policy = tmp_path / "policy.yaml"
    os.mkfifo(policy)
    _one_line(_run(["run", "--agent", "oracle", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                    "--policy", str(policy), "--run-dir", str(tmp_path / "run")], tmp_path), str(policy), "FIFO")
    suite = tmp_path / "suite"
    suite.mkdir()
    os.symlink("/dev/zero", suite / "suite.json")
    _one_line(_run(["run", "--agent", "oracle", "--suite", str(suite), "--run-dir", str(tmp_path / "run")], tmp_path),
              "suite.json", "character device")


# ---------------------------------------------------------------- result stores that are not statebox's


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(64 * 1024))


def _foreign(path: Path) -> None:
    path.unlink()
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
    db.close()


def _truncated(path: Path) -> None:
    db = sqlite3.connect(path)  # enough rows for pages beyond the schema's, then cut the file in half
    db.executemany("INSERT INTO results (attempt_id, run_id, agent, dataset, bench, item_id, query_index, epoch, "
                   "status, response) VALUES (?, 'r', 'a', 'd', 'vstat', ?, 0, 0, 'ok', ?)",
                   [(f"pad-{i}", str(i), "x" * 400) for i in range(400)])
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    for side in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        side.unlink(missing_ok=True)
    os.truncate(path, path.stat().st_size // 2)


def _trigger(path: Path) -> None:
    """A handed-over run whose store puts every re-audited verdict back to clean."""
    with sqlite3.connect(path) as db:
        db.executescript(KEEP_CLEAN)
    db.close()


KEEP_CLEAN = ("CREATE TRIGGER keep_clean AFTER UPDATE OF verdict ON results BEGIN "
              "UPDATE results SET verdict = 'clean', findings = '[]' WHERE attempt_id = NEW.attempt_id; END;")


@pytest.mark.parametrize("spoil, words", [(_garbage, "not an SQLite database"), (_foreign, "tables invoices"),
                                          (_truncated, "malformed"), (_trigger, "trigger keep_clean")])
def test_a_store_that_is_not_statebox_s_is_one_line_and_left_untouched(spoil, words, finished_run, dataset, tmp_path):
    data, videos = dataset
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    store = run_dir / "results.sqlite"
    spoil(store)
    before, names = _digest(store), sorted(os.listdir(run_dir))
    run_json = _digest(run_dir / "run.json")
    _one_line(_run(["run", "--resume", str(run_dir)], tmp_path), str(store), words)
    _one_line(_run(["run", "--agent", "oracle", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                    "--run-dir", str(run_dir)], tmp_path), str(store), words)
    _one_line(_run(["report", str(run_dir), "--out", str(tmp_path / "report.html")], tmp_path), str(store), words)
    assert _digest(store) == before and sorted(os.listdir(run_dir)) == names  # no write, no -wal/-shm of its own
    assert _digest(run_dir / "run.json") == run_json


# ---------------------------------------------------------------- one configuration per run folder


def _rows(run_dir: Path) -> list[tuple]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        rows = db.execute("SELECT attempt_id, agent, response FROM results ORDER BY attempt_id").fetchall()
    db.close()
    return rows


def test_another_configuration_into_an_existing_run_folder_is_refused(finished_run, dataset, tmp_path):
    data, videos = dataset
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    rows, run_json = _rows(run_dir), _digest(run_dir / "run.json")
    base = ["run", "--agent", "oracle", "--bench", "vstat", "--data", str(data), "--videos", str(videos)]
    for extra, key in ((["--limit", "1"], "limit"), (["--epochs", "2"], "epochs"), (["--policy", "strict"], "policy"),
                       (["--model", "claude-other"], "agent_options of oracle")):
        line = _one_line(_run(base + ["--run-dir", str(run_dir)] + extra, tmp_path), str(run_dir), "another run configuration", key)
        assert "--resume" in line
        # --resume continues the stored configuration; flags that would change it are refused the same way
        _one_line(_run(base + ["--resume", str(run_dir)] + extra, tmp_path), str(run_dir), key)
    _one_line(_run(["run", "--resume", str(run_dir), "--limit", "1"], tmp_path), "--limit", "cannot change")
    assert _digest(run_dir / "run.json") == run_json and _rows(run_dir) == rows

    # the same configuration continues (from the command or --resume), and a run folder may grow by an agent
    for args in (base + ["--run-dir", str(run_dir)], ["run", "--resume", str(run_dir), "--concurrency", "2"],
                 base + ["--resume", str(run_dir)]):
        done = _run(args, tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
    assert _rows(run_dir) == rows
    done = _run(base + ["--agent", "chance-random", "--run-dir", str(run_dir)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(rows) < set(_rows(run_dir)) and len(_rows(run_dir)) == 6


def test_a_run_json_that_is_not_a_regular_file_is_one_line(finished_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "run.json").unlink()
    os.symlink("/dev/zero", run_dir / "run.json")
    _one_line(_run(["run", "--resume", str(run_dir)], tmp_path), "run.json", "character device")


# ---------------------------------------------------------------- pinned models


def test_pinned_models_rule():
    assert pinned_models("mllm", {"model": "gpt-x"}, []) == ["gpt-x"]
    assert pinned_models("claude-code", {"model": "claude-opus-x"}, []) == ["claude-opus-x", "claude-*haiku*"]
    assert pinned_models("claude-code", {}, []) == ["claude-*", "claude-*haiku*"]
    assert pinned_models("mllm", {}, []) == ["claude-sonnet-4-6"]  # the agent's own default (anthropic)
    assert pinned_models("mllm", {"provider": "openai"}, []) == ["gpt-6.1-sol"]
    assert pinned_models("mllm", {"model": "gpt-x"}, ["gpt-y*"]) == ["gpt-y*"]  # the policy says otherwise
    assert pinned_models("oracle", {"model": "gpt-x"}, []) == []  # talks to no model


def test_model_flag_pins_the_lease_and_run_json_records_it(dataset, tmp_path):
    """`run --agent blind --model M` through the CLI: run.json holds [M] and every request asked for M;
    then a lease opened the way an attempt opens it (from the stored run.json) refuses another
    model before the upstream sees it."""
    data, _ = dataset
    run_dir = tmp_path / "run"
    with ScriptedModelServer([Turn(text="ANSWER: 3")] * 10, index_mode="sequential", side_request=lambda req: False) as server:
        done = _run(["run", "--agent", "blind", "--model", "claude-pinned-1", "--bench", "vstat", "--data", str(data),
                     "--run-dir", str(run_dir)], tmp_path,
                    {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": DECOY_KEY})
        asked = [json.loads(r.body)["model"] if isinstance(r.body, (str, bytes)) else r.body["model"]
                 for r in server.model.model_requests()]
    assert done.returncode == 0, done.stderr[-2000:]
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["agent_options"]["blind"]["allowed_models"] == ["claude-pinned-1"]
    assert asked and set(asked) == {"claude-pinned-1"}

    config = RunConfig.load(run_dir)
    with ScriptedModelServer([Turn(text="ok")] * 4, index_mode="sequential") as upstream, \
            Gateway(env={"ANTHROPIC_API_KEY": DECOY_KEY}, anthropic_base_url=upstream.base_url) as gateway:
        item = Item(id="i1", benchmark="vstat", video="v.mp4", question="q?", answer_type="number", target=3)
        ctx = AttemptContext(attempt=Attempt(run_id=config.run_id, agent="blind", item_id="i1", dataset="vstat"),
                             item=item, query=item.queries[0], attempt_dir=tmp_path / "attempt",
                             policy=load_policy(config.policy), options=agent_options(config, "blind"),
                             secret=SecretFacts(original_name="v.mp4", original_stem="v", item_id="i1", dataset="vstat"),
                             gateway=gateway)
        with open_gateway(ctx, "anthropic") as session:
            client = anthropic_client(session.lease, max_retries=0)
            client.messages.create(model="claude-pinned-1", max_tokens=8, messages=[{"role": "user", "content": "x"}])
            with pytest.raises(anthropic.PermissionDeniedError) as refused:
                client.messages.create(model="claude-opus-4-5", max_tokens=8, messages=[{"role": "user", "content": "x"}])
        seen = [r.body["model"] for r in upstream.model.model_requests()]
    assert "claude-opus-4-5" in refused.value.body["error"]["message"]
    assert seen == ["claude-pinned-1"]


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "sparse"])
def test_a_prompt_template_that_is_not_a_small_regular_file_is_one_line(kind, tmp_path):
    """`--prompt-template` is a user's file too: the coding agents' template (cli_common.load_template)
    and the video agents' (video_prompts.render_template) are read through userfiles, so a FIFO
    cannot hang an attempt and a 2 GB file is never read."""
    from statebox.agents.cli_common import load_template
    from statebox.agents.video_prompts import render_template
    from statebox.attempt import AgentOptions
    from statebox.errors import UserError

    path = tmp_path / "template"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        with path.open("wb") as fh:
            fh.truncate(2 * 1024**3)
    from statebox.agents.react import load_system_template

    for read in (lambda: load_template(AgentOptions(prompt_template=str(path))), lambda: render_template(str(path), {}),
                 lambda: load_system_template(AgentOptions(prompt_template=str(path)))):  # react's read it whole
        with pytest.raises(UserError, match=str(path)):
            read()


@pytest.mark.parametrize(("template", "why"), [
    ("{question:>2000000000}", "a format spec"),  # a 2 GB string built on the host, then sent as the prompt
    ("{question.__class__.__mro__}", "attribute"),  # reaches past the text into the objects (a traceback when absent)
    ("{question.nope}", "attribute"),
    ("{options[0]}", "index"),
    ("{question!r}", "a conversion"),
    ("{}", "not a known field"),
    ("{unknown}", "not a known field"),
    ("{question", "not a valid template"),
])
def test_a_video_prompt_template_takes_plain_fields_only(template, why, tmp_path):
    """The video agents' templates are Python `str.format` text; a field is a name and nothing more. A format spec,
    attribute or index access, or a conversion is one line naming the template and the field, never evaluated."""
    from statebox.agents.video_prompts import render_template
    from statebox.errors import UserError

    path = tmp_path / "template.txt"
    path.write_text(f"Look at the frames. {template}\n")
    with pytest.raises(UserError) as info:
        render_template(str(path), {"question": "How many?", "options": "A. 1\nB. 2"})
    assert str(info.value).startswith(f"{path}: ") and why in str(info.value)
    path.write_text("Q: {question}\n{options}\n{{literal braces}}\n")
    assert render_template(str(path), {"question": "How many?", "options": "A. 1"}) == "Q: How many?\nA. 1\n{literal braces}\n"


def _not_a_folder(kind: str, tmp_path: Path) -> Path:
    if kind == "file":
        path = tmp_path / "notes.txt"
        path.write_text("the user's notes\n")
    elif kind == "link to /dev/null":
        path = tmp_path / "out-link"
        path.symlink_to("/dev/null")
    elif kind == "under /proc":
        path = Path("/proc/statebox-out")
    else:
        raise AssertionError(kind)
    return path


OUTPUT_FOLDER_WHY = {"file": "is a file; statebox needs a folder there", "link to /dev/null": "is a character device",
                     "under /proc": "cannot make the"}


@pytest.mark.parametrize("kind", list(OUTPUT_FOLDER_WHY))
def test_an_output_folder_that_cannot_be_one_is_one_line(kind, tmp_path, dataset):
    """`--run-dir notes.txt`, `bench make --out /dev/null`, `bench variants ... --out /proc/x` were tracebacks
    (FileExistsError, NotADirectoryError; found by probe); each is one line, and what stood there is untouched."""
    data, videos = dataset
    path = _not_a_folder(kind, tmp_path)
    before = path.read_text() if kind == "file" else None
    _one_line(_run(["run", "--agent", "oracle", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                    "--run-dir", str(path)], tmp_path), str(path), OUTPUT_FOLDER_WHY[kind])
    _one_line(_run(["bench", "make", "--out", str(path), "--size", "tiny", "--tasks", "cube_count"], tmp_path),
              OUTPUT_FOLDER_WHY[kind])
    suite = tmp_path / "suite"  # a folder is all `tracker train` asks of its suite before --out
    suite.mkdir(exist_ok=True)
    _one_line(_run(["tracker", "train", "--suite", str(suite), "--out", str(path), "--epochs", "1"], tmp_path),
              OUTPUT_FOLDER_WHY[kind])
    if kind == "file":
        assert path.read_text() == before
    elif kind == "link to /dev/null":
        assert os.readlink(path) == "/dev/null"


def test_make_output_folder_makes_a_new_nested_folder_and_keeps_an_existing_one(tmp_path):
    from statebox.userfiles import make_output_folder

    make_output_folder(tmp_path / "a" / "b", "run folder")
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "a" / "b" / "kept.txt").write_text("x")
    make_output_folder(tmp_path / "a" / "b", "run folder")
    assert (tmp_path / "a" / "b" / "kept.txt").read_text() == "x"


def test_view_refuses_a_port_past_65535_without_a_traceback(finished_run, tmp_path):
    """`--port 99999` was an OverflowError traceback from bind() (found by probe)."""
    done = _run(["view", str(finished_run), "--port", "99999"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "65535" in done.stderr, done.stderr[-2000:]


def test_tracker_train_never_clears_a_folder_it_did_not_train_in(tmp_path):
    """`tracker train --out ~/project` removed the project's own `dataset/` and `run/` (found by probe): a non-empty
    --out that holds no earlier training is one line, and nothing in it is touched."""
    project = tmp_path / "project"
    (project / "dataset").mkdir(parents=True)
    (project / "dataset" / "photos.txt").write_text("mine\n")
    (project / "run").mkdir()
    suite = tmp_path / "suite"
    suite.mkdir()
    _one_line(_run(["tracker", "train", "--suite", str(suite), "--out", str(project), "--epochs", "1"], tmp_path),
              str(project), "holds no earlier training")
    assert (project / "dataset" / "photos.txt").read_text() == "mine\n" and (project / "run").is_dir()


def test_score_refuses_a_bootstrap_that_would_take_the_host_s_memory(tmp_path, dataset):
    """`--bootstrap 1000000000` asked numpy for an 82 GiB array (a traceback where that failed; where overcommit let it
    through, the host's memory as it filled): the count is capped, refused before anything is read."""
    data, _ = dataset
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("")
    done = _run(["score", "--bench", "vstat", "--data", str(data), "--predictions", str(predictions),
                 "--bootstrap", "1000000000"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "100000" in done.stderr, done.stderr[-2000:]
    assert done.max_rss_mb < MAX_RSS_MB


def test_a_run_too_large_to_plan_is_one_line_before_its_plan_is_made(tmp_path, dataset):
    """`run --epochs 1000000000` built its plan in memory (~1.3 KB an attempt) until a MemoryError traceback (found by
    probe): the plan's size is judged first, and `--epochs 0` is refused as the nonsense it is."""
    data, videos = dataset
    args = ["run", "--agent", "oracle", "--bench", "vstat", "--data", str(data), "--videos", str(videos)]
    line = _one_line(_run(args + ["--epochs", "1000000000", "--run-dir", str(tmp_path / "run")], tmp_path),
                     "3,000,000,000 attempts", "at most 1,000,000")
    assert "Traceback" not in line and not (tmp_path / "run" / "results.sqlite").exists()
    done = _run(args + ["--epochs", "0", "--run-dir", str(tmp_path / "run0")], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "--epochs" in done.stderr, done.stderr[-2000:]
