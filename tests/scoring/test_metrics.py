"""Hand-worked metric and parser values, including the reference files' worked examples and quirks."""

from __future__ import annotations

import math

import pytest

from statebox.scoring.metrics import gpa, gpa_point, moc, msta, mra, precision_recall_f1, uda
from statebox.scoring.parsing import (
    cpbench_count,
    ecbench_normalize,
    eocbench_choice,
    eocbench_choice_strict,
    eocbench_time,
    vcbench_number,
    vstat_integer,
    vstat_mcq,
    vstat_text,
    word_numbers,
)
from statebox.scoring.spans import hull_iou, merge, parse_clips, union_iou

# ---------------------------------------------------------------- VCBench


def test_gpa_off_by_one_reference_values():
    assert gpa_point(21, 20) == pytest.approx(0.6065306597, abs=1e-9)  # exp(-0.5)
    assert gpa_point(11, 10) == pytest.approx(0.1353352832, abs=1e-9)  # exp(-2)
    assert gpa_point(1, 0) == pytest.approx(math.exp(-200))  # g=0 uses sigma 0.05
    assert gpa_point(-1, -3) == pytest.approx(math.exp(-200 * 4))  # negative g: sigma 0.05 too
    assert gpa([20, 11], [20, 10]) == pytest.approx((1 + math.exp(-2)) / 2)
    assert gpa([], []) is None


def test_moc_first_violation():
    assert moc([1, 2, 3, 4, 3]) == 0.75
    assert moc([3, 2, 3, 4, 5]) == 0.0
    assert moc([1, 1, 1]) == 1.0  # ties are not violations
    assert moc([5]) is None


def test_uda_direction_agreement():
    assert uda([1, 1, 2], [1, 2, 2]) == 0.0
    assert uda([1, 2, 2], [1, 2, 2]) == 1.0
    assert uda([3, 1, 5], [2, 0, 0]) == 0.5
    assert uda([1], [1]) is None


# ---------------------------------------------------------------- VSTAT


@pytest.mark.parametrize(
    ("p", "g", "expected"),
    [
        (10, 10, 1.0),
        (9, 10, 0.9),  # float64 boundary: 0.1 <= 1 - 0.9 holds with numpy.linspace thresholds
        (11, 10, 0.9),
        (7, 10, 0.5),
        (5, 10, 0.1),
        (3, 10, 0.0),
        (0, 0, 1.0),
        (1, 0, 0.0),
        (-4, -4, 1.0),
        (-3, -4, 0.6),  # relative error 0.25 against |g|: t in 0.50..0.75
        (None, 5, 0.0),
    ],
)
def test_mra(p, g, expected):
    assert mra(p, g) == pytest.approx(expected, abs=1e-12)


def test_vstat_parsers_follow_released_code():
    assert vstat_mcq("I think (b) or C") == "C"  # last standalone letter of the upper-cased text
    assert vstat_mcq("Answer: d.") == "D"
    assert vstat_mcq("ABCD") is None
    assert vstat_mcq("") is None
    assert vstat_integer("7.0") == 0  # last -?\d+ match: the released quirk
    assert vstat_integer("from -3 to 12") == 12
    assert vstat_integer("net -5") == -5
    assert vstat_integer("no idea") is None
    assert vstat_text("  Hello World ") == "hello world"


# ---------------------------------------------------------------- EC-Bench


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("3 times", "3"),
        ("three", ""),
        ("5, 2", "2, 5"),
        ("3, 3", "3"),
        ("-2", "2"),
        ("1,000", "0, 1"),
        ("3 (00:12:30)", "0, 3, 12, 30"),
        ("2.50", "2.5"),
        ("10.0", "10"),
        ("007", "7"),
        ("", ""),
        (None, ""),
    ],
)
def test_ecbench_normalisation(text, normal):
    assert ecbench_normalize(text) == normal


def test_ecbench_spans_union_iou():
    truth = parse_clips("[0:03:19,0:03:23], [0:44:58,0:44:59]")
    assert truth == [(199, 203), (2698, 2699)]
    assert parse_clips('[["00:03:19", "00:03:23"]]') == [(199, 203)]
    assert parse_clips('[["03:19", "03:23"]]') == []  # list form needs exact h:mm:ss, no regex fallback
    assert parse_clips("0:00:10 - 0:00:20, and 0:00:30") == [(10, 20)]  # odd last timestamp dropped
    assert parse_clips("[0:00:20,0:00:10]") == []  # end < start dropped
    assert parse_clips("0:00:10.900,0:00:20.100") == [(10, 20)]
    assert merge([(5, 10), (0, 5), (20, 30)]) == [(0, 10), (20, 30)]
    assert union_iou([(0, 10), (20, 30)], [(5, 25)]) == pytest.approx(10 / 30)
    assert hull_iou([(0, 10), (20, 30)], [(5, 25)]) == pytest.approx(20 / 30)
    assert union_iou([], []) is None
    assert union_iou([(0, 10)], []) == 0.0
    assert union_iou([(5, 5)], [(5, 5)]) == 0.0  # zero-length union


def test_enumeration_precision_rules():
    assert precision_recall_f1(1, 0, 9) == (1.0, 0.1, pytest.approx(2 * 0.1 / 1.1))
    assert precision_recall_f1(0, 0, 0) == (0.0, 0.0, 0.0)


# ---------------------------------------------------------------- EOC-Bench

CHOICES = {"a": "On the placemat", "b": "In the sink", "c": "In the cabinet", "d": "On the shelf"}


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("<choice>A</choice>", ["a"]),
        ("<choice>A, B</choice>", ["a", "b"]),
        ("A", ["a"]),
        ("A. On the placemat", ["a"]),
        ("B, C", ["b", "c"]),
        ("A,B", ["a", "b"]),
        ("The answer is B", ["b"]),
        ("A and B", ["c"]),
        ("<choice>A</choice> <choice>C</choice>", ["c"]),
        ("In the sink", ["b"]),
        ("", ["a"]),
    ],
)
def test_eoc_official_choice_parser_reference_vectors(response, expected):
    assert eocbench_choice(response, CHOICES) == expected


def test_eoc_strict_parser():
    assert eocbench_choice_strict("<choice>A, C</choice>") == ["a", "c"]
    assert eocbench_choice_strict("B and D") == ["b", "d"]
    assert eocbench_choice_strict("no letter here") is None
    assert eocbench_choice_strict("") is None


@pytest.mark.parametrize(
    ("gt", "pred", "score"),
    [(10, 8, 0.5), (10, 10, 1.0), (17, 15, 0.5), (17, 13, 0.25), (40, 34, 0.5), (40, 27, 0.0), (5, 6, 0.5),
     (100, 101.5, 0.75), (0, 0, 1.0), (0, 1, 0.0)],
)
def test_msta_reference_table(gt, pred, score):
    assert msta(pred, gt) == score


def test_eoc_time_parser():
    assert eocbench_time("<object 3> moved about 17s ago") == 17.0
    assert eocbench_time("-5 seconds") == 5.0
    assert eocbench_time("10-15 seconds") == 10.0
    assert eocbench_time("no idea") == 0.0


# ---------------------------------------------------------------- VCBench / CP-Bench parsers


def test_count_parsers_on_garbage_and_words():
    assert vcbench_number("5") == 5
    assert vcbench_number(" 12 ") == 12
    assert vcbench_number("I count 3 chairs, so 4 in total") == 4
    assert vcbench_number("twenty-one") == 21
    assert vcbench_number("1,200 people") == 1200
    assert vcbench_number("-2") == -2
    assert vcbench_number("about 2.5") == 2.5
    assert vcbench_number("") is None
    assert vcbench_number("🤷") is None
    assert cpbench_count("There are 5.0 cubes") == 5
    assert cpbench_count("seven") == 7
    assert cpbench_count("I cannot tell") is None
    assert word_numbers("one hundred and twelve") == [100, 12]
