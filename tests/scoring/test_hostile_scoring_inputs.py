"""`statebox score` on answers and annotation files written to break it.

A predictions file holds what the agent answered, so the agent writes its values; an annotation file is a user's.
A fuzz of both (~150,000 runs, every value set to another JSON type, bytes broken) found thirteen tracebacks and one
silent wrong score, each a test here that failed on the old code:

- a response of a number too long to be one ("1" x 400 or x 5,000): `int()` refuses past 4,300 digits, a float
  overflows past ~300, a square or ratio of it before that; in every benchmark's parser and metric;
- a lone surrogate in a VCBench response (numpy's strings cannot hold one);
- an EC-Bench answer of JSON nested too deep (RecursionError);
- a count of 2^70 in a VCBench or CP-Bench annotation, a VSTAT answer of 400 digits: a traceback later on;
- an EOC-Bench open-ended answer of 400 digits: the target was `inf`, and every answer scored right, exit 0;
- an id holding a lone surrogate: the warning naming it raised after the table was printed;
- an EC-Bench answer of 100,000 items: 21 s for one row with the fuzzy judge (now ~1 s, the same matches).
"""

from __future__ import annotations

import difflib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statebox.cli import app
from statebox.errors import UserError
from statebox.scoring import judge as judge_module
from statebox.scoring.judge import MATCH_THRESHOLD, FuzzyJudge, split_items
from statebox.scoring.parsing import cpbench_count, ecbench_answer_and_clips, ecbench_normalize, vcbench_number, vstat_integer

REPO = Path(__file__).resolve().parents[2]
LONG = ["1" * 5000, "1" * 400, "1" * 16, "-" + "9" * 300]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(*args: str) -> tuple[int, str]:
    """(exit code, output) of `statebox score`; a UserError as the command line reports it (its line, exit 2)."""
    done = CliRunner().invoke(app, ["score", "--bootstrap", "0", "--json", *args])
    if isinstance(done.exception, UserError):
        return 2, str(done.exception)
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return done.exit_code, done.output


def _cpbench(tmp_path: Path, count: object = 3) -> Path:
    return _jsonl(tmp_path / "cp.jsonl", [{"id": f"cp{i}", "video": f"v{i}.mp4", "count": count if i == 0 else 3 + i,
                                           "setting": "main"} for i in range(5)])


def _vstat(tmp_path: Path, answer: str = "1") -> Path:
    rows = [{"source_task": "count_task", "video_id": f"v{i}", "video_path": f"v{i}.mp4", "question": "how many?",
             "answer": answer if i == 0 else str(i + 1), "choices": [], "answer_index": None} for i in range(5)]
    path = tmp_path / "vstat.json"
    path.write_text(json.dumps({"data": {"count_task": rows}}))
    return path


def _vcbench(tmp_path: Path, count: object = 2) -> Path:
    return _jsonl(tmp_path / "vc.jsonl", [
        {"q_id": f"q{i}", "query_index": 0, "id": f"{i:04d}", "source_dataset": "s", "video_path": f"v{i}.mp4",
         "question": "How many?", "counting_type": "O1", "counting_subtype": "O1-Snap", "query_time": 1.0,
         "count": count if i == 0 else i} for i in range(5)])


@pytest.mark.parametrize("text", LONG)
def test_a_number_too_long_to_be_an_answer_is_no_number(text: str) -> None:
    assert vstat_integer(f"The answer is {text}") is None
    assert vcbench_number(text) is None and vcbench_number(f"I count {text}.") is None
    assert vcbench_number(f"I count {text}.5") is None
    assert cpbench_count(f"{text} cubes") is None


def test_numbers_an_answer_can_be_read_as_before() -> None:
    assert vstat_integer("7.0") == 0 and vstat_integer("-12") == -12 and vstat_integer("9" * 15) == int("9" * 15)
    assert vcbench_number(" 42 ") == 42 and vcbench_number("about 3.5") == 3.5 and vcbench_number("1,234 items") == 1234
    assert vcbench_number("0" * 30 + "7") == 7  # leading zeros are no digits of its size
    assert cpbench_count("5.0") == 5 and cpbench_count("seven") == 7
    assert ecbench_normalize("3, 1, 03") == "1, 3"


def test_ecbench_reads_what_int_cannot_and_json_nested_too_deep() -> None:
    assert ecbench_normalize("1" * 5000) == "1" * 5000
    assert ecbench_normalize("0" * 10 + "1" * 5000 + " and 2") == "2, " + "1" * 5000
    assert ecbench_answer_and_clips('{"answer": ' + "[" * 5000 + "]" * 5000 + "}") is None


@pytest.mark.parametrize("bench", ["cpbench", "vstat", "vcbench"])
def test_responses_too_long_or_not_text_score_as_wrong(tmp_path: Path, bench: str) -> None:
    bad = LONG + ["\ud800x"]
    if bench == "cpbench":
        data = _cpbench(tmp_path)
        preds = [{"id": f"cp{i}", "response": bad[i] if i < len(bad) else str(3 + i)} for i in range(5)]
    elif bench == "vstat":
        data = _vstat(tmp_path)
        preds = [{"id": f"count_task:{i}", "response": bad[i] if i < len(bad) else str(i + 1)} for i in range(5)]
    else:
        data = _vcbench(tmp_path)
        preds = [{"id": f"{i:04d}", "query_index": 0, "response": bad[i] if i < len(bad) else str(i)} for i in range(5)]
    code, out = _score("--bench", bench, "--data", str(data), "--predictions", str(_jsonl(tmp_path / "p.jsonl", preds)))
    assert code == 0, out
    report = json.loads(out)
    first = {"cpbench": "accuracy", "vstat": "numeric_mra", "vcbench": "exact_match"}[bench]
    metrics = report["metrics"]
    assert metrics[first] == pytest.approx(0.0), metrics  # the first five are wrong (the fifth: a lone surrogate)


@pytest.mark.parametrize("bench, build, what", [
    ("cpbench", lambda p: _cpbench(p, 2**70), "field 'count' must be a finite number under 10^15"),
    ("vcbench", lambda p: _vcbench(p, 2**70), "field 'count' must be a finite number under 10^15"),
    ("vcbench", lambda p: _vcbench(p, 1e200), "field 'count' must be a finite number under 10^15"),
    ("vstat", lambda p: _vstat(p, "1" * 400), "field 'answer' must be a finite number under 10^15"),
    ("vstat", lambda p: _vstat(p, "1" * 5000), "field 'answer' must be a finite number under 10^15, got 5000 digits"),
])
def test_an_annotation_number_too_large_is_one_line_exit_2(tmp_path: Path, bench: str, build, what: str) -> None:
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "x", "response": "1"}])
    code, out = _score("--bench", bench, "--data", str(build(tmp_path)), "--predictions", str(preds))
    assert code == 2 and what in out, out


def test_an_eocbench_target_of_400_digits_is_refused_not_scored_right_for_every_answer(tmp_path: Path) -> None:
    row = {"idx": 0, "video_path": "v0.mp4", "question": "How long ago?", "choices": {}, "answer": ["1" * 400],
           "choice_type": "open-ended", "video_source": "ego4d", "video_type": "Absolute Time Perception"}
    data = _jsonl(tmp_path / "eoc.jsonl", [row])
    code, out = _score("--bench", "eocbench", "--data", str(data), "--predictions",
                       str(_jsonl(tmp_path / "p.jsonl", [{"id": 0, "response": "I have no idea, 5"}])))
    assert code == 2 and "open-ended answer must be a finite number under 10^15, got inf" in out, out


def test_an_id_holding_a_lone_surrogate_or_markup_is_shown_escaped(tmp_path: Path) -> None:
    data = _cpbench(tmp_path)
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "cp0", "response": "3"}, {"id": "\ud800", "response": "1"},
                                          {"id": "[link=http://x]y[/link]", "response": "1"}])
    done = subprocess.run([sys.executable, "-m", "statebox.cli", "score", "--bench", "cpbench", "--data", str(data),
                           "--predictions", str(preds), "--bootstrap", "0"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "unknown ids" in done.stdout and ("\\ud800" in done.stdout or "[link=http://x]" in done.stdout)


def _old_similar(a: str, b: str) -> float:
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    wa, wb = set(a.split()), set(b.split())
    if wa and wb and (wa <= wb or wb <= wa):
        return 0.9
    return difflib.SequenceMatcher(None, a, b).ratio()


def _old_fuzzy(true_answer: str, generated: str) -> tuple[list[str], list[str], list[str]]:
    """The fuzzy judge as it was before it bounded its work: every pair compared, then sorted, then matched."""
    truth, predicted = split_items(true_answer), split_items(generated)
    norm_truth = [judge_module._normal(t) for t in truth]
    pairs = sorted(((_old_similar(judge_module._normal(p), nt), i, j) for i, p in enumerate(predicted)
                    for j, nt in enumerate(norm_truth)), key=lambda x: (-x[0], x[1], x[2]))
    used_p: set[int] = set()
    used_t: set[int] = set()
    for score, i, j in pairs:
        if score < MATCH_THRESHOLD:
            break
        if i not in used_p and j not in used_t:
            used_p.add(i)
            used_t.add(j)
    matched = {judge_module._normal(predicted[k]) for k in used_p}
    duplicates = {i for i, p in enumerate(predicted) if i not in used_p and judge_module._normal(p) in matched}
    return ([predicted[i] for i in sorted(used_p)], [predicted[i] for i in range(len(predicted))
                                                     if i not in used_p and i not in duplicates],
            [truth[j] for j in range(len(truth)) if j not in used_t])


def test_the_fuzzy_judge_matches_as_before_on_seeded_enumerations() -> None:
    rng = random.Random(7)
    words = ["red cup", "cups", "blue box", "the boxes", "a knife", "knives", "spoon", "spoons", "plate", "red cups",
             "green bottle", "bottle", "cup red", "box blue", "boxx", "plat", "spon", "Shindo Dojo", "shindo dojo's"]
    for _ in range(3000):
        truth = ", ".join(rng.sample(words, rng.randint(0, 5)))
        answer = " and ".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        verdict = FuzzyJudge().judge(truth, answer)
        assert (verdict.tp_items, verdict.fp_items, verdict.fn_items) == _old_fuzzy(truth, answer), (truth, answer)


def test_the_fuzzy_judge_compares_each_distinct_pair_once_and_skips_what_cannot_match(monkeypatch) -> None:
    calls = []
    ratio = difflib.SequenceMatcher.ratio
    monkeypatch.setattr(difflib.SequenceMatcher, "ratio", lambda self: calls.append(1) or ratio(self))
    answer = ", ".join(["soba noodle shop"] * 5000 + [f"an item numbered {i}" for i in range(20000)])
    verdict = FuzzyJudge().judge("Soba noodle shop, Shindo Dojo", answer)
    assert verdict.tp_items == ["soba noodle shop"] and len(verdict.fp_items) == 20000
    assert len(calls) <= 2  # not 50,000 pairs: distinct pairs once, the rest below difflib's cheap bounds


def _ecbench(tmp_path: Path, answer: str = "2") -> Path:
    header = "video_url,video_id,video_type,question_id,question_type,task_type,question,clips,answer,count_details\n"
    rows = [f"https://example.org/v{i},{i},cartoon,{i},A,Counting,How many?,\"[0:00:01,0:00:02]\","
            f"{answer if i == 1 else i},\n" for i in range(1, 6)]
    path = tmp_path / "ec.csv"
    path.write_text(header + "".join(rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("where", ["response", "annotation"])
def test_an_ecbench_count_too_long_is_left_out_of_the_errors_and_the_json_stays_json(tmp_path: Path, where: str) -> None:
    """A 5,000-digit EC-Bench count read as `inf`: an MAE of Infinity, which `--json` wrote as no JSON value (a strict
    reader refuses the object); a 400-digit annotation answer (`inf` too) ended the chance draws in a traceback."""
    data = _ecbench(tmp_path, "1" * 400 if where == "annotation" else "2")
    preds = [{"id": str(i), "response": ("1" * 5000 if where == "response" and i == 1 else str(i))} for i in range(1, 6)]
    code, out = _score("--bench", "ecbench", "--data", str(data), "--judge", "fuzzy", "--bootstrap", "20",
                       "--predictions", str(_jsonl(tmp_path / "p.jsonl", preds)))
    assert code == 0, out
    report = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json"))
    assert report["metrics"]["counting_mae"] == 0.0  # the other four are right; the long one is no number


def test_a_vstat_answer_index_that_is_no_integer_leaves_the_answer_as_written(tmp_path: Path) -> None:
    """`answer_index` 1e999 is `inf` to a JSON reader: `int(inf)` raised OverflowError, which the released rule's
    fallback (the answer as written) did not catch."""
    rows = [{"source_task": "mcq_task", "video_id": "v0", "video_path": "v0.mp4", "question": "Which?", "answer": "left",
             "choices": ["left", "right"], "answer_index": index} for index in (1.5e308, 0)]
    path = tmp_path / "vstat.json"
    path.write_text(json.dumps({"data": {"mcq_task": rows}}).replace("1.5e+308", "1e999"))
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "mcq_task:0", "response": "LEFT"}, {"id": "mcq_task:1", "response": "A"}])
    code, out = _score("--bench", "vstat", "--data", str(path), "--predictions", str(preds))
    assert code == 0, out
    assert json.loads(out)["metrics"]["mcq_acc"] == 0.5  # the second right (index 0: A); the first's target is "LEFT"
