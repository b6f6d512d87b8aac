"""Decode video frames in a child process and hand them over through shared memory.

Why a process: the thread reader's OpenCV `read` releases the GIL, but everything around
it (the per-frame Python loop, numpy bookkeeping) takes it back, and so do the detector's
pre/post-processing and ByteTrack in the main process; with N streams that is N decode
threads contending for one GIL. A child process has its own interpreter and GIL.

Hand-over: one shared-memory segment of `slots` slots of `batch` frames each (the size
`probe` reports, h*w*3 bytes a frame). The parent sends free slot numbers down one pipe;
the child decodes the next batch with the same `opencv_batches` loop the thread reader
runs (so the frames are byte for byte the same), writes it into the slot and sends
(slot, indices, times, counts) back up another pipe. Only those few numbers are pickled,
never a frame, except frames of another size than probed (a resolution change mid-stream),
which travel inside the message. The parent copies the slot's frames out (one memcpy a
frame) and returns the slot at once: the consumer keeps frames for several batches
(detection in flight, per-object features), so views into a slot the child rewrites would
be wrong.

Why not `multiprocessing` (spawn/forkserver + `shared_memory`): spawn re-runs the parent's
main module in the child (a script without a `__main__` guard starts children forever and
fails), and a named segment outlives a parent killed with SIGKILL unless a resource-tracker
process (one more pid) is there to unlink it. Here the child is a plain
`python -c "... child_main()"` that imports only this module, OpenCV and numpy; the segment
is a /dev/shm file unlinked the moment it is created (the child inherits its descriptor), so
there is never a name to leak, whatever kills whom; its space is reserved up front
(`posix_fallocate`), so a full /dev/shm is a clear error here, never a SIGBUS in the child.

Shutdown: `close()` (also on early exit from the iteration, and from a finalizer if the
reader is dropped unclosed) tells the child to stop, drains its pipe, waits, terminates it
if it does not end, and frees the mapping. The child ends by itself when the parent's pipe
end closes (the parent died). An exception in the child reaches the consumer as
`DecodeError` naming it, with the child's traceback; a child that dies without a word
(killed, a crash in native code) is a `DecodeError` with its exit code.

Limits: the sandbox caps /dev/shm (a 64 MiB tmpfs) and the number of pids, and other
streams share both; `ProcessFrameReader` raises `DecoderUnavailable` (the caller falls
back to the thread reader and logs why) when the slots would take more than half of
/dev/shm's free space or fewer than `PIDS_MARGIN` pids would be left.
"""

from __future__ import annotations

import json
import mmap
import os
import secrets
import subprocess
import sys
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Iterator

import numpy as np

from .decode import Counts, DecodeError, FrameBatch, opencv_batches, probe

SHM_DIR = "/dev/shm"
SHM_SHARE = 0.5  # at most this share of /dev/shm's free space for one reader's slots
PIDS_MARGIN = 32  # pids that must stay free after the child and its decoder threads start
CLOSE_WAIT_S = 5.0


class DecoderUnavailable(RuntimeError):
    """This decoder cannot run here (a limit, a missing library); the message says why."""


def shm_free_bytes(folder: str = SHM_DIR) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def pids_left() -> int | None:
    """Pids this cgroup may still start (None when unlimited or unknown: cgroup v2's files)."""
    try:
        limit = Path("/sys/fs/cgroup/pids.max").read_text().strip()
        current = int(Path("/sys/fs/cgroup/pids.current").read_text().strip())
    except (OSError, ValueError):
        return None
    if limit == "max":
        return None
    return int(limit) - current


def child_pids() -> int:
    """Pids a child costs: itself, FFmpeg's decoding threads (about one a core) and a few more."""
    return (os.cpu_count() or 1) + 4


def _segment(size: int) -> int:
    """A descriptor of `size` bytes of /dev/shm, reserved, with no name left behind."""
    path = os.path.join(SHM_DIR, f"sbtracker-decode-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise DecoderUnavailable(f"cannot create shared memory in {SHM_DIR}: {exc.strerror}") from exc
    try:
        os.unlink(path)
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        os.close(fd)
        raise DecoderUnavailable(f"cannot reserve {size / 2**20:.1f} MiB in {SHM_DIR}: {exc.strerror}") from exc
    return fd


def child_main() -> None:
    """The child: decode batches into the slots the parent hands over, until the video ends or it says stop.

    argv[1] is a JSON object: path, fps, stride, batch, shape, and the inherited descriptors
    shm_fd, shm_size, slots_fd (free slot numbers in; None = stop), out_fd (messages out)."""
    a = json.loads(sys.argv[1])
    slots_in = Connection(a["slots_fd"], writable=False)
    out = Connection(a["out_fd"], readable=False)
    buf = None
    try:
        buf = mmap.mmap(a["shm_fd"], a["shm_size"])
        shape = tuple(a["shape"])
        batch = a["batch"]
        frame_bytes = int(np.prod(shape))
        counts = Counts()
        batches = opencv_batches(Path(a["path"]), a["fps"], a["stride"], batch, counts)
        while True:
            try:
                slot = slots_in.recv()
            except EOFError:  # the parent is gone
                return
            if slot is None:  # stop
                return
            fb = next(batches, None)
            if fb is None:
                out.send(("done", counts.read, counts.grabbed))
                return
            odd: dict[int, np.ndarray] = {}
            base = slot * batch * frame_bytes
            for k, image in enumerate(fb.images):
                if image.shape == shape and image.dtype == np.uint8:
                    np.ndarray(shape, np.uint8, buffer=buf, offset=base + k * frame_bytes)[...] = image
                else:
                    odd[k] = image
            out.send(("batch", slot, fb.indices, fb.times, odd, counts.read, counts.grabbed))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            out.send(("error", type(exc).__name__, str(exc), traceback.format_exc()))
        except (OSError, ValueError):
            pass
    finally:
        if buf is not None:
            buf.close()


def _shutdown(proc: subprocess.Popen, slots_out: Connection, results: Connection, buf: mmap.mmap) -> None:
    """Stop the child (asking, then terminating, then killing) and free the segment. Runs once (weakref.finalize)."""
    try:
        slots_out.send(None)
    except (OSError, ValueError):
        pass
    deadline = time.monotonic() + CLOSE_WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if results.poll(0.05):
                results.recv()  # drained, so the child is never stuck sending
        except (EOFError, OSError):
            try:
                proc.wait(0.05)
            except subprocess.TimeoutExpired:
                pass
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for conn in (slots_out, results):
        conn.close()
    buf.close()


class ProcessFrameReader:
    """`FrameReader`'s contract (iterate `FrameBatch`es; `info`, `frames_read`, `frames_grabbed`, `close`)
    with the decoding in a child process."""

    kind = "process"

    def __init__(self, path: Path, *, stride: int = 1, batch: int = 8, slots: int = 3) -> None:
        if stride < 1 or batch < 1 or slots < 2:
            raise ValueError("stride and batch must be >= 1, slots >= 2")
        self.path = Path(path)
        self.info = probe(self.path)
        self.stride, self.batch = stride, batch
        self.counts = Counts()
        h, w = self.info.height, self.info.width
        if h <= 0 or w <= 0:
            raise DecoderUnavailable(f"{self.path.name}: the frame size is unknown before decoding")
        self._shape = (h, w, 3)
        slot_bytes = batch * h * w * 3
        free = shm_free_bytes()
        if free is None:
            raise DecoderUnavailable(f"no {SHM_DIR} here")
        while slots > 2 and slots * slot_bytes > SHM_SHARE * free:
            slots -= 1
        if slots * slot_bytes > SHM_SHARE * free:
            raise DecoderUnavailable(
                f"{slots} slots of {batch} frames of {w}x{h} need {slots * slot_bytes / 2**20:.1f} MiB of "
                f"shared memory; {SHM_DIR} has {free / 2**20:.1f} MiB free (at most {SHM_SHARE:.0%} is used)")
        left = pids_left()
        if left is not None and left < child_pids() + PIDS_MARGIN:
            raise DecoderUnavailable(f"only {left} pids left in this container; a decoder process needs "
                                     f"~{child_pids()} and {PIDS_MARGIN} stay free")
        self.slots, self._slot_bytes = slots, slot_bytes
        size = slots * slot_bytes
        fd = _segment(size)
        buf = mmap.mmap(fd, size)
        slots_r, slots_w = os.pipe()
        out_r, out_w = os.pipe()
        self._slots_out = Connection(slots_w, readable=False)
        self._results = Connection(out_r, writable=False)
        self._buf = buf
        args = {"path": str(self.path), "fps": self.info.fps, "stride": stride, "batch": batch, "shape": self._shape,
                "shm_fd": fd, "shm_size": size, "slots_fd": slots_r, "out_fd": out_w}
        root = Path(__file__).resolve().parents[__package__.count(".") + 1]
        code = (f"import sys; sys.path.insert(0, {str(root)!r}); "
                f"from {__package__}.decode_process import child_main; child_main()")
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(args)],
                                          pass_fds=(fd, slots_r, out_w), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL)
        except OSError as exc:
            for conn in (self._slots_out, self._results):
                conn.close()
            buf.close()
            raise DecoderUnavailable(f"cannot start a decoder process: {exc}") from exc
        finally:
            # the child's ends and the segment's descriptor (the mapping keeps its own): closed here, so
            # each side sees EOF when the other is gone and unmapping frees the segment
            for own in (slots_r, out_w, fd):
                os.close(own)
        self._close = weakref.finalize(self, _shutdown, self._proc, self._slots_out, self._results, buf)
        for slot in range(slots):
            self._slots_out.send(slot)

    @property
    def frames_read(self) -> int:
        return self.counts.read

    @property
    def frames_grabbed(self) -> int:
        return self.counts.grabbed

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _receive(self) -> tuple:
        try:
            return self._results.recv()
        except (EOFError, OSError):
            pass
        try:
            code = self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        raise DecodeError(f"{self.path.name}: the decoder process ended (exit code {code}) "
                          f"before the end of the video, after {self.counts.read} frames")

    def __iter__(self) -> Iterator[FrameBatch]:
        if not self._close.alive:
            raise DecodeError(f"{self.path.name}: the reader is closed")
        while True:
            message = self._receive()
            kind = message[0]
            if kind == "done":
                self.counts.read, self.counts.grabbed = message[1], message[2]
                return
            if kind == "error":
                _, name, text, trace = message
                raise DecodeError(f"{self.path.name}: decoding in the decoder process failed: {name}: {text}\n"
                                  f"child traceback:\n{trace}")
            _, slot, indices, times, odd, read, grabbed = message
            n = len(indices)
            view = np.ndarray((self.batch, *self._shape), np.uint8, buffer=self._buf, offset=slot * self._slot_bytes)
            block = view[:n].copy()
            del view  # no export of the mapping may outlive this line (close() unmaps it)
            try:
                self._slots_out.send(slot)
            except OSError:  # the child already finished (it sent "done" after reading ahead): nothing to return
                pass
            self.counts.read, self.counts.grabbed = read, grabbed
            yield FrameBatch(list(indices), list(times), [odd.get(k, block[k]) for k in range(n)])

    def close(self) -> None:
        self._close()


if __name__ == "__main__":
    child_main()
