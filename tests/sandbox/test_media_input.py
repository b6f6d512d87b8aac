"""A "video" someone hands over that makes the host's decoders open other files (media_input's allow-lists).

ffmpeg picks a demuxer by content: an HLS playlist or an ffconcat list saved as `clip.mp4` is read as one, and
it opens the files it names. Before the allow-lists, the host's ffmpeg copied the playlist's target (any video on
the host, by absolute path) into the attempt's workspace as the question's video, and PyAV decoded a concat list's
sibling files. Each reader is tried on both files; real containers (and awkward names) still open."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from statebox.benchmarks.synthetic.video import read_frames
from statebox.benchmarks.transforms import apply
from statebox.errors import UserError
from statebox.media_input import opencv_capture
from statebox.sandbox.videocheck import VideoError, inspect_video
from statebox.sandbox import workspace
from statebox.sandbox.workspace import clean_copy, run_stoppable

from .conftest import make_video


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    """A private video elsewhere on the host, and in a dataset folder a playlist naming it and a concat list naming
    a video beside it, both saved as `.mp4`."""
    private = make_video(tmp_path_factory.mktemp("private") / "private.mp4", seconds=2)
    dataset = tmp_path_factory.mktemp("dataset")
    make_video(dataset / "beside.mp4", seconds=2)
    playlist = dataset / "clip.mp4"
    playlist.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\n{private}\n#EXT-X-ENDLIST\n")
    concat = dataset / "list.mp4"
    concat.write_text("ffconcat version 1.0\nfile beside.mp4\n")
    return {"hls": playlist, "concat": concat}


@pytest.mark.parametrize("kind", ["hls", "concat"])
def test_the_preflight_probe_refuses_a_file_that_names_other_files(hostile, kind):
    with pytest.raises(VideoError) as info:
        inspect_video(hostile[kind])
    assert str(info.value).startswith(f"{hostile[kind]}: a {kind} file, not a video container statebox opens")


@pytest.mark.parametrize("kind", ["hls", "concat"])
def test_the_workspace_copy_refuses_it_and_writes_nothing(hostile, kind, tmp_path, monkeypatch):
    """Refused at the first ffmpeg run: the refusal is not a codec mp4 cannot hold, so no re-encode is tried (before,
    the stream copy failed, a re-encode ran the refused file through ffmpeg again, then a probe named the cause)."""
    runs: list[str] = []

    def counted(cmd, *args, **kwargs):
        runs.append(cmd[0])
        return run_stoppable(cmd, *args, **kwargs)

    monkeypatch.setattr(workspace, "run_stoppable", counted)
    out = tmp_path / "video.mp4"
    with pytest.raises(UserError, match=f"^{hostile[kind]}: a {kind} file, not a video container"):
        clean_copy(hostile[kind], out, cut_at=None, reencode=False)
    assert not out.exists()
    assert runs == ["ffmpeg"]


@pytest.mark.parametrize("kind", ["hls", "concat"])
def test_the_twin_transform_refuses_it(hostile, kind, tmp_path):
    with pytest.raises(UserError, match=f"a {kind} file, not a video container"):
        apply("mirror", hostile[kind], tmp_path / "twin.mp4")
    assert not (tmp_path / "twin.mp4").exists()


@pytest.mark.parametrize("kind", ["hls", "concat"])
def test_the_host_s_pyav_and_opencv_readers_refuse_it(hostile, kind):
    import av

    with pytest.raises(av.error.FFmpegError):
        next(read_frames(hostile[kind]))
    capture = opencv_capture(hostile[kind])
    try:
        assert not capture.isOpened()
    finally:
        capture.release()


@pytest.mark.parametrize("name", ["plain.mp4", "12:30 take.mp4", "-dash.mp4", "clip.mkv", "clip.avi", "clip.webm"])
def test_real_containers_and_awkward_names_still_open_everywhere(tmp_path, name, monkeypatch):
    source = tmp_path / "src.mp4"
    make_video(source, seconds=2)
    video = tmp_path / name
    codec = ["-c:v", "libvpx-vp9"] if name.endswith(".webm") else ["-c:v", "mpeg4"] if name.endswith(".avi") else ["-c", "copy"]
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(source), *codec, f"file:{video}"], check=True)
    assert inspect_video(video).duration_s == pytest.approx(2, abs=0.2)
    monkeypatch.chdir(tmp_path)  # a relative name starting with `-` is not read as an option
    clean_copy(Path(name), tmp_path / "out.mp4", cut_at=None, reencode=False)
    assert inspect_video(tmp_path / "out.mp4").duration_s == pytest.approx(2, abs=0.2)
    assert sum(1 for _ in read_frames(video)) == 20
    capture = opencv_capture(video)
    try:
        assert capture.isOpened() and capture.read()[0]
    finally:
        capture.release()


def test_frames_past_8k_are_refused_before_any_host_decoder_sees_them(tmp_path):
    """A few hundred kilobytes declare 8000x4400 frames (35 million pixels each); the preflight says so in one line."""
    big = tmp_path / "big.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=blue:size=8000x4400:rate=1", "-frames:v", "2",
                    "-c:v", "mjpeg", "-pix_fmt", "yuvj420p", str(big)], check=True)
    with pytest.raises(VideoError, match=r"frames of 8000x4400 pixels, more than 8K"):
        inspect_video(big)
    at_8k = tmp_path / "at8k.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=blue:size=7680x4320:rate=1", "-frames:v", "2",
                    "-c:v", "mjpeg", "-pix_fmt", "yuvj420p", str(at_8k)], check=True)
    assert inspect_video(at_8k).duration_s == pytest.approx(2, abs=0.1)


def test_an_image_named_as_a_video_is_refused_with_its_demuxer_named(tmp_path):
    """An attack of the 2026-12-01 review: a PNG saved as `img%03d.mp4` (a name image2 would read as a numbered
    sequence of other files). The image demuxers are not on the allow-list: refused at the probe and the copy, in one
    line naming what it is, nothing written."""
    png = tmp_path / "img%03d.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "color=red:s=64x64", "-frames:v", "1", "-f", "image2",
                    "-update", "1", str(tmp_path / "frame.png")], check=True)
    png.write_bytes((tmp_path / "frame.png").read_bytes())
    with pytest.raises(VideoError, match=r"a png_pipe file, not a video container statebox opens .* or an image is refused"):
        inspect_video(png)
    with pytest.raises(UserError, match=r"a png_pipe file, not a video container"):
        clean_copy(png, tmp_path / "out.mp4", cut_at=None, reencode=False)
    assert not (tmp_path / "out.mp4").exists()
