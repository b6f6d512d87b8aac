"""How a container gets a GPU on this engine: the NVIDIA runtime, CDI, or not at all, and why.

Two ways exist. The NVIDIA container runtime registered with dockerd (`docker info`
lists a runtime `nvidia`) serves `--gpus all` (SDK: a `DeviceRequest` with the `gpu`
capability). CDI, the Container Device Interface that Docker 25+ and Podman read, needs
no runtime: `nvidia-ctk cdi generate` writes a spec (`/etc/cdi/nvidia.yaml` or
`/var/run/cdi/`) declaring the devices `nvidia.com/gpu=...`, and `--device
nvidia.com/gpu=all` (SDK: a `DeviceRequest` with driver `cdi`) asks for them. The
runtime is preferred when both exist (older engines understand it); CDI is used when it
is the only one. Reading the spec folders works for a local engine (the usual case); a
remote engine that has only CDI is reported as "no GPU" with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

CDI_KIND = "nvidia.com/gpu"
CDI_ALL = f"{CDI_KIND}=all"
DEFAULT_CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


@dataclass(frozen=True)
class GpuAccess:
    mode: str | None  # "nvidia" (runtime, --gpus all) | "cdi" (--device nvidia.com/gpu=all) | None
    reason: str  # one line: what was found, or what was looked for and not found

    @property
    def available(self) -> bool:
        return self.mode is not None


def cdi_specs(dirs: list[str] | tuple[str, ...]) -> list[Path]:
    """CDI spec files in `dirs` that declare NVIDIA GPUs (kind nvidia.com/gpu)."""
    found = []
    for d in dirs:
        folder = Path(d)
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() not in (".yaml", ".yml", ".json") or not path.is_file():
                continue
            try:
                text = path.read_text(errors="replace")[:1_000_000]
            except OSError:
                continue
            if CDI_KIND in text:
                found.append(path)
    return found


def detect(info: dict[str, Any]) -> GpuAccess:
    """The engine's GPU access from its `docker info` dict (Runtimes, CDISpecDirs)."""
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    if "nvidia" in runtimes:
        return GpuAccess("nvidia", "NVIDIA container runtime registered with the engine (requests: --gpus all)")
    dirs = info.get("CDISpecDirs")
    looked = list(dirs) if dirs else list(DEFAULT_CDI_DIRS)
    specs = cdi_specs(looked)
    if specs and dirs:
        return GpuAccess("cdi", f"CDI spec {specs[0]} declares {CDI_KIND} (requests: --device {CDI_ALL})")
    why = [f"no NVIDIA runtime (runtimes: {', '.join(runtimes) or 'none'})"]
    if specs and not dirs:
        why.append(f"a CDI spec exists ({specs[0]}) but this engine does not read CDI (Docker 25+ with CDI enabled)")
    else:
        why.append(f"no CDI spec for {CDI_KIND} in {', '.join(looked)}")
    return GpuAccess(None, "; ".join(why))


FIX = ("install nvidia-container-toolkit, then either `nvidia-ctk runtime configure --runtime=docker` and restart "
       "dockerd, or `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (Docker 25+ with CDI enabled)")


def require_message(access: GpuAccess) -> str:
    """The one line `gpu: require` gives on an engine without GPU access."""
    return f"policy gpu: require, but this Docker engine offers no GPU: {access.reason}; {FIX}, or set gpu: auto"
