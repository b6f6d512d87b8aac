"""vtools on the host: the CLI contract, frame accuracy, path refusal, grid/crop/motion.

vtools runs as the real script (a subprocess), exactly as agents call it in the sandbox;
`--root` points it at the test folder instead of /workspace.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from vtools_support import load_vtools, vt

def decode_image(data: str) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(base64.b64decode(data), np.uint8), cv2.IMREAD_COLOR)


def reference_frames(path: Path) -> list[np.ndarray]:
    """Every frame, decoded plainly from the start (no seeking, no skipping), in presentation order."""
    vtools = load_vtools()
    with av.open(str(path)) as container:
        frames = [(f.pts, vtools.frame_to_bgr(f)) for f in container.decode(video=0)]
    return [img for _, img in sorted(frames, key=lambda x: x[0])]


# ------------------------------------------------------------------ probe and selection


def test_probe_reports_duration_fps_frames_size(clips):
    info = vt("probe", str(clips["h264"]), root=clips["h264"].parent)
    assert info["tool"] == "vtools" and info["command"] == "probe"
    assert info["fps"] == pytest.approx(10.0)
    assert info["frame_count"] == 80
    assert info["duration"] == pytest.approx(8.0)
    assert (info["width"], info["height"]) == (320, 240)
    assert info["last_frame_time"] == pytest.approx(7.9)


@pytest.mark.parametrize("name", ["h264", "mpeg4"])
def test_seeking_decoder_returns_exactly_the_frames_a_full_decode_gives(clips, name):
    """Seeks, sequential runs and skipped non-reference frames must never shift a frame."""
    vtools = load_vtools()
    path = clips[name]
    reference = reference_frames(path)
    index = vtools.VideoIndex(str(path))
    assert index.frame_count == len(reference)
    rng = np.random.default_rng(7)
    for n in (1, 5, 17, len(reference)):
        wanted = sorted(rng.choice(len(reference), size=n, replace=False).tolist())
        got = dict(vtools.decode_frames(index, wanted, vtools.frame_to_bgr))
        assert sorted(got) == wanted
        for i in wanted:
            assert np.array_equal(got[i], reference[i]), f"{name}: frame {i} differs from a full decode"


def test_times_give_the_frame_on_screen_and_files_are_named_by_timestamp(clips, tmp_path):
    root = clips["h264"].parent
    out = root / "out_times"
    report = vt("frames", str(clips["h264"]), "--times", "1.0,2.5,0.35,2.5", "--out", str(out), root=root)
    times = [f["time"] for f in report["frames"]]
    assert times == sorted(times), "frames are listed in time order"
    assert [f["requested"] for f in report["frames"]] == [0.35, 1.0, 2.5, 2.5]
    assert times == [pytest.approx(0.3), 1.0, 2.5, 2.5]  # 0.35 s at 10 fps shows frame 3 (t=0.3)
    assert report["decoded_times"] == [pytest.approx(0.3), 1.0, 2.5]
    names = sorted(p.name for p in out.iterdir())
    assert names == ["frame_t0000.300.jpg", "frame_t0001.000.jpg", "frame_t0002.500.jpg"]
    reference = reference_frames(clips["h264"])
    for f in report["frames"]:
        image = cv2.imread(f["path"]).astype(int)
        error = {j: np.abs(image - reference[j].astype(int)).mean() for j in (f["index"] - 1, f["index"], f["index"] + 1)}
        assert error[f["index"]] < 6.0 and error[f["index"]] < min(error.values()) + 1e-9  # JPEG loss only


def test_uniform_uses_lmms_eval_indices_and_fps_respects_the_range(clips):
    root = clips["h264"].parent
    report = vt("frames", str(clips["h264"]), "--uniform", "7", "--inline", root=root)
    assert [f["index"] for f in report["frames"]] == np.linspace(0, 79, 7).astype(int).tolist()
    assert all(f["data"] and f["media_type"] == "image/jpeg" for f in report["frames"])
    report = vt("frames", str(clips["h264"]), "--fps", "2", "--start", "1", "--end", "3.2", "--inline", root=root)
    assert [f["time"] for f in report["frames"]] == [1.0, 1.5, 2.0, 2.5, 3.0]
    # --end is a ceiling for explicit times too (streaming queries): nothing after it.
    report = vt("frames", str(clips["h264"]), "--times", "1,5,7.5", "--end", "4", "--inline", root=root)
    assert max(f["time"] for f in report["frames"]) <= 4.0
    # A time past the end of the video gives the last frame, flagged as clamped.
    report = vt("frames", str(clips["h264"]), "--times", "60", "--inline", root=root)
    assert report["frames"][0]["time"] == pytest.approx(7.9) and report["frames"][0]["clamped"] is True


def test_resize_and_max_side(clips):
    root = clips["h264"].parent
    report = vt("frames", str(clips["h264"]), "--times", "1", "--resize", "160x-1", "--inline", root=root)
    assert decode_image(report["frames"][0]["data"]).shape == (120, 160, 3)
    report = vt("frames", str(clips["h264"]), "--times", "1", "--max-side", "100", "--inline", root=root)
    assert decode_image(report["frames"][0]["data"]).shape[:2] == (75, 100)
    report = vt("frames", str(clips["h264"]), "--times", "1", "--max-side", "1000", "--inline", root=root)
    assert decode_image(report["frames"][0]["data"]).shape[:2] == (240, 320)  # never enlarged


# ------------------------------------------------------------------ isolation


def test_refuses_paths_outside_the_allowed_folders(clips, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    outside = clips["h264"]
    proc = vt("probe", str(outside), root=root, ok=False)
    assert proc.returncode == 2 and "refusing to read" in proc.stderr and proc.stdout == ""
    link = root / "innocent.mp4"
    link.symlink_to(outside)  # a symlink inside the workspace pointing out of it
    proc = vt("frames", str(link), "--uniform", "2", root=root, ok=False)
    assert proc.returncode == 2 and "refusing to read" in proc.stderr
    proc = vt("probe", "../" + outside.parent.name + "/" + outside.name, root=root, ok=False)
    assert proc.returncode == 2
    inside = root / "clip.mp4"
    inside.write_bytes(outside.read_bytes())
    proc = vt("frames", "clip.mp4", "--uniform", "1", "--out", "/etc/vtools-test", root=root, ok=False)
    assert proc.returncode == 2 and "refusing to write" in proc.stderr
    assert vt("probe", "clip.mp4", root=root)["frame_count"] == 80


def test_default_roots_are_workspace_and_current_folder(tmp_path, monkeypatch):
    vtools = load_vtools()
    monkeypatch.chdir(tmp_path)
    roots = vtools.allowed_roots(None)
    assert os.path.realpath(tmp_path) in roots
    assert all(r in (os.path.realpath("/workspace"), os.path.realpath(tmp_path)) for r in roots)
    monkeypatch.chdir("/")
    assert os.sep not in vtools.allowed_roots(None), "the filesystem root is never an allowed folder"


def test_bad_requests_are_one_line_errors(clips):
    root = clips["h264"].parent
    for args in (["frames", str(clips["h264"]), "--times", "a,b"],
                 ["frames", str(clips["h264"]), "--fps", "1", "--uniform", "3"],
                 ["crop", str(clips["h264"]), "--box", "5,5,5,5"],
                 ["probe", str(root / "missing.mp4")]):
        proc = vt(*args, root=root, ok=False)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("vtools: error:") and proc.stderr.count("\n") == 1, proc.stderr
    (root / "not_a_video.mp4").write_text("hello")
    proc = vt("probe", str(root / "not_a_video.mp4"), root=root, ok=False)
    assert proc.returncode == 2 and "vtools: error:" in proc.stderr


# ------------------------------------------------------------------ grid, crop, motion


def test_grid_is_a_contact_sheet_with_timestamps_burnt_in(clips):
    root = clips["h264"].parent
    report = vt("grid", str(clips["h264"]), "--uniform", "6", "--cols", "3", "--cell", "160", "--inline", "--format", "png",
                root=root)
    sheet = decode_image(report["data"])
    assert (report["rows"], report["cols"]) == (2, 3)
    assert sheet.shape[:2] == (2 * 120, 3 * 160)
    assert [f["time"] for f in report["frames"]] == report["decoded_times"]
    reference = reference_frames(clips["h264"])
    first = cv2.resize(reference[report["frames"][0]["index"]], (160, 120), interpolation=cv2.INTER_AREA)
    cell = sheet[:120, :160].astype(int)
    label_area = np.abs(cell[:14, :60] - first[:14, :60].astype(int)).mean()
    rest = np.abs(cell[40:, :] - first[40:, :].astype(int)).mean()
    assert label_area > 20 > 1 > rest, "the label is drawn over the frame; the rest of the cell is the frame"


def test_crop_zooms_on_the_box(clips):
    root = clips["h264"].parent
    report = vt("crop", str(clips["h264"]), "--box", "0.25,0.25,0.75,0.75", "--times", "2", "--scale", "2",
                "--inline", root=root)
    assert report["box"] == [80, 60, 240, 180]
    image = decode_image(report["frames"][0]["data"])
    assert image.shape[:2] == (240, 320)
    reference = reference_frames(clips["h264"])[20][60:180, 80:240]
    expected = cv2.resize(reference, (320, 240), interpolation=cv2.INTER_CUBIC)
    assert np.abs(image.astype(int) - expected.astype(int)).mean() < 4.0


def test_motion_finds_the_moving_part_and_the_cut(clips):
    report = vt("motion", str(clips["motion"]), root=clips["motion"].parent)
    times, energy = np.array(report["times"]), np.array(report["energy"])
    assert len(times) == 80
    still = energy[(times > 0.2) & (times < 2.9)]
    moving = energy[(times > 3.2) & (times < 5.9)]
    assert still.max() < 0.002 < moving.mean()
    assert any(5.9 <= c <= 6.1 for c in report["cuts"]), report["cuts"]
    assert report["events"] and all(2.8 <= e["start"] and e["end"] <= 6.1 for e in report["events"])


# ------------------------------------------------------------------ the generated suite's ground truth


def _saturated(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image, cv2.COLOR_BGR2HSV)[..., 1] > 60


def test_frames_match_the_suite_ground_truth(tiny_suite):
    """The frame at time t shows the objects tracks.jsonl places at t (and not those of t +- 1 frame).

    cube_count's camera pans, so every frame's boxes differ from its neighbours'. For each
    time half-way between frames, the coloured pixels of the decoded frame must overlap the
    ground-truth boxes of the frame on screen better than those of the previous/next frame.
    """
    family = tiny_suite / "cube_count"
    stems = sorted(p.name[: -len(".tracks.jsonl")] for p in (family / "gt").glob("*main*.tracks.jsonl"))
    assert stems, "the tiny suite has cube_count main videos"
    wins = losses = checked_visibility = 0
    for stem in stems:
        boxes: dict[int, dict[int, list[int]]] = {}
        meta = json.loads((family / "gt" / f"{stem}.meta.json").read_text())
        for line in (family / "gt" / f"{stem}.tracks.jsonl").read_text().splitlines():
            row = json.loads(line)
            boxes.setdefault(row["frame"], {})
            if row["box"]:
                boxes[row["frame"]][row["id"]] = row["box"]
        n, fps = meta["n_frames"], meta["fps"]
        times = ",".join(f"{(i + 0.5) / fps:.3f}" for i in range(n))
        report = vt("frames", str(family / "videos" / f"{stem}.mp4"), "--times", times, "--inline", "--format", "png",
                    root=tiny_suite)
        assert [f["index"] for f in report["frames"]] == list(range(n))

        def overlap(mask: np.ndarray, frame: int) -> float:
            gt = np.zeros(mask.shape, bool)
            for x1, y1, x2, y2 in boxes.get(frame, {}).values():
                gt[y1:y2 + 1, x1:x2 + 1] = True
            return (mask & gt).sum() / max((mask | gt).sum(), 1)

        for f in report["frames"]:
            i = f["index"]
            mask = _saturated(decode_image(f["data"]))
            area = sum((x2 - x1 + 1) * (y2 - y1 + 1) for x1, y1, x2, y2 in boxes.get(i, {}).values())
            if area == 0:
                assert mask.sum() < 200, f"{stem} frame {i}: no object is visible in the ground truth"
                checked_visibility += 1
                continue
            if area > 1000:
                assert mask.sum() > 0.3 * area, f"{stem} frame {i}: the ground truth has a visible object"
                checked_visibility += 1
            mine = overlap(mask, i)
            for j in (i - 1, i + 1):
                if 0 <= j < n and boxes.get(j) != boxes.get(i):
                    if mine > overlap(mask, j):
                        wins += 1
                    else:
                        losses += 1
    assert wins > 100 and checked_visibility > 50
    # An off-by-one decoder would lose about half of these; the residue is segmentation noise
    # on cubes cut by the frame edge.
    assert losses <= 0.08 * (wins + losses), (wins, losses)
