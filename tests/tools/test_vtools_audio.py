"""`vtools audio`: a segment of the audio track as WAV, at the right time, inside the allowed folders only."""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from vtools_support import VTOOLS, vt


@pytest.fixture(scope="module")
def beep_video(tmp_path_factory) -> Path:
    """3 s of grey with a 1 kHz beep from 1.0 to 1.2 s, silence elsewhere."""
    root = tmp_path_factory.mktemp("audio")
    path = root / "beep.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:size=64x48:rate=10:d=3",
                    "-f", "lavfi", "-i", "aevalsrc=exprs='if(between(t,1,1.2),0.5*sin(2*PI*1000*t),0)':s=16000:d=3",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(path)], check=True)
    return path


def _wav(path: Path) -> tuple[np.ndarray, int, int]:
    with wave.open(str(path)) as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), "<i2"), wav.getframerate(), wav.getnchannels()


def test_segment_holds_the_beep_at_its_time(beep_video):
    root = beep_video.parent
    report = vt("audio", str(beep_video), "--start", "0.5", "--end", "2.0", "--out", "seg.wav", root=root)
    samples, rate, channels = _wav(root / "seg.wav")
    assert (rate, channels) == (16000, 1) and report["samples"] == len(samples)
    assert abs(len(samples) / rate - 1.5) < 0.03
    window = 800  # 50 ms
    energy = np.array([np.abs(samples[i:i + window].astype(float)).mean() for i in range(0, len(samples) - window, window)])
    loud = np.nonzero(energy > energy.max() / 4)[0] * window / rate + 0.5  # back on the video's clock
    assert loud.min() == pytest.approx(1.0, abs=0.06) and loud.max() == pytest.approx(1.15, abs=0.06)
    stereo = vt("audio", str(beep_video), "--start", "0", "--end", "1", "--out", "st.wav", "--channels", "2",
                "--rate", "8000", root=root)
    assert stereo["channels"] == 2 and _wav(root / "st.wav")[1:] == (8000, 2)


@pytest.mark.parametrize("args, words", [
    (["--start", "2", "--end", "1", "--out", "x.wav"], "need 0 <= --start < --end"),
    (["--start", "0", "--end", "1", "--out", "x.mp3"], "must name a .wav file"),
    (["--start", "0", "--end", "900", "--out", "x.wav"], "longer than the limit"),
    (["--start", "0", "--end", "1", "--out", "/etc/x.wav"], "refusing to write"),
])
def test_bad_requests_are_one_line_and_exit_2(beep_video, args, words):
    proc = vt("audio", str(beep_video), *args, root=beep_video.parent, ok=False)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_refuses_videos_outside_the_workspace_and_silent_videos(beep_video, tmp_path):
    proc = subprocess.run([sys.executable, str(VTOOLS), "audio", str(beep_video), "--start", "0", "--end", "1",
                           "--out", "x.wav", "--root", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and "outside the allowed folders" in proc.stderr
    silent = tmp_path / "silent.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:size=64x48:rate=10:d=1",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", str(silent)], check=True)
    proc = vt("audio", str(silent), "--start", "0", "--end", "1", "--out", "x.wav", root=tmp_path, ok=False)
    assert proc.returncode == 2 and "has no audio track" in proc.stderr


def test_a_planted_link_at_the_output_is_not_followed(beep_video, tmp_path):
    target = tmp_path / "outside.txt"
    target.write_text("keep")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "v.mp4").write_bytes(beep_video.read_bytes())
    (root / "link.wav").symlink_to(target)
    proc = vt("audio", str(root / "v.mp4"), "--start", "0", "--end", "1", "--out", "link.wav", root=root, ok=False)
    assert proc.returncode == 2 and "cannot write link.wav" in proc.stderr and target.read_text() == "keep"
