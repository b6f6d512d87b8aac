"""Run the in-container tracker runtime (`sbtracker`) through the sandbox engine.

Everything the tracker does happens in the tracker image under the same hardening as
every agent (network none, read-only root, non-root user, limits). Inputs come in as
read-only mounts (weights folder, question, data set); the only writable places are the
workspace and one output folder. The runtime announces what it does as `SBTRACK <json>`
lines on stdout; `parse_event_line` turns them back into dicts for the recorder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from statebox.attempt_folder import TRACKER_NETWORK
from statebox.errors import UserError
from statebox.sandbox.images import ensure_image

IMAGE_TARGET = "tracker"  # statebox/sandbox/image/targets.yaml
EVENT_PREFIX = "SBTRACK "
PYTHON = "/opt/tracker/bin/python"
MODELS_MOUNT = "/models"
OUT_MOUNT = "/out"
INPUT_MOUNT = "/input"
DATA_MOUNT = "/data"
MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
SHIPPED_WEIGHTS = MODELS_DIR / "suite-yolov8n.pt"

# Set again here (the image sets them too) so the session record shows the offline switches.
OFFLINE_ENV = {
    "YOLO_OFFLINE": "1",
    "YOLO_AUTOINSTALL": "false",
    "YOLO_CONFIG_DIR": "/opt/ultralytics-config",
    "YOLO_VERBOSE": "false",
    "MPLCONFIGDIR": "/tmp/matplotlib",
    "TORCH_HOME": "/tmp/torch",
    "PATH": "/opt/tracker/bin:/usr/local/bin:/usr/bin:/bin",
    "STATEBOX_NETLOG": f"{OUT_MOUNT}/network.jsonl",
    "OMP_WAIT_POLICY": "PASSIVE",  # idle OpenMP threads sleep instead of spinning (see runtime/detect.py)
}


def parse_event_line(line: str) -> dict | None:
    """The JSON payload of an `SBTRACK {...}` stdout line, else None."""
    line = line.strip()
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        payload = json.loads(line[len(EVENT_PREFIX):])
    except json.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def resolve_weights(weights: str | Path | None) -> Path:
    """The weights file to mount: the user's, else the shipped suite model."""
    path = Path(weights).expanduser() if weights else SHIPPED_WEIGHTS
    if not path.is_file():
        if weights:
            raise UserError(f"{path}: weights file not found (--weights)")
        raise UserError(f"{path}: the shipped tracker weights are missing; train some with `statebox tracker train`")
    return path.resolve()


def tracker_image(progress: Callable[[str], None] = lambda _m: None) -> str:
    """The tracker image tag on the local engine, built when its inputs changed (minutes the first
    time). Agents ask their provider instead (`ctx.engine.ensure_image(IMAGE_TARGET)`)."""
    return ensure_image(IMAGE_TARGET, progress=progress)


def read_network_log(out_dir: Path) -> list[dict]:
    path = Path(out_dir) / TRACKER_NETWORK
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
