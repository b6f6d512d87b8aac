"""Entry point inside the tracker container: `python -m sbtracker.cli track|train ...`.

Every line the host should record is printed as `SBTRACK <json>` on stdout (progress,
frame accounting, the program chosen, the answer); files go to the output folder the
host mounted read-write (`tracks.jsonl` as frames are processed, `answer.json`,
`run.json`). Exit code 0 = an answer or an abstention was produced; 2 = bad input
(missing video, unreadable weights); anything else = a crash, reported by the host.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from .bench import frame_rows, ultralytics_tracks
from .decoders import DECODERS
from .detcache import DetectionCache, write_rows
from .detect import Detector, DetectorConfig, resolve_device
from .netguard import EVENT_PREFIX
from .programs import abstain, answer_question, features_for, match_rule
from .track import RunStats, TrackerConfig, run_tracking, run_tracking_many
from .train import train

DETECTIONS_FILE = "detections.jsonl"  # per output folder: the rows of every frame tracked (--det-cache)


def emit(payload: dict) -> None:
    sys.stdout.write(EVENT_PREFIX + json.dumps(payload) + "\n")
    sys.stdout.flush()


def _decoder_fields(stats) -> dict:
    """The decoder a stream was read with, and why the requested one was replaced (None when it was not)."""
    return {"decoder": stats.decoder, "decoder_fallback": stats.decoder_fallback}


def _cache_event(cache: DetectionCache | None, stream: int | None = None) -> None:
    if cache is not None:
        emit({"event": "detection_cache", "hits": cache.hits, "misses": cache.misses,
              **({"stream": stream} if stream is not None else {})})


def _find_video(path: str | None) -> Path:
    if path:
        video = Path(path)
        if not video.is_file():
            raise FileNotFoundError(f"{video}: video not found")
        return video
    here = sorted(p for p in Path.cwd().iterdir() if p.suffix.lower() in (".mp4", ".mkv", ".avi", ".mov", ".webm"))
    if len(here) != 1:
        raise FileNotFoundError(f"expected exactly one video in {Path.cwd()}, found {len(here)}")
    return here[0]


def cmd_track(args: argparse.Namespace) -> int:
    if args.streams:
        return _track_streams(args)
    if not args.out:
        raise FileNotFoundError("--out is required (or --streams FILE)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.questions_file:
        return _track_many(args, out)
    question = json.loads(Path(args.question_file).read_text()) if args.question_file else {}
    video = _find_video(args.video)
    text, choices = question.get("question", ""), question.get("choices") or []
    if match_rule(text) is None:  # nothing to compute: abstain without decoding a frame
        payload = abstain("none", "no tracking program matches this question").to_json()
        (out / "answer.json").write_text(json.dumps(payload, indent=2))
        emit({"event": "answer", **payload})
        return 0
    started = time.perf_counter()
    detector = Detector(DetectorConfig(weights=args.weights, imgsz=args.imgsz, conf=args.conf,
                                       device=args.device, half=None))
    emit({"event": "model", "weights": Path(args.weights).name, "device": detector.device,
          "half": detector.half, "precision": detector.precision, "classes": detector.names,
          "load_s": round(time.perf_counter() - started, 2)})

    def progress(stats: RunStats) -> None:
        if stats.batches % args.progress_every == 0:
            emit({"event": "progress", "frames": stats.frames_read, "fps": round(stats.fps, 1)})

    features = features_for(text, list(detector.names.values()))
    cache = DetectionCache() if args.det_cache else None
    if cache is not None:
        cache.load(Path(args.det_cache))
    rows: list[dict] = []
    with (out / "tracks.jsonl").open("w") as sink:
        (log, stats), = run_tracking_many([video], detector, stride=args.stride, batch=args.batch,
                                          tracker_config=TrackerConfig(), features=[features], sinks=[sink],
                                          on_batch=progress, decoder=args.decoder, cache=cache, cache_rows=[rows])
    if cache is not None:
        write_rows(out / DETECTIONS_FILE, rows)
        _cache_event(cache)
    emit({"event": "frames", "decoded": [f.t for f in log.frames], "stride": args.stride})
    ids = sorted({o.id for f in log.frames for o in f.objects})
    emit({"event": "tracked", "frames": stats.frames_read, "fps": round(stats.fps, 2), "tracks": len(ids),
          "detect_s": round(stats.detect_s, 2), "track_s": round(stats.track_s, 2), "wall_s": round(stats.wall_s, 2),
          **_decoder_fields(stats)})
    result = answer_question(text, choices, log)
    payload = result.to_json()
    (out / "answer.json").write_text(json.dumps(payload, indent=2))
    (out / "run.json").write_text(json.dumps({"video": video.name, "frames": stats.frames_read,
                                              "frames_grabbed": stats.frames_grabbed, "fps": stats.fps,
                                              "wall_s": stats.wall_s, "device": detector.device,
                                              **_decoder_fields(stats)}, indent=2))
    emit({"event": "answer", **payload})
    return 0


def _track_streams(args: argparse.Namespace) -> int:
    """Many (video, question, output folder) streams through one model and one batched forward pass per step.

    The streams file is a JSON list of {"video", "question_file", "out", "det_cache"?}: each stream is
    what one `track --video V --question-file Q --out O` run would be, with the same files
    in its own output folder (tracks.jsonl as frames are tracked, answer.json, run.json) and
    the same events on stdout, each tagged with `"stream": i`. Frames of all streams share
    each forward pass (`run_tracking_many`); every stream keeps its own ByteTrack state, so
    its tracks are those of a single-stream run (tested). Streams whose question no rule
    maps abstain without a frame decoded. A stream with a `det_cache` rows file (read when it
    exists) shares one detection cache with the others (detcache.py) and gets its rows in
    `out/detections.jsonl`.
    """
    entries = json.loads(Path(args.streams).read_text())
    if not isinstance(entries, list) or not entries:
        raise FileNotFoundError(f"{args.streams}: expected a non-empty JSON list of {{video, question_file, out}}")
    active: list[tuple[int, Path, str, list, Path]] = []
    cache: DetectionCache | None = None
    for i, entry in enumerate(entries):
        out = Path(entry["out"])
        out.mkdir(parents=True, exist_ok=True)
        qfile = entry.get("question_file")
        question = json.loads(Path(qfile).read_text()) if qfile else {}
        text, choices = question.get("question", ""), question.get("choices") or []
        if match_rule(text) is None:
            payload = abstain("none", "no tracking program matches this question").to_json()
            (out / "answer.json").write_text(json.dumps(payload, indent=2))
            emit({"event": "answer", "stream": i, **payload})
            continue
        active.append((i, _find_video(entry.get("video")), text, choices, out))
        if entry.get("det_cache"):
            cache = cache or DetectionCache()
            cache.load(Path(entry["det_cache"]))
    if not active:
        return 0
    started = time.perf_counter()
    detector = Detector(DetectorConfig(weights=args.weights, imgsz=args.imgsz, conf=args.conf, device=args.device))
    emit({"event": "model", "weights": Path(args.weights).name, "device": detector.device, "half": detector.half,
          "precision": detector.precision, "classes": detector.names, "load_s": round(time.perf_counter() - started, 2),
          "streams": len(active)})

    def progress(stats: RunStats) -> None:
        if stats.batches % args.progress_every == 0:
            emit({"event": "progress", "frames": stats.frames_read, "fps": round(stats.fps, 1)})

    names = list(detector.names.values())
    sinks = [(out / "tracks.jsonl").open("w") for *_, out in active]
    rows: list[list[dict]] = [[] for _ in active]
    try:
        results = run_tracking_many([video for _, video, *_ in active], detector, stride=args.stride,
                                    batch=args.batch, tracker_config=TrackerConfig(),
                                    features=[features_for(text, names) for _, _, text, _, _ in active],
                                    sinks=sinks, on_batch=progress, decoder=args.decoder, cache=cache, cache_rows=rows)
    finally:
        for sink in sinks:
            sink.close()
    for (i, video, text, choices, out), (log, stats), stream_rows in zip(active, results, rows):
        if entries[i].get("det_cache") and cache is not None:
            write_rows(out / DETECTIONS_FILE, stream_rows)
            _cache_event(cache, i)
        emit({"event": "frames", "stream": i, "decoded": [f.t for f in log.frames], "stride": args.stride})
        ids = sorted({o.id for f in log.frames for o in f.objects})
        emit({"event": "tracked", "stream": i, "frames": stats.frames_read, "tracks": len(ids),
              "wall_s": round(stats.wall_s, 2), "streams": len(active), **_decoder_fields(stats)})
        payload = answer_question(text, choices, log).to_json()
        (out / "answer.json").write_text(json.dumps(payload, indent=2))
        (out / "run.json").write_text(json.dumps({"video": video.name, "frames": stats.frames_read,
                                                  "frames_grabbed": stats.frames_grabbed, "wall_s": stats.wall_s,
                                                  "device": detector.device, "streams": len(active),
                                                  **_decoder_fields(stats)}, indent=2))
        emit({"event": "answer", "stream": i, **payload})
    return 0


def _track_many(args: argparse.Namespace, out: Path) -> int:
    """Track each video once, then answer many questions, each on the frames before its `until` time.

    The questions file is a list of {key, question, choices, until, video}; `video`
    defaults to --video. ByteTrack is online (a frame's tracks depend only on earlier
    frames), so the prefix of one run equals a run on the video cut at `until`: suite
    evaluation needs one tracking pass per video instead of one per streaming query, and
    one container (one model load) for many videos.
    """
    questions = json.loads(Path(args.questions_file).read_text())
    by_video: dict[str, list[dict]] = {}
    for q in questions:
        by_video.setdefault(q.get("video") or str(_find_video(args.video)), []).append(q)
    detector = Detector(DetectorConfig(weights=args.weights, imgsz=args.imgsz, conf=args.conf, device=args.device))
    with (out / "answers.jsonl").open("w") as answers:
        for video_path, video_questions in by_video.items():
            video = _find_video(video_path)
            features: dict[str, set[str]] = {}
            for q in video_questions:
                for name, classes in features_for(q.get("question", ""), list(detector.names.values())).items():
                    features.setdefault(name, set()).update(classes)
            with (out / f"{video.stem}.tracks.jsonl").open("w") as sink:
                log, stats = run_tracking(video, detector, stride=args.stride, batch=args.batch,
                                          tracker_config=TrackerConfig(), features=features, sink=sink,
                                          decoder=args.decoder)
            emit({"event": "tracked", "video": video.name, "frames": stats.frames_read, "fps": round(stats.fps, 2),
                  **_decoder_fields(stats)})
            for q in video_questions:
                until = q.get("until")
                part = log if until is None else replace(log, frames=[f for f in log.frames if f.t < until])
                payload = {"key": q.get("key"),
                           **answer_question(q.get("question", ""), q.get("choices") or [], part).to_json()}
                answers.write(json.dumps(payload) + "\n")
                answers.flush()
                emit({"event": "answer", **payload})
    return 0


def cmd_peer(args: argparse.Namespace) -> int:
    """ultralytics' own `model.track(stream=True)` loop over each video, for accuracy comparisons:
    writes OUT/<video stem>.ultralytics.tracks.jsonl ({frame, objects: [{id, xyxy}]} per frame)."""
    from ultralytics import YOLO  # heavy (torch): only for this command

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(args.device)
    model = YOLO(args.weights, task="detect")
    for path in args.video:
        video = _find_video(path)
        frames = ultralytics_tracks(model, video, imgsz=args.imgsz, conf=args.conf, iou=DetectorConfig("").iou,
                                    device=device, half=device != "cpu", stride=args.stride)
        with (out / f"{video.stem}.ultralytics.tracks.jsonl").open("w") as sink:
            for row in frame_rows(frames):
                sink.write(json.dumps(row) + "\n")
        emit({"event": "peer_tracked", "video": video.name, "frames": len(frames)})
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    result = train(Path(args.data), args.model, args.epochs, args.imgsz, args.device, Path(args.out),
                   batch=args.batch, seed=args.seed, init=args.init, emit=emit, freeze=args.freeze, lr0=args.lr0)
    emit({"event": "trained", **result})
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbtracker", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("track", help="detect + track a video, then answer the question (or abstain)")
    t.add_argument("--video", help="the video (default: the one video in the working directory)")
    t.add_argument("--question-file", help="JSON {question, choices}")
    t.add_argument("--questions-file", help="JSON [{key, question, choices, until}]: track once, answer each")
    t.add_argument("--streams", help="JSON [{video, question_file, out}]: many streams, one model, shared forward passes")
    t.add_argument("--weights", required=True)
    t.add_argument("--out", help="output folder (required unless --streams)")
    t.add_argument("--imgsz", type=int, default=320)
    t.add_argument("--conf", type=float, default=0.1)
    t.add_argument("--stride", type=int, default=1)
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--device", default="auto")
    t.add_argument("--decoder", choices=DECODERS, default="auto",
                   help="thread | process (OpenCV in a child process) | torchcodec (NVDEC on a GPU) | auto (thread)")
    t.add_argument("--progress-every", type=int, default=4)
    t.add_argument("--det-cache", help="JSON lines of earlier detections by frame pixels (detcache.py): reused, and "
                                       "OUT/detections.jsonl gets this run's rows")
    t.set_defaults(func=cmd_track)
    q = sub.add_parser("peer", help="ultralytics' own model.track loop over videos (accuracy comparisons)")
    q.add_argument("--video", action="append", required=True)
    q.add_argument("--weights", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--imgsz", type=int, default=320)
    q.add_argument("--conf", type=float, default=0.1)
    q.add_argument("--stride", type=int, default=1)
    q.add_argument("--device", default="auto")
    q.set_defaults(func=cmd_peer)
    r = sub.add_parser("train", help="train a detector from a model yaml on a YOLO data set")
    r.add_argument("--data", required=True, help="data.yaml of the exported data set")
    r.add_argument("--model", default="yolov8n.yaml")
    r.add_argument("--epochs", type=int, default=30)
    r.add_argument("--imgsz", type=int, default=320)
    r.add_argument("--device", default="cpu")
    r.add_argument("--batch", type=int, default=16)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--init", help="local weights to start from (default: random init from the yaml)")
    r.add_argument("--freeze", type=int, default=0, help="keep the first N layers as they are (10: the backbone)")
    r.add_argument("--lr0", type=float, default=None, help="learning rate, plain SGD, no warm-up (default: ultralytics' auto)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except FileNotFoundError as exc:
        emit({"event": "error", "kind": "input", "message": str(exc)})
        print(f"sbtracker: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
