"""The process decoder: the thread reader's frames byte for byte, no leaked process or shared memory, errors surface.

Runs on the host (OpenCV + numpy only; the same module runs in the tracker image, where
tests/tracker/test_decode_image.py checks it under the sandbox's pids and /dev/shm limits).
Videos are small H.264 clips made here with the suite's encoder: moving noise, so every
frame differs and a frame handed out twice, skipped or overwritten would show.
"""

from __future__ import annotations

import gc
import os
import signal
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from statebox.benchmarks.synthetic.video import write_mp4
from statebox.tracker.runtime import decode_process
from statebox.tracker.runtime.decode import DecodeError, FrameReader, VideoInfo, frame_time
from statebox.tracker.runtime.decode_process import ProcessFrameReader
from statebox.tracker.runtime.decoders import open_reader


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """37 frames of 96x64 (a last batch shorter than the others for every batch size used here)."""
    rng = np.random.default_rng(0)
    frames = []
    for i in range(37):
        f = np.full((64, 96, 3), 40, np.uint8)
        f[:, (i * 2) % 96:(i * 2) % 96 + 12] = (0, 200, 255)
        f[40:60, 10:30] = rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)
        frames.append(f)
    path = tmp_path_factory.mktemp("decode") / "clip.mp4"
    write_mp4(path, frames, fps=12)
    return path


def _plain_opencv(path: Path, stride: int) -> list[tuple[int, np.ndarray]]:
    """What today's reader decodes: every frame read in order, the stride-th ones kept."""
    cap = cv2.VideoCapture(str(path))
    out, i = [], 0
    while True:
        ok, image = cap.read()
        if not ok:
            break
        if i % stride == 0:
            out.append((i, image))
        i += 1
    cap.release()
    return out


def _read_all(reader) -> list:
    try:
        return list(reader)
    finally:
        reader.close()


def _segments_open_here() -> list[str]:
    """This process's descriptors and mappings of the decoder's segments (a leaked one stays open or mapped)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "sbtracker-decode-" in target:
            found.append(f"fd {target}")
    found += [f"map {' '.join(line.split()[5:])}" for line in Path("/proc/self/maps").read_text().splitlines()
              if "sbtracker-decode-" in line]
    return found


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie still answers kill(0): it has exited, its parent just has not reaped it
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


@pytest.mark.parametrize("stride,batch", [(1, 8), (3, 5), (2, 1)])
def test_process_reader_hands_out_the_thread_readers_frames(clip, stride, batch):
    expected = _plain_opencv(clip, stride)
    thread = FrameReader(clip, stride=stride, batch=batch)
    proc = ProcessFrameReader(clip, stride=stride, batch=batch)
    a, b = _read_all(thread), _read_all(proc)
    assert [len(fb.images) for fb in a] == [len(fb.images) for fb in b]
    assert all(len(fb.images) == batch for fb in b[:-1]) and 0 < len(b[-1].images) <= batch
    flat = [(i, t, im) for fb in b for i, t, im in zip(fb.indices, fb.times, fb.images)]
    assert [i for i, _, _ in flat] == [i for i, _ in expected] == [i for fb in a for i in fb.indices]
    assert [t for _, t, _ in flat] == [frame_time(i, 12.0) for i, _ in expected] == [t for fb in a for t in fb.times]
    thread_images = [im for fb in a for im in fb.images]
    for (_, _, im), (_, ref), th in zip(flat, expected, thread_images):
        assert im.dtype == np.uint8 and im.shape == (64, 96, 3) and im.flags.c_contiguous
        assert im.tobytes() == ref.tobytes() == th.tobytes()
    assert len({im.tobytes() for _, _, im in flat}) == len(flat)  # every frame differs: none handed out twice
    assert (proc.frames_read, proc.frames_grabbed) == (thread.frames_read, thread.frames_grabbed) == (len(flat), 37)


def test_frames_stay_valid_after_the_slot_is_reused(clip):
    """The consumer keeps frames for several batches: later batches must not overwrite earlier ones."""
    reader = ProcessFrameReader(clip, stride=1, batch=4, ring=2)  # the child rewrites each slot many times
    kept = []
    for fb in reader:
        kept.append([im.copy() for im in fb.images])
        kept[-1].append(fb.images)  # the frames as handed out, read again at the end
    reader.close()
    for batch_frames in kept:
        *copies, handed = batch_frames
        assert all(c.tobytes() == h.tobytes() for c, h in zip(copies, handed))


def test_early_close_and_dropping_a_reader_leave_no_process_or_segment(clip):
    before = _segments_open_here()
    reader = ProcessFrameReader(clip, stride=1, batch=4)
    pid = reader.pid
    now = _segments_open_here()
    assert len(now) == len(before) + 2 and all("(deleted)" in n for n in now)  # mmap's descriptor + the mapping; no name
    first = next(iter(reader))
    assert len(first.images) == 4
    reader.close()
    reader.close()  # idempotent
    assert _gone(pid)
    assert _segments_open_here() == before
    assert not [n for n in os.listdir("/dev/shm") if n.startswith("sbtracker-decode-")]

    dropped = ProcessFrameReader(clip, stride=1, batch=4)
    pid = dropped.pid
    next(iter(dropped))
    del dropped
    gc.collect()
    assert _gone(pid)
    assert _segments_open_here() == before


def test_an_exception_in_the_child_reaches_the_consumer_with_its_cause(clip, monkeypatch):
    # A probe that reports 0 fps makes the child's frame-time arithmetic fail (ZeroDivisionError),
    # a real exception inside the child's decoding loop.
    monkeypatch.setattr(decode_process, "probe", lambda p: VideoInfo(fps=0.0, frame_count=37, width=96, height=64))
    reader = ProcessFrameReader(clip, stride=1, batch=4)
    pid = reader.pid
    with pytest.raises(DecodeError) as err:
        _read_all(reader)
    text = str(err.value)
    assert "clip.mp4" in text and "ZeroDivisionError" in text and "frame_time" in text  # the child's traceback
    assert _gone(pid)


def test_a_child_that_dies_is_an_error_naming_its_exit_code(clip):
    reader = ProcessFrameReader(clip, stride=1, batch=1, ring=2)
    it = iter(reader)
    next(it)
    os.kill(reader.pid, signal.SIGKILL)
    with pytest.raises(DecodeError, match=r"decoder process ended \(exit code -9\)"):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the slots already filled may still arrive first
            next(it)
    reader.close()
    assert _gone(reader.pid)


def test_shared_memory_and_pids_limits_fall_back_to_the_thread_with_a_reason(clip, monkeypatch):
    monkeypatch.setattr(decode_process, "shm_free_bytes", lambda folder="/dev/shm": 64 * 96 * 3 * 3)  # half: 1.5 frames
    reader = open_reader(clip, stride=1, batch=8, decoder="process")
    assert reader.kind == "thread" and "shared memory" in reader.fallback and "/dev/shm" in reader.fallback
    assert sum(len(fb.images) for fb in _read_all(reader)) == 37
    monkeypatch.undo()

    monkeypatch.setattr(decode_process, "pids_left", lambda: 20)
    reader = open_reader(clip, stride=1, batch=8, decoder="process")
    assert reader.kind == "thread" and "pids" in reader.fallback
    reader.close()
    monkeypatch.undo()

    reader = open_reader(clip, stride=1, batch=8, decoder="process")
    assert reader.kind == "process" and reader.fallback is None
    reader.close()


def test_the_ring_shrinks_to_fit_shared_memory_before_falling_back(clip, monkeypatch):
    assert ProcessFrameReader(clip, stride=1, batch=8).ring == 16  # two batches when there is room
    monkeypatch.setattr(decode_process, "shm_free_bytes", lambda folder="/dev/shm": 64 * 96 * 3 * 7)  # half: 3.5 frames
    reader = ProcessFrameReader(clip, stride=1, batch=8)
    assert reader.ring == 3  # fewer frames than a batch: the receiver thread drains the ring as frames arrive
    got = _read_all(reader)
    assert [len(fb.images) for fb in got] == [8, 8, 8, 8, 5]
    assert [im.tobytes() for fb in got for im in fb.images] == [im.tobytes() for _, im in _plain_opencv(clip, 1)]


def test_auto_is_the_thread_reader_and_unknown_decoders_are_refused(clip):
    reader = open_reader(clip, decoder="auto")
    assert reader.kind == "thread" and reader.fallback is None
    reader.close()
    with pytest.raises(ValueError, match="unknown decoder"):
        open_reader(clip, decoder="gstreamer")


def test_torchcodec_missing_falls_back_with_the_import_error(clip):
    from statebox.tracker.runtime import decode_torchcodec

    if decode_torchcodec.VideoDecoder is not None:
        pytest.skip("torchcodec is installed here; the image test runs it")
    reader = open_reader(clip, decoder="torchcodec")
    assert reader.kind == "thread" and "torchcodec cannot be imported" in reader.fallback
    reader.close()


def test_pids_left_reads_cgroup_v2_and_v1(tmp_path):
    assert decode_process.pids_left(tmp_path) is None  # nothing there: unknown
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "pids.max").write_text("256\n")
    (tmp_path / "pids" / "pids.current").write_text("40\n")
    assert decode_process.pids_left(tmp_path) == 216  # v1: the pids controller's own folder
    (tmp_path / "pids.max").write_text("max\n")
    (tmp_path / "pids.current").write_text("3\n")
    assert decode_process.pids_left(tmp_path) is None  # v2, unlimited


def test_the_track_command_takes_a_decoder_and_reports_the_one_used():
    from statebox.tracker.runtime.cli import _decoder_fields, build_parser
    from statebox.tracker.runtime.track import RunStats

    parse = build_parser().parse_args
    assert parse(["track", "--weights", "w.pt"]).decoder == "auto"
    assert parse(["track", "--weights", "w.pt", "--decoder", "process"]).decoder == "process"
    with pytest.raises(SystemExit):
        parse(["track", "--weights", "w.pt", "--decoder", "gstreamer"])
    stats = RunStats(decoder="thread", decoder_fallback="process decoder unavailable: ...")
    assert _decoder_fields(stats) == {"decoder": "thread", "decoder_fallback": "process decoder unavailable: ..."}
