"""The scorer's fast paths give exactly what the plain ones give.

`statebox score` reads JSONL with orjson in blocks, places VCBench responses by flat position
instead of an (id, index) dictionary, parses each distinct response once and draws the
bootstrap's resamples a chunk at a time: each is held here against the plain reading it replaced
(json.loads per line, `match` + the dictionary, one parse per response, one resample per draw).
"""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from statebox.datafiles import iter_jsonl, read_json, read_json_or_jsonl
from statebox.errors import DataError
from statebox.schema import Item, Query
from statebox.scoring import stats
from statebox.scoring.predictions import load_predictions, match, match_responses
from statebox.scoring.report import score_predictions
from statebox.scoring.rules import vcbench
from statebox.scoring.parsing import vcbench_number
from statebox.userfiles import iter_line_batches, iter_lines, read_upto

# Lines where orjson and json disagree or refuse, and lines json refuses: every one must read as
# json.loads reads it (or fail with json's message).
TRICKY = [
    '{"id": "a", "x": NaN, "y": Infinity}',
    '{"id": "a", "x": 1e400}',
    '{"id": "a", "big": 123456789012345678901234567890}',
    '{"id": "a", "big": -18446744073709551617, "ok": 9223372036854775807}',
    '{"id": "a", "s": "\\ud800 lone surrogate"}',
    '{"id": "a", "dup": 1, "dup": 2}',
    '{"id": "a", "f": 0.1, "g": 1.7976931348623157e308, "h": 5e-324, "i": -0.0}',
    '{"id": "a", "u": "caf\u00e9 \u2603 \U0001f600"}',
    '   ',
    '\u00a0',
    '{"id": "a"}\r',
]


def _plain_rows(text: str) -> list[tuple[int, dict]]:
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removeprefix("\ufeff") if number == 1 else line
        if line.strip():
            rows.append((number, json.loads(line)))
    return rows


def _same(a: object, b: object) -> bool:
    """Equal values of equal types (1 and 1.0 differ; NaN equals NaN)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr) \
        and type(a) is type(b)


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 5000])
@pytest.mark.parametrize("reported", ["true", "smaller", "zero"])
def test_a_read_asked_the_files_size_first_is_one_read_of_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    size: int, reported: str) -> None:
    """read_upto against handle.read(limit), also where the size asked is behind the file (it grew since)."""
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    if reported != "true":
        real_fstat = os.fstat
        monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result(
            (*real_fstat(fd)[:6], size // 2 if reported == "smaller" else 0, *real_fstat(fd)[7:])))
    for limit in (1, 1000, 1001, 1_000_000):
        with path.open("rb") as a, path.open("rb") as b:
            assert read_upto(a, limit) == b.read(limit), limit
    assert read_upto(io.BytesIO(b"abc"), 2) == b"ab"  # no file of the OS: the one read


def test_jsonl_rows_are_json_loads_rows(tmp_path: Path) -> None:
    text = "\ufeff" + "\n".join(TRICKY) + "\n"
    path = tmp_path / "tricky.jsonl"
    path.write_text(text, encoding="utf-8")
    got = list(iter_jsonl(path))
    want = _plain_rows(text)
    assert [n for n, _ in got] == [n for n, _ in want]
    for (_, a), (_, b) in zip(got, want):
        assert _same(a, b), (a, b)
        for key in a:
            assert type(a[key]) is type(b[key]), key  # a 30-digit integer stays an int
    assert read_json_or_jsonl(path) == [(n, r) for n, r in got]


def test_whole_json_file_is_json_loads(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text("\ufeff" + '{"data": [{"n": 123456789012345678901, "m": 1.5}]}', encoding="utf-8")
    value = read_json(path)
    assert value["data"][0]["n"] == 123456789012345678901 and type(value["data"][0]["n"]) is int
    path.write_text('{"x": NaN, "y": [1e400]}', encoding="utf-8")
    value = read_json(path)
    assert value["x"] != value["x"] and value["y"] == [float("inf")]


@pytest.mark.parametrize("line", ['{"id": "a", "response": }', '{"id": "a"', '[1, 2', '{"id": "a"} x'])
def test_a_broken_line_names_file_line_and_json_s_reason(tmp_path: Path, line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "response": "1"}\n\n' + line + "\n", encoding="utf-8")
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        reason = f"not valid JSON ({exc.msg} at column {exc.colno})"
    with pytest.raises(DataError) as caught:
        load_predictions(path)
    assert str(caught.value) == f"{path}:3: {reason}"


def test_invalid_utf8_and_non_objects_are_refused_by_line(tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b'{"id": "a", "response": "1"}\n{"id": "b", "response": "\xff"}\n')
    with pytest.raises(DataError, match=r":2: not UTF-8 text"):
        load_predictions(path)
    path.write_text('{"id": "a", "response": "1"}\n[1]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r":2: expected a JSON object, got array"):
        load_predictions(path)


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 20])
def test_line_batches_are_iter_lines_with_its_caps(tmp_path: Path, block: int) -> None:
    path = tmp_path / "lines.txt"
    rng = random.Random(block)
    body = b"".join(bytes(rng.choice(b"ab\r ") for _ in range(rng.randint(0, 12))) + b"\n" for _ in range(60))
    for content in (body, body + b"tail without newline", b"", b"\n\n"):
        path.write_bytes(content)
        batched = [(first + k, line) for first, lines in iter_line_batches(path, block_bytes=block)
                   for k, line in enumerate(lines)]
        plain = [(n, line.rstrip("\n").encode()) for n, line in iter_lines(path)]
        assert batched == plain
    # a line past the cap: refused at its number, after the lines before it were handed out
    path.write_bytes(b"short\n" + b"x" * 20 + b"\nafter\n")
    seen: list[bytes] = []
    with pytest.raises(DataError, match=r":2: line longer than the 16 bytes limit"):
        for _, lines in iter_line_batches(path, max_line_bytes=16, block_bytes=block):
            seen.extend(lines)
    assert seen == [b"short"]
    with pytest.raises(DataError, match=r":2: line longer than the 16 bytes limit"):
        list(iter_lines(path, max_line_bytes=16))
    # exactly at the cap (15 bytes + its newline) passes in both
    path.write_bytes(b"y" * 15 + b"\n" + b"z" * 16)
    assert [line for _, lines in iter_line_batches(path, max_line_bytes=16, block_bytes=block) for line in lines] \
        == [b"y" * 15, b"z" * 16]
    assert len(list(iter_lines(path, max_line_bytes=16))) == 2


def _items(n: int, rng: random.Random, *, shuffled_index: bool = False) -> list[Item]:
    items = []
    for k in range(n):
        points = rng.randint(1, 4)
        indexes = list(range(points))
        if shuffled_index:
            indexes = [i * 10 for i in indexes]
        queries = [Query(index=i, time=float(i), target=rng.randint(0, 9)) for i in indexes]
        items.append(Item(id=f"q{k}", benchmark="vcbench", video=f"v{k // 2}.mp4", question="How many?",
                          answer_type="number", target=queries[-1].target, queries=queries,
                          labels={"counting_subtype": rng.choice(["O1-Snap", "O2-Unique", "E1-Action", "O1-Delta"])}))
    return items


def _lines(items: list[Item], rng: random.Random, *, noise: bool) -> list[dict]:
    lines = []
    for item in items:
        for position, query in enumerate(item.queries):
            if rng.random() < 0.1:
                continue
            response = rng.choice([str(query.target), str(query.target + 1), "about 3", "no idea", "", "٣"])
            lines.append({"id": item.id, "query_index": position, "response": response})
    rng.shuffle(lines)
    if noise:
        lines.append({"id": "ghost", "query_index": 0, "response": "1"})
        lines.append({"id": items[0].id, "query_index": 99, "response": "1"})
    lines.extend(lines[:5])  # duplicates: the last wins
    lines.append({**lines[0], "response": "7"})
    return lines


@pytest.mark.parametrize("case", ["plain", "noise", "non-positional indexes", "repeated id"])
def test_flat_matching_is_dictionary_matching(case: str) -> None:
    rng = random.Random(case)
    items = _items(300, rng, shuffled_index=case == "non-positional indexes")
    if case == "repeated id":
        items.append(items[3].model_copy())
    lines = _lines(items, rng, noise=case == "noise")
    responses, warnings = match_responses(items, lines)
    answers, want_warnings = match(items, lines)
    keys = [(item.id, q.index) for item in items for q in item.queries]
    assert responses == [answers[k].response if k in answers else None for k in keys]
    assert warnings == want_warnings
    flat = vcbench.score_responses(items, responses)
    table = vcbench.score_table(items, answers)
    for name in table.values:
        np.testing.assert_array_equal(flat.values[name], table.values[name])
    assert (flat.missing, flat.parse_failures) == (table.missing, table.parse_failures)


def test_each_distinct_response_parsed_once_is_each_parsed() -> None:
    texts = ["3", "007", " 12 ", "There are 4 of them.", "1,234 apples", "twenty-one", "3.5", "-2", "٣", "",
             "no idea", "9" * 15, "9" * 16, None]
    want = np.array([np.nan if t is None or vcbench_number(t) is None else float(vcbench_number(t)) for t in texts])
    repeated = vcbench.parse_many(texts * 8)  # few distinct texts: parsed once each
    distinct = vcbench.parse_many(texts + [f"{k} items" for k in range(100)])  # mostly distinct: numpy path
    np.testing.assert_array_equal(repeated, np.tile(want, 8))
    np.testing.assert_array_equal(distinct[:len(texts)], want)


@pytest.mark.parametrize("n_boot", [1, 31, 32, 33, 100])
def test_chunked_bootstrap_is_one_resample_at_a_time(n_boot: int) -> None:
    """The same seeded multinomial stream, drawn one replicate at a time and averaged plainly."""
    rng = np.random.default_rng(3)
    values = rng.random((400, 3))
    values[rng.random((400, 3)) < 0.2] = np.nan
    codes = rng.integers(0, 57, 400)
    stats._WEIGHTS.clear()
    got = stats.bootstrap_means(values, codes, n_boot=n_boot, seed=11)
    draw = np.random.default_rng(11)
    n_clusters = int(codes.max()) + 1
    for b in range(n_boot):
        weights = draw.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters))[codes]
        for j in range(values.shape[1]):
            counted = ~np.isnan(values[:, j])
            total = float(np.sum(weights[counted] * values[counted, j]))
            count = float(np.sum(weights[counted]))
            want = total / count if count else np.nan
            assert got[b, j] == pytest.approx(want, abs=1e-12, nan_ok=True), (b, j)


def test_report_of_a_file_is_the_report_of_its_dicts(tmp_path: Path) -> None:
    """`statebox score`'s path (file -> lines -> flat matching) and the dict path give one report."""
    rng = random.Random(5)
    items = _items(200, rng)
    lines = _lines(items, rng, noise=True)
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    from_file = score_predictions("vcbench", items, load_predictions(path), n_boot=50)
    dicts = [{**line} for line in lines]
    from_dicts = score_predictions("vcbench", items, dicts, n_boot=50)
    assert from_file.model_dump_json() == from_dicts.model_dump_json()
