"""EC-Bench and EOC-Bench through the real run path: `statebox run` with the `shell` agent in real Docker sandboxes.

- EC-Bench: the agent reads instruction.txt, cuts the audio it needs with `vtools audio`
  inside the sandbox, and answers in the paper's JSON (answer + evidence clips);
  `statebox run --json` reports the span IoU, equal to `statebox score` on the same responses
  and to the value computed here by hand.
- EOC-Bench: the agent finds, in prompt_frame.png, the colour the instruction names for
  `<object 1>`, and answers the option for where that mark sits; the official parser
  scores it correct (and a wrong-colour reading would not be).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pycocotools import mask as coco

pytestmark = [pytest.mark.docker]

STATEBOX = [sys.executable, "-m", "statebox.cli"]

EC_CSV = (
    "video_url,video_id,video_type,question_id,question_type,task_type,question,clips,answer,count_details,video_path\n"
    ',vid_a,synthetic,ecq_beeps,C,Counting,How many beeps are there?,"[0:00:01,0:00:03]",2,,tone_clip.mp4\n'
    ',vid_a,synthetic,ecq_flash,A,Counting,How many flashes are there?,"[0:00:00,0:00:01], [0:00:02,0:00:03]",3,,tone_clip.mp4\n'
)
# The beeps answer: spans [2, 4] against the truth [1, 3] -> IoU 1/3 (integer seconds, union-set IoU);
# the flashes answer: both truth spans exactly -> IoU 1. Mean over the two answered queries: 2/3.
EC_SCRIPT = r"""
set -e
video=$(ls *.mp4)
if grep -q 'beeps' instruction.txt; then
  vtools audio "$video" --start 1 --end 3 --out seg.wav > audio.json
  python3 -c "import json; r = json.load(open('audio.json')); assert r['samples'] > 30000, r"
  echo '{"results":[{"query_id":1,"answer":"2","clips":[["00:00:02","00:00:04"]]}]}' > answer.txt
else
  echo '{"results":[{"query_id":1,"answer":"3","clips":[["00:00:00","00:00:01"],["00:00:02","00:00:03"]]}]}' > answer.txt
fi
"""


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True)


def _run_json(args: list[str]) -> dict:
    proc = subprocess.run(STATEBOX + args + ["--json"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _responses(run_dir: Path) -> list[dict]:
    import sqlite3

    con = sqlite3.connect(run_dir / "results.sqlite")
    rows = con.execute("SELECT item_id, query_index, response, status FROM results ORDER BY item_id").fetchall()
    con.close()
    assert all(status == "ok" for *_, status in rows), rows
    return [{"id": i, "query_index": q, "response": r} for i, q, r, _ in rows]


def test_ecbench_run_reports_span_iou_equal_to_score(tmp_path, docker_engine):
    videos = tmp_path / "videos"
    videos.mkdir()
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=96x64:rate=5:d=4",
            "-f", "lavfi", "-i", "aevalsrc=exprs='if(between(t,1.5,1.7),0.5*sin(2*PI*1000*t),0)':s=16000:d=4",
            "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(videos / "tone_clip.mp4"))
    data = tmp_path / "dataset.csv"
    data.write_text(EC_CSV)
    run_dir = tmp_path / "run"
    out = _run_json(["run", "--agent", "shell", "--bench", "ecbench", "--data", str(data), "--videos", str(videos),
                     "--run-dir", str(run_dir), "--option", f"command={EC_SCRIPT}"])
    (result,) = out["results"]
    assert result["n"] == 2
    assert result["metrics"]["span_miou"] == pytest.approx(2 / 3, abs=1e-9)
    assert result["metrics"]["counting_accuracy"] == pytest.approx(1.0)
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(p) + "\n" for p in _responses(run_dir)))
    proc = subprocess.run(STATEBOX + ["score", "--bench", "ecbench", "--data", str(data), "--predictions",
                                      str(predictions), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    scored = json.loads(proc.stdout)
    for name in ("span_miou", "span_miou_hull", "counting_accuracy", "counting_mae"):
        assert scored["metrics"][name] == pytest.approx(result["metrics"][name], abs=1e-12), name
    # the instruction asked for the official JSON, and the attempt saw the audio track
    events = [json.loads(line) for line in next(run_dir.glob("attempts/*/events.jsonl")).read_text().splitlines()]
    instruction = next(e["text"] for e in events if e["kind"] == "message")
    assert '"clips":[["00:04:12","00:07:23"]' in instruction and "5-second rule" in instruction


W, H = 192, 96
EOC_SCRIPT = r"""
python3 - <<'PY'
import re
import cv2
import numpy as np
text = open("instruction.txt").read()
colour = re.search(r"<object 1>: (\w+)", text).group(1)
rgb = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 255, 0)}[colour]
image = cv2.imread("prompt_frame.png")[:, :, ::-1]
ys, xs = np.nonzero((image == rgb).all(axis=-1))
third = int(3 * xs.mean() / image.shape[1])
open("answer.txt", "w").write("<choice>%s</choice>" % "ABC"[third])
PY
"""


def test_eocbench_agent_answers_from_the_marked_colour(tmp_path, docker_engine):
    videos = tmp_path / "videos"
    videos.mkdir()
    _ffmpeg("-f", "lavfi", "-i", f"color=c=gray:size={W}x{H}:rate=5:d=2", "-c:v", "libx264", "-pix_fmt", "yuv420p",
            str(videos / "kitchen.mp4"))
    mask = np.zeros((H, W), np.uint8)
    mask[40:70, 140:180] = 1  # <object 2> on the right third
    rle = coco.encode(np.asfortranarray(mask))
    rows = []
    for idx, box, point, answer in ((101, [10, 20, 50, 60], [96, 48], "b"), (102, [70, 20, 120, 60], [20, 30], "a")):
        # <object 0> by box, <object 1> by point, <object 2> by mask; the question is about <object 1>
        rows.append({"idx": idx, "video_path": "kitchen.mp4", "question": "Which third of the frame holds <object 1>?",
                     "choices": {"a": "the left third", "b": "the middle third", "c": "the right third"},
                     "answer": [answer], "choice_type": "single-choice", "video_type": "Immediate State Recognition",
                     "box": [box, None, None], "point": [None, point, None],
                     "mask": [None, None, {"counts": rle["counts"].decode(), "size": [H, W]}]})
    data = tmp_path / "eoc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    out = _run_json(["run", "--agent", "shell", "--bench", "eocbench", "--data", str(data), "--videos", str(videos),
                     "--run-dir", str(run_dir), "--option", f"command={EOC_SCRIPT}"])
    (result,) = out["results"]
    assert result["n"] == 2 and result["metrics"]["accuracy"] == pytest.approx(1.0), result
    responses = {p["id"]: p["response"] for p in _responses(run_dir)}
    assert responses == {"101": "<choice>B</choice>", "102": "<choice>A</choice>"}
    # reading the wrong object's colour (red, the box of <object 0>) would have failed item 101
    from statebox.benchmarks import load_benchmark
    from statebox.scoring import score_query

    item = next(i for i in load_benchmark("eocbench", data).items if i.id == "101")
    assert score_query("eocbench", item, 0, "<choice>A</choice>").metrics["correct"] == 0.0
