"""An Inspect log someone hands `statebox audit` may be crafted to take the auditor's machine down.

An `.eval` is a zip, and inspect_ai reads it with the standard library's zipfile (on a handle statebox
opened: `inspect_logs.read_inspect_log`). What a crafted one did before it was admitted by
`statebox/audits/inspect_admission.py` (measured with this module's `_read_in_child`, peak RSS over the
process's after imports):

- an entry's declared size bounded nothing: zipfile decompresses one `read()` in one call (deflate up to
  1 GiB, zstandard, what inspect_ai writes, without any limit) and only then cuts it to the declared size.
  A 122 KB zstd entry declaring 10 bytes took 3.9 GB and 2.8 s; a 194 KB deflate entry declaring 10
  bytes 200 MB of zeros, +380 MB;
- zipfile builds the whole central directory before anyone looks at it: 3,000,000 entries (a 274 MB file,
  under the 2 GiB file cap) took 20 s and ~1.2 GB before inspect_ai found no header;
- inspect_ai expands each model event's `input_refs` (ranges into the sample's message pool) into a list
  of its own: a 491 KB `.json` log (100 events x 100 refs to a 10,000-message pool) took +780 MB, and the
  same shape a few MB larger any machine's memory; an `attachment://` reference in the messages is
  resolved in place, and statebox reads each copy: 1.7 MB of JSON (5,000 references to one 100 KB
  attachment) took 1 GB and 6.5 s to judge;
- and a folder with one such file among good logs, audited with `--jobs 2`, ended in a BrokenProcessPool
  traceback (exit 1): the worker's DataError could not be unpickled in the parent.

Each test builds the hostile file with zipfile or by hand (`_raw_zip`: any declared size, method, CRC,
offset), small and fast: a bomb of 200 MB of zeros is ~200 KB of deflate, a cap is lowered where the
test would otherwise need gigabytes.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from statebox.audits import inspect_logs
from statebox.errors import DataError, UserError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from test_external_formats import _cli, inspect_log  # noqa: E402  (the Inspect logs every audit test uses)

MB = 1024 * 1024
BOMB = 200 * 1000 * 1000  # bytes of zeros: ~194 KB as deflate, ~6 KB as zstd
# a hang guard, not a speed figure: what these logs did before ran for minutes (the memory bounds are the check)
HANG_S = 60
ZSTD = 93  # the zip method inspect_ai writes (zipfile_zstd's number)


def _admission() -> Any:
    """statebox/audits/inspect_admission.py (absent before it was written: the tests then show what happened)."""
    import importlib

    try:
        return importlib.import_module("statebox.audits.inspect_admission")
    except ImportError:
        return None


# ---------------------------------------------------------------- hostile zips, byte by byte


def _zeros(n: int, method: int) -> bytes:
    """`n` zero bytes compressed as `method` (8 deflate, 93 zstd), without holding them."""
    if method == ZSTD:
        import zstandard

        packer: Any = zstandard.ZstdCompressor(level=3).compressobj()
    else:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk, out, left = b"\0" * MB, [], n
    while left > 0:
        out.append(packer.compress(chunk[:min(MB, left)]))
        left -= MB
    out.append(packer.flush())
    return b"".join(out)


def _entry(name: str, raw: bytes, *, method: int = 0, size: int | None = None, crc: int | None = None,
           flags: int = 0, offset: int | None = None, data: bytes | None = None) -> dict[str, Any]:
    """One entry of `_raw_zip`: `raw` is what lies in the file; `size` and `crc` what the directory declares
    (by default the truth about `data`, or `raw` when stored); `offset` points its directory record elsewhere."""
    data = raw if data is None else data
    return {"name": name, "raw": raw, "method": method, "size": len(data) if size is None else size,
            "crc": zlib.crc32(data) if crc is None else crc, "flags": flags, "offset": offset}


def _raw_zip(path: Path, entries: list[dict[str, Any]], *, count: int | None = None) -> Path:
    """A classic zip (no zip64) as the entries say, true or not; `count`: what the end record claims."""
    body, directory, offsets = bytearray(), bytearray(), []
    for e in entries:
        name = e["name"].encode()
        offsets.append(len(body))
        body += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, e["flags"], e["method"], 0, 0, e["crc"],
                            len(e["raw"]), e["size"], len(name), 0) + name + e["raw"]
    for e, own in zip(entries, offsets):
        name = e["name"].encode()
        where = own if e["offset"] is None else e["offset"]
        directory += struct.pack("<4s4B4HL2L5HLL", b"PK\x01\x02", 20, 0, 20, 0, e["flags"], e["method"], 0, 0, e["crc"],
                                 len(e["raw"]), e["size"], len(name), 0, 0, 0, 0, 0, where) + name
    n = min(len(entries) if count is None else count, 0xFFFF)
    path.write_bytes(bytes(body + directory + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(directory), len(body), 0)))
    return path


def _header() -> bytes:
    """A header.json inspect_ai reads without complaint (a real log's)."""
    return json.dumps({"version": 2, "status": "success", "eval": {
        "created": "2026-01-01T00:00:00+00:00", "task": "t", "dataset": {"name": "d"}, "model": "mockllm/model",
        "config": {}}}).encode()


_CHILD = r"""
import json, sys, time
from pathlib import Path
from statebox.audits import inspect_logs
try:
    from statebox.audits import inspect_admission
except ImportError:
    inspect_admission = None
for name, value in json.loads(sys.argv[2]).items():
    setattr(inspect_admission or inspect_logs, name, value)
inspect_logs._inspect_reader()


def peak_kb():
    # this process's own peak (VmHWM): ru_maxrss starts at the peak of the process that started it (Linux
    # carries it over exec), so after a worker that held 1 GB every read here would have "grown" by nothing
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0])


before = peak_kb()
start = time.perf_counter()
error = None
try:
    inspect_logs.read_inspect_log(Path(sys.argv[1]))
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"error": error, "grew_mb": (peak_kb() - before) / 1024, "seconds": time.perf_counter() - start}))
"""


def _read_in_child(path: Path, **caps: int) -> dict[str, Any]:
    """`read_inspect_log(path)` in a fresh process (its peak memory is its own): the error it gave, the MB its
    peak resident memory grew by while reading, the seconds; `caps` set on the admission module first."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), json.dumps(caps)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


# ---------------------------------------------------------------- an entry's declared size is a claim


@pytest.mark.parametrize("method", [8, ZSTD], ids=["deflate", "zstd"])
def test_an_entry_declaring_less_than_it_decompresses_to_is_refused_before_inspect_reads_it(tmp_path, method):
    raw = _zeros(BOMB, method)
    lie = _raw_zip(tmp_path / "lie.eval", [_entry("header.json", raw, method=method, size=10, data=b"\0" * 10)])
    got = _read_in_child(lie)
    assert got["error"] is not None and got["error"].startswith("DataError: ")
    assert str(lie) in got["error"] and "header.json" in got["error"] and "more than the 10 bytes it declares" in got["error"]
    assert got["grew_mb"] < 64, got  # was 200+ MB for deflate; 3.9 GB for a 122 KB zstd entry of 4 GB


def test_an_entry_declaring_more_than_it_holds_or_a_wrong_crc_is_refused(tmp_path):
    short = _raw_zip(tmp_path / "short.eval", [_entry("header.json", _header(), size=len(_header()) + 100)])
    with pytest.raises(DataError, match=r"short\.eval: .*header\.json.* (holds|declares)"):
        inspect_logs.read_inspect_log(short)
    packed = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = packed.compress(_header()) + packed.flush()
    bad_crc = _raw_zip(tmp_path / "crc.eval", [_entry("header.json", raw, method=8, data=_header(), crc=12345)])
    with pytest.raises(DataError, match=r"crc\.eval: .*header\.json.*CRC"):
        inspect_logs.read_inspect_log(bad_crc)


def test_an_entry_name_the_error_line_quotes_cannot_break_it(tmp_path):
    name = "samples/a\nstatebox: all clean\x1b[2K.json"
    path = _raw_zip(tmp_path / "named.eval", [_entry("header.json", _header()), _entry(name, b"{}", crc=1)])
    with pytest.raises(DataError) as caught:
        inspect_logs.read_inspect_log(path)
    assert len(str(caught.value).splitlines()) == 1 and "\x1b" not in str(caught.value) and "CRC" in str(caught.value)


def test_a_bomb_of_true_sizes_over_the_budget_is_refused_before_anything_is_decompressed(tmp_path):
    # 200 MB of zeros said honestly: under the 1 GiB budget it costs what a 200 MB log costs; over it
    # (the budget lowered to 16 MiB for the test) nothing is decompressed
    bomb = _raw_zip(tmp_path / "bomb.eval", [_entry("header.json", _header()),
                                             _entry("samples/1_epoch_1.json", _zeros(BOMB, 8), method=8, size=BOMB,
                                                    crc=0)])
    got = _read_in_child(bomb, MAX_INSPECT_JSON_BYTES=16 * MB)
    assert got["error"] is not None and str(bomb) in got["error"] and "16777216" in got["error"], got
    assert got["grew_mb"] < 16 and got["seconds"] < HANG_S, got


def test_the_same_data_listed_twice_is_refused_as_overlapping_entries(tmp_path):
    # the "overlapping files" bomb: many directory records, one compressed kernel; each would be
    # decompressed again (and counted once per record against the budget, but refused outright here)
    packed = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = packed.compress(_header()) + packed.flush()
    path = _raw_zip(tmp_path / "overlap.eval", [_entry("header.json", raw, method=8, data=_header()),
                                                _entry("header.json", raw, method=8, data=_header(), offset=0)])
    with pytest.raises(DataError, match=r"overlap\.eval: .*overlap"):
        inspect_logs.read_inspect_log(path)


def test_an_entry_running_past_its_space_is_refused(tmp_path):
    path = tmp_path / "past.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", _header())
    data = bytearray(path.read_bytes())
    cd = data.find(b"PK\x01\x02")
    struct.pack_into("<L", data, cd + 20, len(_header()) + 5000)  # compressed size past the directory
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"past\.eval: .*header\.json.*past"):
        inspect_logs.read_inspect_log(path)


# ---------------------------------------------------------------- the directory itself


def test_too_many_entries_are_refused_before_zipfile_builds_them(tmp_path, monkeypatch):
    admission = _admission()
    assert admission is not None
    monkeypatch.setattr(admission, "MAX_INSPECT_ENTRIES", 100)
    entries = [_entry("header.json", _header())] + [_entry(f"_journal/summaries/{n}.json", b"[]") for n in range(100)]
    many = _raw_zip(tmp_path / "many.eval", entries)
    with pytest.raises(DataError, match=r"many\.eval: more than 100 entries"):
        inspect_logs.read_inspect_log(many)
    # the end record's count is a claim too: the directory's records are what is counted
    lying = _raw_zip(tmp_path / "lying.eval", entries, count=1)
    with pytest.raises(DataError, match=r"lying\.eval: more than 100 entries"):
        inspect_logs.read_inspect_log(lying)
    monkeypatch.setattr(admission, "MAX_INSPECT_DIRECTORY_BYTES", 1000)
    with pytest.raises(DataError, match=r"many\.eval: a central directory of \d+ bytes"):
        inspect_logs.read_inspect_log(many)


def test_many_entries_cost_little_before_they_are_refused(tmp_path):
    # 400,000 empty entries (a 36 MB file): zipfile alone took ~2 s and ~250 MB to build them
    path = _raw_zip(tmp_path / "crowd.eval", [_entry(f"s{n}", b"") for n in range(400_000)])
    got = _read_in_child(path)
    assert got["error"] is not None and "more than 250000 entries" in got["error"], got
    assert got["grew_mb"] < 64 and got["seconds"] < HANG_S, got


@pytest.mark.parametrize("name", ["../../outside.json", "/etc/passwd", "samples/../../x.json", "..\\x.json", "C:/x.json"])
def test_entry_names_that_would_escape_an_extraction_are_refused(tmp_path, name):
    path = _raw_zip(tmp_path / "names.eval", [_entry("header.json", _header()), _entry(name, b"{}")])
    with pytest.raises(DataError, match=r"names\.eval: .*entry name"):
        inspect_logs.read_inspect_log(path)


def test_methods_inspect_never_writes_and_encrypted_entries_are_refused(tmp_path):
    path = tmp_path / "bz.eval"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as zf:  # bzip2, like lzma, decompresses unbounded
        zf.writestr("header.json", _header())
    with pytest.raises(DataError, match=r"bz\.eval: .*header\.json.*compression method 12"):
        inspect_logs.read_inspect_log(path)
    locked = _raw_zip(tmp_path / "locked.eval", [_entry("header.json", _header(), flags=1)])
    with pytest.raises(DataError, match=r"locked\.eval: .*header\.json.*encrypted"):
        inspect_logs.read_inspect_log(locked)
    junk = tmp_path / "junk.eval"
    junk.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(DataError, match=r"junk\.eval: not a readable Inspect log"):
        inspect_logs.read_inspect_log(junk)


# ---------------------------------------------------------------- references inside the JSON


def _pool_bomb(path: Path, pool: int, refs: int, events: int) -> Path:
    """A sample whose `events` model events each list `refs` ranges over a pool of `pool` messages: inspect_ai
    builds `events * refs * pool` list slots from ~14 bytes a range."""
    log = json.loads(inspect_log(path.with_name("base.json"), {"a": False}).read_text())
    sample = log["samples"][0]
    event = {"event": "model", "timestamp": "2026-01-01T00:00:00+00:00", "model": "m/m", "input": [], "tools": [],
             "tool_choice": "auto", "config": {}, "output": {"model": "m/m", "choices": []},
             "input_refs": [[0, pool]] * refs}
    sample["events"] = [event] * events
    sample["events_data"] = {"messages": [{"role": "user", "content": ""}] * pool, "calls": []}
    if path.suffix == ".json":
        path.write_text(json.dumps(log))
    else:
        header = {k: v for k, v in log.items() if k != "samples"}
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("header.json", json.dumps(header))
            zf.writestr("samples/a_epoch_1.json", json.dumps(sample))
    return path


@pytest.mark.parametrize("suffix", [".json", ".eval"])
def test_message_pool_references_expanding_past_the_cap_are_refused(tmp_path, suffix):
    # 200 events x 1,000 ranges over 2,000 messages: 4e8 list slots (3.2 GB) from a ~3 MB log
    path = _pool_bomb(tmp_path / f"pool{suffix}", pool=2_000, refs=1_000, events=200)
    got = _read_in_child(path)
    assert got["error"] is not None and str(path) in got["error"] and "message pool" in got["error"], got
    assert got["grew_mb"] < 200 and got["seconds"] < HANG_S, got


def test_a_pool_within_the_cap_reads_as_inspect_reads_it(tmp_path):
    path = _pool_bomb(tmp_path / "fine.json", pool=20, refs=2, events=5)
    log = inspect_logs.read_inspect_log(path)
    assert [len(e.input) for e in log.samples[0].events] == [40] * 5


def test_attachment_references_in_the_messages_count_as_the_text_they_stand_for(tmp_path, monkeypatch):
    log = json.loads(inspect_log(tmp_path / "base.json", {"a": False}).read_text())
    sample = log["samples"][0]
    ref = "attachment://" + "0" * 32
    sample["attachments"] = {"0" * 32: "ls -la /data " * 8_000}  # 104 KB
    sample["messages"] += [{"role": "tool", "tool_call_id": "c1", "function": "bash", "content": ref}] * 20_000
    path = tmp_path / "copies.json"
    path.write_text(json.dumps(log))  # 1.3 MB standing for 2 GB of tool output
    with pytest.raises(DataError, match=r"copies\.json: .*attachment"):
        inspect_logs.read_inspect_log(path)


# ---------------------------------------------------------------- the .json log, and logs Inspect wrote


def test_a_json_log_over_the_budget_is_refused_by_its_size(tmp_path, monkeypatch):
    admission = _admission()
    assert admission is not None
    path = inspect_log(tmp_path / "big.json", {"a": False, "b": True})
    monkeypatch.setattr(admission, "MAX_INSPECT_JSON_BYTES", path.stat().st_size - 1)
    with pytest.raises(UserError, match=rf"big\.json: {path.stat().st_size} bytes of JSON, over the {path.stat().st_size - 1}"):
        inspect_logs.read_inspect_log(path)
    monkeypatch.setattr(admission, "MAX_INSPECT_JSON_BYTES", path.stat().st_size)
    assert len(inspect_logs.read_inspect_log(path).samples) == 2


@pytest.fixture(scope="module")
def eval_run_log(tmp_path_factory) -> Path:
    """A log written the way an eval writes one (inspect_ai's recorder, mockllm: journal, summaries, zstd)."""
    from inspect_ai import Task, eval as run_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    folder = tmp_path_factory.mktemp("eval-run")
    logs = run_eval(Task(dataset=[Sample(input=f"q{n}", target="x", id=f"s{n}") for n in range(3)], solver=generate(),
                         scorer=match()), model="mockllm/model", log_dir=str(folder), display="none", epochs=2)
    return Path(logs[0].location)


def test_logs_inspect_writes_are_admitted_whole(tmp_path, eval_run_log):
    log = inspect_logs.read_inspect_log(eval_run_log)
    assert sorted((s.id, s.epoch) for s in log.samples or []) == [(f"s{n}", e) for n in range(3) for e in (1, 2)]
    written = inspect_log(tmp_path / "w.eval", {"a": False, "b": True}, epochs=2)
    assert len(inspect_logs.read_inspect_log(written).samples or []) == 4


# ---------------------------------------------------------------- a folder with one hostile log among good ones


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_folder_with_one_hostile_log_stops_with_one_line_naming_it(tmp_path, jobs):
    folder = tmp_path / "logs"
    for name in ("a", "c", "d"):
        inspect_log(folder / f"{name}.eval", {name: False})
    hostile = _raw_zip(folder / "b.eval", [_entry("header.json", _zeros(BOMB, ZSTD), method=ZSTD, size=10,
                                                  data=b"\0" * 10)])
    page = tmp_path / "audit.html"
    proc = _cli("audit", str(folder), "--json", "--jobs", jobs, "--html", str(page))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and str(hostile) in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == "" and not page.exists()
    proc = _cli("audit", str(hostile), "--write-scores", str(tmp_path / "scored.eval"))
    assert proc.returncode == 2 and str(hostile) in proc.stderr and not (tmp_path / "scored.eval").exists()
