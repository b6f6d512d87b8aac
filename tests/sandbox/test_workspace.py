"""Workspaces: random names, a clean copy (never a link), a verified streaming cut, the leak gate."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from statebox.errors import UserError
from statebox.policies import load_policy
from statebox.sandbox import workspace as wsmod
from statebox.sandbox.workspace import LeakGateError, last_frame_time, prepare_workspace, probe
from statebox.schema import Item, Query


@pytest.fixture()
def item() -> Item:
    return Item(id="ecb-000777", benchmark="ecbench", video="kitchen_scene0099.mp4",
                question="How many times does the red square pass the centre?",
                choices=["once", "twice", "three times"], answer_type="mcq",
                queries=[Query(index=0), Query(index=1, time=2.5)])


@pytest.fixture()
def policy():
    return load_policy("default")


def test_clean_copy_with_random_names(item, policy, source_video, tmp_path):
    ws = prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path, dataset="ecbench")
    try:
        assert len(ws.path.name) == 32 and ws.path.parent == tmp_path
        assert ws.video_name.endswith(".mp4") and len(ws.video_name) == 20
        assert sorted(p.name for p in ws.path.iterdir()) == sorted([ws.video_name, "instruction.txt"])
        video = ws.video_path
        assert not video.is_symlink() and video.stat().st_ino != source_video.stat().st_ino
        assert video.stat().st_nlink == 1
        info = probe(video)
        assert set(info["format"].get("tags", {})) <= wsmod.ALLOWED_FORMAT_TAGS
        assert not info.get("chapters")
        assert "kitchen" not in json.dumps(info).lower() and "ecb-000777" not in json.dumps(info)
        assert not ws.reencoded and not ws.cut
        assert abs(float(info["format"]["duration"]) - 4.0) < 0.2
        if os.geteuid() == 0:
            assert ws.path.stat().st_uid == 1000  # the agent's tmpfs; the video is root's and read-only
            assert video.stat().st_uid == 0 and video.stat().st_mode & 0o222 == 0
        # a second attempt on the same video gets different names
        other = prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path, dataset="ecbench")
        assert other.path != ws.path and other.video_name != ws.video_name
        other.cleanup()
    finally:
        ws.cleanup()
    assert not ws.path.exists()


def test_streaming_cut_has_no_frame_after_query_time(item, policy, source_video, tmp_path):
    ws = prepare_workspace(item, item.queries[1], source_video, policy, root=tmp_path, dataset="ecbench")
    try:
        assert ws.cut and ws.reencoded and ws.query_time == 2.5
        last = last_frame_time(ws.video_path)
        assert 2.3 <= last <= 2.5
        frames = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
                                 "stream=nb_read_frames", "-of", "csv=p=0", str(ws.video_path)],
                                capture_output=True, text=True, check=True).stdout.strip()
        assert int(frames) == 25  # 10 fps, frames at 0.0 .. 2.4
        assert "ends at the moment the question is asked" in ws.instruction
    finally:
        ws.cleanup()


def test_reencode_changes_the_bytes(item, policy, source_video, tmp_path):
    plain = prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path)
    again = prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path, reencode=True)
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert again.reencoded
    assert digest(again.video_path) != digest(plain.video_path) != digest(source_video)
    plain.cleanup()
    again.cleanup()


def test_instruction_holds_question_options_format_and_rules(item, policy, source_video, tmp_path):
    ws = prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path)
    text = (ws.path / "instruction.txt").read_text()
    ws.cleanup()
    assert text == ws.instruction
    assert item.question in text
    assert "A. once" in text and "B. twice" in text and "C. three times" in text
    assert "letter of exactly one option" in text and "answer.txt" in text
    assert "Do not use the network" in text
    assert ws.video_name in text


def test_leak_gate_catches_identifying_question(item, policy, source_video, tmp_path):
    leaky = item.model_copy(update={"question": "In kitchen_scene0099, how many squares?"})
    with pytest.raises(LeakGateError, match="kitchen_scene0099"):
        prepare_workspace(leaky, item.queries[0], source_video, policy, root=tmp_path)
    leaky = item.model_copy(update={"question": "Item ecb-000777: how many?"})
    with pytest.raises(LeakGateError, match="ecb-000777"):
        prepare_workspace(leaky, item.queries[0], source_video, policy, root=tmp_path)
    leaky = item.model_copy(update={"question": "From the ECBench set: how many?"})
    with pytest.raises(LeakGateError, match="ecbench"):
        prepare_workspace(leaky, item.queries[0], source_video, policy, root=tmp_path, dataset="ecbench")
    assert [p for p in tmp_path.iterdir() if p.name != ".statebox-owners"] == []  # an aborted workspace leaves nothing
    assert list((tmp_path / ".statebox-owners").iterdir()) == []


def test_leak_gate_catches_metadata_the_copy_kept(item, policy, source_video, tmp_path, monkeypatch):
    def sloppy_copy(src, dst, *, cut_at, reencode, audio="keep"):
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(src), "-c", "copy", str(dst)], check=True)
        return False

    monkeypatch.setattr(wsmod, "clean_copy", sloppy_copy)
    with pytest.raises(LeakGateError, match="container tag (title|comment)"):
        prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path)


def test_short_or_generic_needles_are_not_false_alarms(policy, source_video, tmp_path):
    item = Item(id="12", benchmark="vstat", video="video.mp4", question="How many of the 12 squares move in the video?",
                answer_type="number")
    video = tmp_path / "video.mp4"
    video.write_bytes(source_video.read_bytes())
    ws = prepare_workspace(item, item.queries[0], video, policy, root=tmp_path / "root")
    assert any("video" in note for note in ws.gate_notes)
    ws.cleanup()


def test_bad_inputs_are_user_errors(item, policy, tmp_path):
    with pytest.raises(UserError, match="video not found"):
        prepare_workspace(item, item.queries[0], tmp_path / "missing.mp4", policy, root=tmp_path)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all")
    with pytest.raises(UserError, match="junk.mp4"):
        prepare_workspace(item, item.queries[0], junk, policy, root=tmp_path / "r")


def test_read_output_refuses_symlinks_and_devices(item, policy, source_video, tmp_path):
    ws = prepare_workspace(item, item.queries[0], source_video, policy, root=tmp_path / "root")
    secret = tmp_path / "answer-key.txt"
    secret.write_text("B")
    assert ws.read_output() is None
    (ws.path / "answer.txt").write_text("C\n")
    assert ws.read_output() == "C\n"
    (ws.path / "answer.txt").unlink()
    (ws.path / "answer.txt").symlink_to(secret)
    with pytest.raises(UserError, match="not a regular file"):
        ws.read_output()
    os.mkfifo(ws.path / "fifo")
    with pytest.raises(UserError, match="not a regular file"):
        ws.read_output("fifo")
    with pytest.raises(UserError, match="plain file name"):
        ws.read_output("../answer-key.txt")
    ws.cleanup()
    assert secret.read_text() == "B"


@pytest.mark.parametrize("kind", ["folder", "fifo", "link"])
def test_a_planted_non_file_is_refused_without_leaking_a_host_descriptor(tmp_path, kind):
    """An agent can leave a folder, a FIFO or a link where the host reads a file of its workspace. A folder there made
    `os.fdopen` raise before the regular-file check, and the descriptor it was handed stayed open: one host
    descriptor per read (200 reads, 200 descriptors; found in review), toward the run's EMFILE over many attempts."""
    from statebox.sandbox.workspace import open_regular

    target = tmp_path / "answer.txt"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "elsewhere.txt")
        (tmp_path / "elsewhere.txt").write_text("4\n")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        with pytest.raises(OSError):
            open_regular(target)
    assert len(os.listdir("/proc/self/fd")) == before
