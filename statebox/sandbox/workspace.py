"""Per-attempt workspaces: one renamed, de-identified video and the question, nothing else.

The folder's host path is random (a bind mount's source path is visible inside the
container in /proc/self/mountinfo, so it must reveal nothing). The folder is its own
size- and inode-limited tmpfs (`limited_fs`): the agent's writes past the policy's
`workspace_mb` / `inodes` fail with ENOSPC in the kernel. The video itself stays on disk
beside it (`<folder>.video/`) and is bind-mounted read-only over a placeholder, so it
costs no workspace budget and cannot be changed, even by root in the container. The video is always
COPIED through ffmpeg with container, stream and chapter metadata removed; a streaming
query is cut (re-encoded) so no frame after the query time exists, verified by decoding
the last frame. A leak gate then checks the result with ffprobe and scans every file's
name and bytes for the original file name, its stem, the item id and the dataset name;
any hit aborts the attempt with `LeakGateError`.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import re
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from statebox.errors import StorageError, UserError
from statebox.media_input import FFMPEG_INPUT_OPTIONS, file_url, refusal, refused_container
from statebox.policies.model import Policy
from statebox.sandbox import limited_fs, prompt_frame
from statebox.sandbox.cleanup import remove_tree
from statebox.sandbox.videocheck import check_video, inspect_video
from statebox.schema import Item, Query
from statebox.signals import run_stoppable

AGENT_UID = 1000
ANSWER_FILE = "answer.txt"
INSTRUCTION_FILE = "instruction.txt"
MIN_NEEDLE_LEN = 4  # shorter ids ("12", "q3") occur by chance in any text; they cannot be told apart
CUT_TOLERANCE_S = 1e-3
ANSWER_MAX_BYTES = 1_000_000

# Tags a clean mp4 may still carry (written by the muxer itself, identifying nothing).
ALLOWED_FORMAT_TAGS = {"major_brand", "minor_version", "compatible_brands"}
ALLOWED_STREAM_TAGS = {"handler_name": {"VideoHandler", "SoundHandler", ""}, "vendor_id": {"[0][0][0][0]", ""},
                       "language": {"und", ""}}

ENCODER_TAG = re.compile(r"^Lavc[0-9.]* ?[A-Za-z0-9_-]*$")

TRANSCRIPT_FILE = "transcript.txt"

ANSWER_FORMATS = {
    "mcq": "Answer with the letter of exactly one option (for example: B).",
    "number": "Answer with a single number (digits, no units).",
    "text": "Answer with a short phrase.",
    "set": "Answer with a comma-separated list of items.",
    "interval": "Answer with a time interval in seconds, as start-end (for example: 3.5-7.0).",
}


# EOC-Bench's own choice prompts (the paper's, verbatim), by answer type.
EOC_FORMATS = {
    "mcq": "Answer directly using the letters of the options given and wrap your response in <choice></choice>. "
           "For example, if the answer is A, then output <choice>A</choice>.",
    "set": "Answer directly using the letters of the options given. There are multiple answers, so wrap your "
           "response in <choice></choice>. For example, if the answer is A and B, then output <choice>A, B</choice>; "
           "if the answer is A, B and C, then output <choice>A, B, C</choice>.",
    "number": "Please output the answer directly in seconds.",
}
# EC-Bench's QA prompt (Fig. 13): the task's answer rules, then the answer and its evidence clips as JSON.
EC_RULES = {
    "Counting": "Counting: numbers only, no sentences; for multiple values, comma-separated (e.g., '2, 5, 7'). "
                "5-second rule: if the same subject reappears within 5 seconds, count it as a single occurrence.",
    "Enumeration": "Enumeration: list items separated by commas; connect ordered sequences with '\u2192' (e.g., "
                   "'forging \u2192 polishing \u2192 decoration \u2192 completion'); no explanations; omit "
                   "ownership names.",
}
EC_OUTPUT = ('Record the evidence clips that support the answer. Output JSON only, in this form: '
             '{"results":[{"query_id":1,"answer":"...","clips":[["00:04:12","00:07:23"],["00:12:12","00:12:56"]]}]} '
             "(clips must list all evidence intervals as [start, end] timestamp pairs, HH:MM:SS from the start "
             "of the video).")


AUDIO_NOTE = ("The video's audio track is part of the video and may be used (for example "
              "`vtools audio VIDEO --start S --end E --out segment.wav` writes a segment as WAV).")


def answer_format(item: Item) -> str:
    """The answer-format paragraph for an item: the benchmark's official one where it has one."""
    if item.benchmark == "eocbench" and item.answer_type in EOC_FORMATS:
        return EOC_FORMATS[item.answer_type]
    if item.benchmark == "ecbench" and item.labels.get("task_type") in EC_RULES:
        return f"{EC_RULES[item.labels['task_type']]}\n{EC_OUTPUT}"
    return ANSWER_FORMATS.get(item.answer_type, ANSWER_FORMATS["text"])


class LeakGateError(UserError):
    """The prepared workspace still identifies the source video; the attempt must not start."""


@dataclass
class Workspace:
    """A prepared, de-identified host folder mounted at /workspace."""

    path: Path
    video_name: str
    instruction: str
    query_time: float | None
    duration_s: float | None = None
    reencoded: bool = False
    cut: bool = False
    gate_notes: list[str] = field(default_factory=list)

    @property
    def video_path(self) -> Path:
        return self.path / self.video_name

    @property
    def video_store(self) -> Path:
        """The on-disk folder that holds the video the workspace bind-mounts read-only."""
        return video_store_of(self.path)

    def read_output(self, name: str = ANSWER_FILE, max_bytes: int = ANSWER_MAX_BYTES) -> str | None:
        """Read a file the agent wrote, refusing symlinks and non-regular files.

        The agent controls the workspace: an `answer.txt` that is a symlink to a host file
        (the original video, an answer key) would otherwise be read by the host for it.
        """
        if "/" in name or name in ("", ".", ".."):
            raise UserError(f"workspace output name {name!r} must be a plain file name")
        try:
            handle = open_regular(self.path / name)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symlink; EINVAL: a fifo, device or folder
            raise UserError(f"workspace output {name!r} is not a regular file ({exc.strerror}); refused") from exc
        with handle:
            return handle.read(max_bytes).decode("utf-8", "replace")

    def cleanup(self) -> None:
        """Unmount and remove the folder and its video store; raises `CleanupError` when something stays.

        Unmounting the tmpfs drops whatever the agent wrote at once (any depth, any
        permission); `remove_tree` then removes the empty mount point and the video copy.
        """
        limited_fs.unmount_all(self.path)
        remove_tree(self.path)
        remove_tree(self.video_store)


def open_regular(path: Path) -> BinaryIO:
    """Open a file an agent wrote for reading, without following a link it planted.

    ELOOP for a symlink (O_NOFOLLOW), EINVAL for a fifo, device or folder (O_NONBLOCK keeps
    a fifo from hanging the host before the check); the one door for host reads of agent files.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which raises its own error for a folder
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def video_store_of(folder: Path) -> Path:
    return folder.with_name(folder.name + ".video")


@dataclass
class LimitedFolder:
    """A writable folder for a container that is not a workspace (the tracker's /out, tests)."""

    path: Path

    def cleanup(self) -> None:
        limited_fs.unmount_all(self.path)
        remove_tree(self.path)

    def copy_out(self, dest: Path, max_file_bytes: int = 256 * 1024 * 1024) -> list[str]:
        """Copy the regular files the container left here into `dest`; never follows a link.

        Symlinks, fifos and devices the container planted are skipped (a link to a host
        path would otherwise be read by the host for it); returns the relative names copied.
        """
        copied: list[str] = []
        dest = Path(dest)
        for top, dirs, files in os.walk(self.path, followlinks=False):
            rel_top = Path(top).relative_to(self.path)
            for name in files:
                src = Path(top) / name
                try:
                    handle = open_regular(src)
                except OSError:
                    continue  # a symlink, a fifo or device, or gone
                target = dest / rel_top / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with handle, open(target, "wb") as out:
                    left = max_file_bytes
                    while left > 0 and (chunk := handle.read(min(1 << 20, left))):
                        out.write(chunk)
                        left -= len(chunk)
                copied.append(str(rel_top / name))
        return copied

    def __enter__(self) -> "LimitedFolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def limited_folder(size_mb: int, *, inodes: int = 10_000, root: Path | str | None = None,
                   owner_uid: int = AGENT_UID) -> LimitedFolder:
    """A fresh random folder under the workspace root, mounted as a tmpfs of `size_mb` and `inodes`.

    Every folder a container may write to must be one of these (the engine refuses
    others): the kernel, not a poll, keeps the agent inside its budget.
    """
    folder = workspace_root(root) / secrets.token_hex(16)
    folder.mkdir(mode=0o700)
    try:
        limited_fs.mount_limited(folder, size_bytes=size_mb * 1024 * 1024, inodes=inodes,
                                 uid=owner_uid if os.geteuid() == 0 else os.geteuid(),
                                 gid=owner_uid if os.geteuid() == 0 else os.getegid(), mode=0o700)
    except BaseException:
        remove_tree(folder)
        raise
    return LimitedFolder(folder)


def workspace_root(root: Path | str | None = None) -> Path:
    """The statebox temp root: $STATEBOX_WORKSPACE_ROOT, else <tmp>/statebox-ws (traversable, not listable)."""
    base = Path(root or os.environ.get("STATEBOX_WORKSPACE_ROOT") or Path(tempfile.gettempdir()) / "statebox-ws")
    base.mkdir(parents=True, exist_ok=True)
    try:
        base.chmod(0o711)
    except PermissionError:
        pass
    key = str(base.resolve())
    if key not in _REAPED:  # once per process and root: unmount what a killed statebox left
        _REAPED.add(key)
        limited_fs.reap_stale(base)
    return base


_REAPED: set[str] = set()


def _give_to_agent(path: Path, mode: int) -> None:
    """Make a workspace entry usable by uid 1000 inside the container."""
    if os.geteuid() == 0:
        os.chown(path, AGENT_UID, AGENT_UID)
        path.chmod(mode)
    else:  # a non-root host user: let "others" (uid 1000 in the container) in
        path.chmod(mode | (0o007 if path.is_dir() else 0o006))


# ------------------------------------------------------------------ media


class RefusedContainer(UserError):
    """The input is a playlist or file list (media_input's allow-list refused its demuxer): no re-encode can help."""


def _run(cmd: list[str], what: str, source: Path) -> str:
    if shutil.which(cmd[0]) is None:
        raise UserError(f"{cmd[0]} is not installed; install ffmpeg (apt-get install -y ffmpeg)")
    proc = run_stoppable(cmd)  # a stop signal kills it (Cancelled) rather than waiting for a long cut
    if proc.returncode != 0:
        if "No space left on device" in proc.stderr or "Disk quota exceeded" in proc.stderr:
            # a full disk stops the run; it is not the video's fault
            raise StorageError(f"{what}: no space left on device ({Path(cmd[-1]).parent})")
        container = refused_container(proc.stderr)
        if container is not None:
            raise RefusedContainer(refusal(source, container))
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UserError(f"{what}: {tail[:300]}")
    return proc.stdout


def probe(path: Path) -> dict[str, Any]:
    out = _run(["ffprobe", "-v", "error", *FFMPEG_INPUT_OPTIONS, "-show_format", "-show_streams", "-show_chapters",
                "-of", "json", file_url(path)], f"{path}: not a readable video", path)
    return json.loads(out)


STRIP_ARGS = ["-map_metadata", "-1", "-map_chapters", "-1", "-map_metadata:s:v", "-1", "-map_metadata:s:a", "-1",
              "-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact", "-sn", "-dn",
              "-metadata", "creation_time="]
ENCODE_ARGS = ["-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-pix_fmt", "yuv420p",
               "-x264-params", "no-info=1", "-c:a", "aac", "-b:a", "128k"]


def clean_copy(src: Path, dst: Path, *, cut_at: float | None, reencode: bool, audio: str = "keep") -> bool:
    """Write a metadata-free copy of `src` to `dst`; returns True when it was re-encoded.

    A cut always re-encodes (a stream copy can only cut at keyframes, which would keep
    frames past the query time); otherwise the streams are copied bit for bit unless
    asked, or unless the codec cannot live in mp4, in which case re-encoding is the fallback.
    The audio track stays (metadata stripped like the video's) unless `audio="drop"`.
    """
    if cut_at is not None:
        check_video(src, cut_at)  # empty, audio-only, or a query time past the end: say so, never cut
    try:
        return _clean_copy(src, dst, cut_at=cut_at, reencode=reencode, audio=audio)
    except (StorageError, RefusedContainer):  # each names its cause already
        raise
    except UserError:
        inspect_video(src)  # names the cause (empty file, no video stream) instead of ffmpeg's words
        raise


def _clean_copy(src: Path, dst: Path, *, cut_at: float | None, reencode: bool, audio: str = "keep") -> bool:
    # the source is opened under media_input's allow-lists (a playlist naming another host file is refused)
    base = ["ffmpeg", "-nostdin", "-v", "error", "-y", *FFMPEG_INPUT_OPTIONS, "-i", file_url(src), "-map", "0:v:0"]
    base += ["-map", "0:a?"] if audio == "keep" else ["-an"]
    if cut_at is not None:
        _run(base + ["-t", f"{cut_at:.6f}"] + ENCODE_ARGS + STRIP_ARGS + [str(dst)], f"{src}: cutting the video", src)
        return True
    if reencode:
        _run(base + ENCODE_ARGS + STRIP_ARGS + [str(dst)], f"{src}: re-encoding the video", src)
        return True
    try:
        _run(base + ["-c", "copy"] + STRIP_ARGS + [str(dst)], f"{src}: copying the video", src)
        return False
    except (StorageError, RefusedContainer):  # a full disk, a playlist: not a codec mp4 cannot hold
        raise
    except UserError:
        _run(base + ENCODE_ARGS + STRIP_ARGS + [str(dst)], f"{src}: re-encoding the video", src)
        return True


def last_frame_time(path: Path) -> float:
    """Timestamp (s) of the last decodable video frame, found by decoding the file's tail."""
    times = [frame.time for frame in prompt_frame.tail_frames(path) if frame.time is not None]
    if not times:
        raise UserError(f"{path}: no decodable video frame")
    return float(max(times))


# ------------------------------------------------------------------ instruction


def _option_line(label: str, text: str) -> str:
    """`A. text`, unless the benchmark's option text already carries its letter ("A. ...", "(A) ...")."""
    head = text[:4].lstrip("(").upper()
    if head.startswith(label) and len(head) > 1 and head[1] in ".):":
        return text
    return f"{label}. {text}"


def render_instruction(item: Item, query: Query, video_name: str, policy: Policy, *,
                       marks: list[prompt_frame.Mark] | None = None, transcript: bool = False) -> str:
    """instruction.txt: the question, the options, the answer format and the policy's prohibitions.

    `marks`: the objects drawn on the prompt frame (EOC-Bench; the paper's colour legend);
    `transcript`: the workspace holds the benchmark's timestamped speech transcript.
    """
    lines = [f"Video: {video_name} (in this folder)."]
    if query.time is not None:
        lines.append(f"The video ends at the moment the question is asked ({query.time:g} s into the recording).")
    if marks:
        lines.append(prompt_frame.legend(marks))
    if item.benchmark == "ecbench" and policy.media.audio == "keep":  # speech/audio questions (type C)
        lines.append(AUDIO_NOTE)
    if transcript:
        lines.append(f"{TRANSCRIPT_FILE} (in this folder) is a timestamped transcript of the video's speech.")
    lines += ["", "Question:", item.question.strip()]
    if item.choices:
        lines += ["", "Options:"]
        for index, choice in enumerate(item.choices):
            lines.append(_option_line(chr(ord("A") + index), choice.strip()))
    fmt = answer_format(item)
    lines += ["", "Answer format:", fmt,
              f"When you are done, write only your final answer to the file {ANSWER_FILE} in this folder,",
              "and end your reply with a last line of the form: ANSWER: <your answer>"]
    if policy.prohibitions.strip():
        lines += ["", "Rules:", policy.prohibitions.strip()]
    return "\n".join(lines) + "\n"


_TRANSCRIPT_START = re.compile(r"^\s*\[(\d+):(\d{2}):(\d{2}(?:\.\d+)?)\s*-")


def cut_transcript(text: str, cut_at: float | None) -> str:
    """The transcript's lines that start before the cut (`[HH:MM:SS.mmm - HH:MM:SS.mmm] text`); all when no cut.

    A streaming query's workspace must hold nothing said after its query time; lines
    without a timestamp are kept only when there is no cut.
    """
    if cut_at is None:
        return text
    kept = []
    for line in text.splitlines():
        match = _TRANSCRIPT_START.match(line)
        if match and int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3]) < cut_at:
            kept.append(line)
    return "\n".join(kept) + ("\n" if kept else "")


# ------------------------------------------------------------------ leak gate


def identifying_needles(original: Path, item_id: str, dataset: str) -> list[str]:
    needles = {original.name, original.stem, item_id, dataset}
    return sorted(n for n in needles if n and len(n.strip()) >= MIN_NEEDLE_LEN)


def _template_words(policy: Policy) -> str:
    """Our own instruction wording: a needle that is an ordinary word of it ("video") identifies nothing."""
    dummy = Item(id="x", benchmark="vstat", video="x", question="", answer_type="text")
    text = (render_instruction(dummy, Query(), "x.mp4", policy) + "".join(ANSWER_FORMATS.values())
            + "".join(EOC_FORMATS.values()) + "".join(EC_RULES.values()) + EC_OUTPUT + AUDIO_NOTE)
    return text.lower()


def _bytes_contain(path: Path, needles: list[str]) -> list[str]:
    """The needles found in a file's bytes: case-insensitive up to 64 MB (instruction.txt, most
    videos), common casings beyond; UTF-16 too, since mp4/QuickTime text atoms can use it."""
    size = path.stat().st_size
    if size == 0:
        return []
    found = []
    if size <= 64 * 1024 * 1024:
        data = path.read_bytes().lower()
        for needle in needles:
            low = needle.lower()
            if low.encode() in data or low.encode("utf-16-le") in data:
                found.append(needle)
        return found
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for needle in needles:
            for variant in {needle, needle.lower(), needle.upper(), needle.title()}:
                if mapped.find(variant.encode()) != -1 or mapped.find(variant.encode("utf-16-le")) != -1:
                    found.append(needle)
                    break
    return found


def leak_gate(folder: Path, video: Path, needles: list[str], policy: Policy) -> list[str]:
    """Raise LeakGateError when the workspace identifies the source; returns notes on skipped needles."""
    notes: list[str] = []
    template = _template_words(policy)
    checked = []
    for needle in needles:
        if needle.lower() in template:
            notes.append(f"needle {needle!r} is an ordinary word of the instruction; not checked")
        else:
            checked.append(needle)
    info = probe(video)
    problems = []
    for key, value in (info.get("format", {}).get("tags") or {}).items():
        if key not in ALLOWED_FORMAT_TAGS:
            problems.append(f"container tag {key}={value!r}")
    for stream in info.get("streams", []):
        for key, value in (stream.get("tags") or {}).items():
            allowed = ALLOWED_STREAM_TAGS.get(key)
            if key == "encoder" and ENCODER_TAG.match(str(value)):
                continue  # ffmpeg's own "Lavc libx264" on a re-encoded stream
            if allowed is None or value not in allowed:
                problems.append(f"stream {stream.get('index')} tag {key}={value!r}")
    if info.get("chapters"):
        problems.append(f"{len(info['chapters'])} chapter(s)")
    for entry in folder.rglob("*"):
        rel = entry.relative_to(folder).as_posix()
        for needle in checked:
            if needle.lower() in rel.lower():
                problems.append(f"file name {rel!r} contains {needle!r}")
        if checked and entry.is_file() and not entry.is_symlink():
            problems += [f"file {rel!r} contains {n!r}" for n in _bytes_contain(entry, checked)]
    if problems:
        raise LeakGateError("leak gate: the workspace still identifies the source video: " + "; ".join(problems[:5]))
    return notes


# ------------------------------------------------------------------ entry point


def prepare_workspace(item: Item, query: Query, video_path: Path | str, policy: Policy, *,
                      root: Path | str | None = None, reencode: bool = False, dataset: str = "") -> Workspace:
    """Make the attempt's folder: de-identified video + instruction.txt, then the leak gate.

    An item with visual prompts (EOC-Bench) also gets `prompt_frame.png` (the video's last
    frame with each object marked, `sandbox/prompt_frame.py`); with `media.transcripts`, an
    item's shipped transcript is `transcript.txt` (cut at the query time). Both are written
    by the host and pass the same leak gate as the video.

    Layout: `<root>/<hex>/` is a tmpfs of `workspace_mb` (+ the instruction) and `inodes`,
    owned by the agent; `<root>/<hex>.video/<name>.mp4` is the clean copy on disk, bound
    read-only at `<root>/<hex>/<name>.mp4`.
    """
    source = Path(video_path)
    if not source.is_file():
        raise UserError(f"{source}: video not found")
    folder = workspace_root(root) / secrets.token_hex(16)
    store = video_store_of(folder)
    folder.mkdir(mode=0o700)
    store.mkdir(mode=0o700)
    try:
        video_name = f"{secrets.token_hex(8)}.mp4"
        stored = store / video_name
        cut_at = query.time
        if cut_at is not None and cut_at <= 0:
            raise UserError(f"query time {cut_at} of item {item.id!r} must be positive")
        reencoded = clean_copy(source, stored, cut_at=cut_at, reencode=reencode or policy.reencode,
                               audio=policy.media.audio)
        duration = None
        if cut_at is not None:
            last = last_frame_time(stored)
            if last > cut_at + CUT_TOLERANCE_S:
                raise LeakGateError(f"leak gate: the cut video still has a frame at {last:.3f}s, past the query time {cut_at:g}s")
            duration = last
        extras: dict[str, bytes] = {}  # host-written files beside the video: part of the item, not a leak
        marks = None
        if item.prompts:  # EOC-Bench: the last frame before the query, each <object N> in its colour
            image, marks = prompt_frame.draw_prompts(prompt_frame.last_frame(stored), item.prompts,
                                                     policy.media.visual_prompt)
            extras[prompt_frame.PROMPT_FRAME_FILE] = prompt_frame.encode_png(image)
        if policy.media.transcripts and item.transcript:
            extras[TRANSCRIPT_FILE] = cut_transcript(item.transcript, cut_at).encode()
        instruction = render_instruction(item, query, video_name, policy, marks=marks,
                                         transcript=TRANSCRIPT_FILE in extras)
        limits = policy.limits
        extra_bytes = len(instruction.encode()) + sum(len(d) + 4096 for d in extras.values()) + 4096
        limited_fs.mount_limited(folder, size_bytes=limits.workspace_mb * 1024 * 1024 + extra_bytes,
                                 inodes=limits.inodes, uid=AGENT_UID if os.geteuid() == 0 else os.geteuid(),
                                 gid=AGENT_UID if os.geteuid() == 0 else os.getegid(), mode=0o700)
        (folder / INSTRUCTION_FILE).write_text(instruction)
        for name, data in extras.items():
            (folder / name).write_bytes(data)
        target = folder / video_name
        target.touch(mode=0o444)
        stored.chmod(0o444)
        limited_fs.bind_file_readonly(stored, target)
        notes = leak_gate(folder, target, identifying_needles(source, item.id, dataset), policy)
        for name in (INSTRUCTION_FILE, *extras):
            _give_to_agent(folder / name, 0o644)
        return Workspace(path=folder, video_name=video_name, instruction=instruction, query_time=cut_at,
                         duration_s=duration, reencoded=reencoded, cut=cut_at is not None, gate_notes=notes)
    except BaseException:
        Workspace(path=folder, video_name="", instruction="", query_time=None).cleanup()
        raise
