"""Loader additions: EOC-Bench visual prompts and EC-Bench shipped transcripts."""

from __future__ import annotations

import json

import pytest

from statebox.benchmarks import load_benchmark
from statebox.errors import DataError

ROW = {"idx": 1, "video_path": "v.mp4", "question": "What is <object 0>?", "choices": {"a": "x", "b": "y"},
       "answer": ["a"], "choice_type": "single-choice", "video_type": "Object Relationship"}


def _load(tmp_path, **extra):
    path = tmp_path / "eoc.jsonl"
    path.write_text(json.dumps(ROW | extra) + "\n")
    return load_benchmark("eocbench", path).items[0]


def test_eoc_prompts_per_object_in_every_released_shape(tmp_path):
    item = _load(tmp_path, box=[[1, 2, 30, 40], [5, 5, 9, 9]], point=[[3, 4], [6, 7]],
                 mask=[{"counts": [0, 4, 96], "size": [10, 10]}, [[0, 0, 5, 0, 5, 5]]])
    assert [p.kinds for p in item.prompts] == [["box", "point", "mask"], ["box", "point", "mask"]]
    assert item.prompts[0].mask.counts == [0, 4, 96] and item.prompts[1].mask == [[0.0, 0.0, 5.0, 0.0, 5.0, 5.0]]
    assert item.meta["box"] == [[1, 2, 30, 40], [5, 5, 9, 9]] and "mask" not in item.meta  # the oracle reads meta.box
    assert _load(tmp_path).prompts == []
    bare = _load(tmp_path, box=[1, 2, 30, 40])  # one object's box given without the outer list
    assert bare.prompts[0].box == [1.0, 2.0, 30.0, 40.0]


@pytest.mark.parametrize("extra, words", [
    ({"box": [[10, 10, 5, 20]]}, "box 0 must be"),
    ({"point": [[1, 2, 3]]}, "point 0 must be"),
    ({"mask": [{"counts": "abc"}]}, "mask 0 must be a COCO RLE"),
    ({"mask": [[[1, 2, 3]]]}, "mask 0 must be"),
    ({"box": "nope"}, "field 'box' must be an array"),
])
def test_eoc_bad_prompts_name_the_line(tmp_path, extra, words):
    with pytest.raises(DataError, match=words) as err:
        _load(tmp_path, **extra)
    assert "eoc.jsonl:1" in str(err.value)


def test_ec_transcripts_beside_the_annotation_are_attached(tmp_path):
    (tmp_path / "dataset.csv").write_text(
        "video_url,video_id,video_type,question_id,question_type,task_type,question,clips,answer,count_details\n"
        "http://x,1,sports,q1,C,Counting,How many cheers?,\"[0:00:01,0:00:02]\",2,\n"
        ",2,sports,q2,C,Counting,How many cheers?,\"[0:00:01,0:00:02]\",2,\n")
    assert load_benchmark("ecbench", tmp_path / "dataset.csv").items[0].transcript is None
    (tmp_path / "transcript.csv").write_text(
        "video_id,whisper_model,include_timestamps,text,timestamped_text,segments_json,updated_at\n"
        '1.0,base,True,hi,"[00:00:00.000 - 00:00:01.000] hi\n[00:00:01.000 - 00:00:02.000] cheer",[],now\n')
    items = load_benchmark("ecbench", tmp_path / "dataset.csv").items
    assert items[0].transcript == "[00:00:00.000 - 00:00:01.000] hi\n[00:00:01.000 - 00:00:02.000] cheer\n"
    assert items[1].transcript is None
    (tmp_path / "transcript.csv").write_text("video,words\n1,hi\n")
    with pytest.raises(DataError, match="transcript.csv needs columns"):
        load_benchmark("ecbench", tmp_path / "dataset.csv")
