"""Loaders: the three real released files load; malformed inputs stop with `file:line: what`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statebox.benchmarks import load_benchmark
from statebox.errors import DataError, UserError


def test_vcbench_eval_file(shared_dir):
    result = load_benchmark("vcbench", shared_dir / "benchmarks/vcbench/vcbench_eval.jsonl")
    items = result.items
    assert len(items) == 1000 and sum(len(i.queries) for i in items) == 4576
    first = next(i for i in items if i.id == "0546")
    assert first.labels == {"counting_subtype": "E1-Action", "counting_type": "E1", "source_dataset": "RoomTour3D"}
    assert [q.index for q in first.queries] == list(range(len(first.queries)))
    assert first.queries[0].time == 68.33 and first.queries[0].target == 1
    assert first.video == "-FZTi5EfPSQ.mp4"
    # the sibling vcbench_data.jsonl disagrees for 454 ids (documented); reported, not fatal
    assert any("454 of 1000" in w for w in result.warnings)


def test_vcbench_data_file_is_accepted_with_warning(shared_dir):
    result = load_benchmark("vcbench", shared_dir / "benchmarks/vcbench/vcbench_data.jsonl")
    assert len(result.items) == 1000
    assert any("authoritative" in w for w in result.warnings)


def test_ecbench_dataset_csv(shared_dir):
    result = load_benchmark("ecbench", shared_dir / "benchmarks/ecbench/dataset.csv")
    items = {i.id: i for i in result.items}
    assert len(items) == 1699
    tasks = [i.labels["task_type"] for i in result.items]
    assert tasks.count("Counting") == 841 and tasks.count("Enumeration") == 858
    assert items["2"].meta["video_url"] == "https://www.youtube.com/watch?v=Cm73ma6Ibcs"  # forward-filled
    assert items["1"].evidence[0].start == 199 and items["1"].evidence[0].end == 203
    assert {i.labels["video_type"] for i in result.items} >= {"sports", "unknown"}
    assert "sport" not in {i.labels["video_type"] for i in result.items}
    assert any("6 EC-Bench videos have no video_url (57 queries)" in w for w in result.warnings)
    assert "count_details" not in items["1"].question


def test_missing_videos_are_warnings(shared_dir, tmp_path):
    result = load_benchmark("vcbench", shared_dir / "benchmarks/vcbench/vcbench_eval.jsonl", videos_dir=tmp_path)
    assert any("have no video under" in w for w in result.warnings)


def test_eocbench_json_array_and_unknown_category(tmp_path):
    rows = [{"idx": 7, "video_path": "x.mp4", "question": "q", "choices": {"a": "yes", "b": "no"}, "answer": ["A"],
             "choice_type": "true/false", "video_type": "Made Up", "video_time": 3.5}]
    path = tmp_path / "eoc.json"
    path.write_text(json.dumps(rows))
    result = load_benchmark("eocbench", path)
    assert result.items[0].id == "7" and result.items[0].target == ["a"]
    assert any("Made Up" in w for w in result.warnings)


def _bad(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("bench", "name", "text", "line", "what"),
    [
        ("vcbench", "e.jsonl", '{"id": "1", "query_index": 0, "question": "q", "video_path": "v.mp4", '
         '"counting_subtype": "O1-Snap", "query_time": 1.0, "count": 2}\n{"id": "1", "query_index": 1\n',
         2, "not valid JSON"),
        ("vcbench", "e.jsonl", '{"id": "1", "query_index": 0, "question": "q", "video_path": "v.mp4", '
         '"counting_subtype": "O1-Snap", "query_time": "soon", "count": 2}\n', 1, "field 'query_time' must be"),
        ("vcbench", "e.jsonl", '{"id": "1", "query_index": 0, "question": "q", "video_path": "v.mp4", '
         '"counting_subtype": "O1-Snap", "query_time": 1.0}\n', 1, "missing field 'count'"),
        ("ecbench", "d.csv", "video_id,question_id,question_type,task_type,question\n1,1,A,Counting,q\n",
         1, "missing column answer"),
        ("ecbench", "d.csv", "video_id,question_id,question_type,task_type,question,answer\n"
         "1,1,A,Counting,q,3\n1,2,A,Guessing,q,3\n", 3, "task_type must be Counting or Enumeration"),
        ("ecbench", "d.csv", "video_id,question_id,question_type,task_type,question,answer\n"
         "1,1,A,Counting,q,3\n1,1,A,Counting,q,4\n", 3, "duplicate item id '1'"),
        ("cpbench", "m.jsonl", '{"id": "a", "video": "a.mp4", "count": 3, "setting": "sideways"}\n',
         1, "setting' must be main or control"),
        ("eocbench", "x.jsonl", '{"idx": 1, "video_path": "a.mp4", "question": "q", "answer": ["A"], '
         '"choice_type": "pick-one"}\n', 1, "choice_type must be one of"),
    ],
)
def test_malformed_inputs_name_file_and_line(tmp_path, bench, name, text, line, what):
    path = _bad(tmp_path, name, text)
    with pytest.raises(DataError) as info:
        load_benchmark(bench, path)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert what in str(info.value)


def test_vstat_malformed_and_missing_file(tmp_path):
    path = _bad(tmp_path, "v.json", '{"data": {"t": [{"question": "q", "answer": "1"}]}}')
    with pytest.raises(DataError, match="missing field 'video_path'"):
        load_benchmark("vstat", path)
    with pytest.raises(DataError, match="file not found"):
        load_benchmark("vstat", tmp_path / "nope.json")
    with pytest.raises(UserError, match="unknown benchmark"):
        load_benchmark("mmlu", path)


def test_vcbench_video_resolves_under_its_source_dataset_folder(tmp_path):
    """The release keeps videos at {root}/{source_dataset}/{video_path}; a flat root works too."""
    from statebox.schema import resolve_video

    data = tmp_path / "vcbench_eval.jsonl"
    data.write_text(json.dumps({"q_id": "0", "query_index": 0, "id": "q1", "source_dataset": "RoomTour3D",
                                "video_path": "clip.mp4", "question": "How many?", "counting_subtype": "O1-Snap",
                                "query_time": 1.0, "count": 2}) + "\n")
    item = load_benchmark("vcbench", data).items[0]
    root = tmp_path / "videos"
    root.mkdir()
    assert resolve_video(item, root) == root / "clip.mp4"  # nothing nested: the flat layout
    (root / "RoomTour3D").mkdir()
    (root / "RoomTour3D" / "clip.mp4").write_bytes(b"x")
    assert resolve_video(item, root) == root / "RoomTour3D" / "clip.mp4"


# An annotation file is the user's, but it may come from anywhere (a release, a colleague, a tarball): the video it
# names is looked for under the videos folder, and in a cluster run a node writes its copy of the video under its own
# cache at that same relative path. A path that climbs out with `..` read a host file outside the videos folder as the
# video on the head and wrote the video's bytes outside the cache on every node (`cluster_worker.materialise_video`).
_CLIMBS = ("../outside.mp4", "clips/../../outside.mp4", "a/b/../../../../../../../etc/cron.d/job")


@pytest.mark.parametrize("climb", _CLIMBS)
@pytest.mark.parametrize(("bench", "name", "row"), [
    ("vcbench", "e.jsonl", lambda v: json.dumps({"id": "1", "query_index": 0, "question": "q", "video_path": v,
                                                 "counting_subtype": "O1-Snap", "query_time": 1.0, "count": 2}) + "\n"),
    ("cpbench", "m.jsonl", lambda v: json.dumps({"id": "a", "video": v, "count": 3, "setting": "main"}) + "\n"),
    ("eocbench", "x.jsonl", lambda v: json.dumps({"idx": 1, "video_path": v, "question": "q", "answer": ["A"],
                                                  "choice_type": "single-choice"}) + "\n"),
    ("ecbench", "d.csv", lambda v: "video_id,question_id,question_type,task_type,question,answer,video_path\n"
                                   f"1,1,A,Counting,q,3,{v}\n"),
    ("ecbench", "d.csv", lambda v: "video_id,question_id,question_type,task_type,question,answer\n"
                                   f"{v.removesuffix('.mp4')},1,A,Counting,q,3\n"),  # the path made from the id
])
def test_a_video_path_climbing_out_of_the_videos_folder_is_refused_at_load(tmp_path, bench, name, row, climb):
    path = _bad(tmp_path, name, row(climb))
    with pytest.raises(DataError) as info:
        load_benchmark(bench, path, tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}:") and "'..'" in message and "leaves the videos folder" in message


def test_a_vstat_video_path_climbing_out_is_refused_and_a_plain_one_loads(tmp_path):
    def doc(video: str) -> str:
        return json.dumps({"data": {"t": [{"id": "t-1", "video_path": video, "question": "How many?", "answer": "1"}]}})
    with pytest.raises(DataError, match="leaves the videos folder"):
        load_benchmark("vstat", _bad(tmp_path, "v.json", doc("../../home/user/private.mp4")))
    # names with dots that are not `..` components stay what they were
    for fine in ("clip.mp4", "sub/clip..mp4", "..clip.mp4", "./sub/clip.mp4"):
        assert load_benchmark("vstat", _bad(tmp_path, "v.json", doc(fine))).items[0].video == fine


def test_resolve_video_refuses_a_path_that_climbs_out_whoever_built_the_item(tmp_path):
    """The one door from an item's video to a host path: an Item made by other code than a loader (a node's copy of a
    job, a test) is held to the same rule."""
    from statebox.schema import Item, resolve_video

    item = Item(id="x", benchmark="vstat", video="sub/../../secret.mp4", question="q", answer_type="number")
    with pytest.raises(UserError, match="leaves the videos folder"):
        resolve_video(item, tmp_path)
