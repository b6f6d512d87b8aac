"""Sandbox images: content-hash tags, built only when their inputs change.

A target (`sandbox`, `agents`, `tracker`, ...) is one Dockerfile in `image/`, a parent
(another target, or the base image) and the exact files of its build context, all
declared in `image/targets.yaml`. The tag `statebox-<target>:<hash>` is a hash of the
Dockerfile, those files and the parent image's id, so an unchanged target is never
rebuilt and a changed tool (vtools, the relay) always is. `:latest` follows the newest.

The base is a public `python:3.11-slim` when one is present or a registry answers;
otherwise a local Debian bookworm made with `debootstrap` + `docker import` (machines
with no registry access, like CI behind a proxy that only passes PyPI/apt/npm).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from statebox.errors import UserError
from statebox.sandbox.engine_client import docker_client

IMAGE_DIR = Path(__file__).parent / "image"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the `statebox` package
PUBLIC_BASE = "python:3.11-slim"
LOCAL_BASE_REPO = "statebox-base"
BASE_TARGET = "base"  # `sandbox build --target base`: the root base only (a setup step of its own)
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# What the local base holds; part of its tag, so changing the recipe makes a new base.
LOCAL_BASE_SUITE = "bookworm"
LOCAL_BASE_PACKAGES = ("python3", "python3-venv", "ffmpeg", "ca-certificates")
LOCAL_BASE_PRUNE = ("usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt/archives", "var/lib/apt/lists")

Progress = Callable[[str], None]


class ImageTarget(BaseModel):
    """One entry of targets.yaml."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    dockerfile: str
    parent: str | None = None
    files: dict[str, str] = Field(default_factory=dict, description="context name -> source path")
    executables: list[str] = Field(default_factory=list, description="context names copied with mode 0755")

    @property
    def repository(self) -> str:
        return f"statebox-{self.name}"


def load_targets() -> dict[str, ImageTarget]:
    """Read targets.yaml; a malformed entry is one clear line."""
    path = IMAGE_DIR / "targets.yaml"
    raw = yaml.safe_load(path.read_text()) or {}
    targets: dict[str, ImageTarget] = {}
    for name, entry in raw.items():
        try:
            targets[name] = ImageTarget.model_validate({**entry, "name": name})
        except ValidationError as exc:
            raise UserError(f"{path}: target {name!r}: {exc.errors()[0]['msg']}") from exc
    return targets


def get_target(name: str) -> ImageTarget:
    targets = load_targets()
    if name not in targets:
        raise UserError(f"unknown image target {name!r} (known: {', '.join(sorted(targets))})")
    target = targets[name]
    if not (IMAGE_DIR / target.dockerfile).exists():
        raise UserError(f"image target {name!r}: {IMAGE_DIR / target.dockerfile} is missing")
    for ctx_name, src in target.files.items():
        if not (PACKAGE_ROOT / src).exists():
            raise UserError(f"image target {name!r}: file {src} (for {ctx_name}) is missing")
    return target


def content_hash(target: ImageTarget, parent_id: str) -> str:
    """Hash of everything that determines the image: Dockerfile, context files (bytes + mode), parent."""
    h = hashlib.sha256()
    h.update(f"target={target.name}\nparent={parent_id}\n".encode())
    h.update(b"Dockerfile\0" + (IMAGE_DIR / target.dockerfile).read_bytes())
    for ctx_name in sorted(target.files):
        mode = "x" if ctx_name in target.executables else "r"
        h.update(f"\0{ctx_name}\0{mode}\0".encode())
        h.update((PACKAGE_ROOT / target.files[ctx_name]).read_bytes())
    return h.hexdigest()[:16]


def _image_id(client, ref: str) -> str | None:
    import docker.errors

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


# ---------------------------------------------------------------- base image


def local_base_tag() -> str:
    recipe = f"{LOCAL_BASE_SUITE}|minbase|{','.join(LOCAL_BASE_PACKAGES)}|{','.join(LOCAL_BASE_PRUNE)}"
    return f"{LOCAL_BASE_REPO}:{LOCAL_BASE_SUITE}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def debian_mirror() -> str:
    """The host's Debian mirror (first non-security `debian` URI in apt's sources), else deb.debian.org."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*")) + [Path("/etc/apt/sources.list")]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            for word in words:
                if word.startswith("http") and word.rstrip("/").endswith("/debian"):
                    return word.rstrip("/")
    return "http://deb.debian.org/debian"


def try_pull(client, ref: str, progress: Progress) -> bool:
    """Pull `ref`; False (quickly) when no registry answers."""
    repo, _, tag = ref.partition(":")
    try:
        progress(f"pulling {ref} ...")
        client.images.pull(repo, tag=tag or "latest")
        return True
    except Exception as exc:  # noqa: BLE001 - no registry, no DNS, auth: all mean "not available"
        progress(f"could not pull {ref}: {str(exc).splitlines()[0][:160]}")
        return False


def build_local_base(client, progress: Progress) -> str:
    """debootstrap a minimal bookworm with Python 3.11 + ffmpeg and `docker import` it (~2 min)."""
    tag = local_base_tag()
    if _image_id(client, tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise UserError(
            "no registry answered and debootstrap is missing, so no base image can be made; "
            "install it (`apt-get install -y debootstrap`) or pass --base IMAGE that exists locally"
        )
    if os.geteuid() != 0:
        raise UserError("building the local base image needs root (debootstrap); run `sudo statebox sandbox build --offline-base` once")
    mirror = debian_mirror()
    workdir = Path(tempfile.mkdtemp(prefix="statebox-base-", dir="/var/tmp"))
    root = workdir / "root"
    started = time.monotonic()
    try:
        progress(f"debootstrap {LOCAL_BASE_SUITE} from {mirror} (about 2 minutes) ...")
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(LOCAL_BASE_PACKAGES)}",
               LOCAL_BASE_SUITE, str(root), mirror]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            log = root / "debootstrap/debootstrap.log"
            raise UserError(f"debootstrap failed: {tail[0][:200]} (log: {log})")
        for rel in LOCAL_BASE_PRUNE:
            target = root / rel
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        progress(f"docker import -> {tag}")
        repo, _, ver = tag.partition(":")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None  # stdout=PIPE always opens one
        try:
            client.api.import_image_from_stream(
                tar.stdout, repository=repo, tag=ver,
                changes=["ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'],
            )
        finally:
            tar.stdout.close()
            tar.wait()
        if not _image_id(client, tag):
            raise UserError(f"docker import of the local base {tag} did not produce an image")
        progress(f"local base {tag} ready in {time.monotonic() - started:.0f}s")
        return tag
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def resolve_base(client, base: str | None = None, offline_base: bool = False,
                 progress: Progress = lambda _msg: None) -> str:
    """The base image to build on, present locally when this returns.

    Order without --base: a local python:3.11-slim, an already-built local base, a pull
    of python:3.11-slim, and finally a freshly made local base. `--offline-base` skips
    the registry entirely.
    """
    if base:
        if _image_id(client, base) or try_pull(client, base, progress):
            return base
        raise UserError(f"base image {base!r} is neither present locally nor pullable; "
                        "drop --base, or use --offline-base to make one with debootstrap")
    if offline_base:
        return build_local_base(client, progress)
    if _image_id(client, PUBLIC_BASE):
        return PUBLIC_BASE
    if _image_id(client, local_base_tag()):
        return local_base_tag()
    if try_pull(client, PUBLIC_BASE, progress):
        return PUBLIC_BASE
    progress("no registry answered: making a local base image instead")
    return build_local_base(client, progress)


# ---------------------------------------------------------------- targets

_build_lock = threading.RLock()  # re-entered: ensure_image(child) -> image_tag -> ensure_image(parent)
_resolved: dict[tuple, str] = {}


def image_tag(target: str, *, base: str | None = None, offline_base: bool = False,
              progress: Progress = lambda _msg: None, docker_host: str | None = None) -> tuple[str, str, bool]:
    """(tag, parent ref, exists) for a target without building anything but missing parents."""
    client = docker_client(docker_host)
    spec = get_target(target)
    if spec.parent is None:
        parent_ref = resolve_base(client, base, offline_base, progress)
    else:
        parent_ref = ensure_image(spec.parent, base=base, offline_base=offline_base,
                                  progress=progress, docker_host=docker_host)
    parent_id = _image_id(client, parent_ref) or parent_ref
    tag = f"{spec.repository}:{content_hash(spec, parent_id)}"
    return tag, parent_ref, _image_id(client, tag) is not None


def ensure_image(target: str = "sandbox", *, base: str | None = None, offline_base: bool = False,
                 ca_bundle: Path | str | None = None, force: bool = False,
                 progress: Progress = lambda _msg: None, docker_host: str | None = None) -> str:
    """The tag of `target`'s image, building it (and its parents) only when inputs changed."""
    key = (target, base, offline_base, docker_host)
    with _build_lock:
        cached = _resolved.get(key)
        if cached and not force and _image_id(docker_client(docker_host), cached):
            return cached
        tag, parent_ref, exists = image_tag(target, base=base, offline_base=offline_base,
                                            progress=progress, docker_host=docker_host)
        if not exists or force:
            root_base = resolve_base(docker_client(docker_host), base, offline_base, progress)
            build_target(get_target(target), tag, parent_ref, ca_bundle, progress, docker_host, base_ref=root_base)
        else:
            progress(f"{tag} is up to date")
        client = docker_client(docker_host)
        client.images.get(tag).tag(get_target(target).repository, "latest")
        if not exists or force:
            prune_old_tags(client, get_target(target).repository, keep=tag)
        _resolved[key] = tag
        return tag


def prune_old_tags(client, repository: str, keep: str) -> None:
    """Drop superseded content-hash tags of one repository (images still in use stay; errors ignored)."""
    for image in client.images.list(name=repository):
        for old in image.tags:
            if old != keep and not old.endswith(":latest") and old.startswith(repository + ":"):
                try:
                    client.images.remove(old, noprune=False)
                except Exception:  # noqa: BLE001 - in use by a container, or already gone
                    pass


def _assemble_context(target: ImageTarget, ca_bundle: Path | None, into: Path) -> None:
    shutil.copyfile(IMAGE_DIR / target.dockerfile, into / "Dockerfile")
    for ctx_name, src in target.files.items():
        dest = into / ctx_name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE_ROOT / src, dest)
        dest.chmod(0o755 if ctx_name in target.executables else 0o644)
    ca_dest = into / "ca-bundle.crt"
    if ca_bundle is not None:
        shutil.copyfile(ca_bundle, ca_dest)
    else:
        ca_dest.write_bytes(b"")
    ca_dest.chmod(0o644)


def stage_repository(target: ImageTarget, stage: str) -> str:
    """Where a warmed stage is tagged: `statebox-<target>-<stage>` (a tag keeps its layers, the
    cache the full build reuses, out of `docker image prune`'s reach)."""
    return f"{target.repository}-{stage}"


def warm_stage(target: str, stage: str, *, base: str | None = None, offline_base: bool = False,
               ca_bundle: Path | str | None = None, progress: Progress = lambda _msg: None,
               docker_host: str | None = None) -> str:
    """Build only `stage` of `target`'s Dockerfile (the engine's build target), FROM the root base.

    Why: the tracker's `wheels` stage (~5 GB of torch & co, minutes of download) depends on the
    root base image only, not on the sandbox image its final stage is built FROM. Built here,
    beside the sandbox image, its layers land in the engine's cache; the full build of `target`
    later, with the same context files and base, then prints "Using cache" for every step of the
    stage and only copies its result. Returns the stage image's tag (`statebox-<target>-<stage>:latest`).

    A stage built FROM ${PARENT} would need the parent target built first, which is exactly what
    this avoids: such a stage is refused.
    """
    spec = get_target(target)
    dockerfile = (IMAGE_DIR / spec.dockerfile).read_text()
    froms = {}
    for line in dockerfile.splitlines():
        words = line.split()
        if len(words) >= 4 and words[0].upper() == "FROM" and words[2].upper() == "AS":
            froms[words[3]] = words[1]
    if stage not in froms:
        known = ", ".join(sorted(froms)) or "none"
        raise UserError(f"image target {target!r} has no build stage {stage!r} (named stages: {known})")
    if froms[stage] != "${BASE}":
        raise UserError(f"build stage {stage!r} of {target!r} is FROM {froms[stage]}, not FROM ${{BASE}}: "
                        "only a stage built on the root base can be built ahead of its parent")
    client = docker_client(docker_host)
    root_base = resolve_base(client, base, offline_base, progress)
    tag = f"{stage_repository(spec, stage)}:latest"
    build_target(spec, tag, root_base, ca_bundle, progress, docker_host, base_ref=root_base, stage=stage)
    return tag


def build_target(target: ImageTarget, tag: str, parent_ref: str, ca_bundle: Path | str | None,
                 progress: Progress, docker_host: str | None = None, base_ref: str | None = None,
                 stage: str | None = None) -> None:
    """Build one target with the engine's builder, streaming its log to `progress`.

    Build args: PARENT (the parent target's image) and BASE (the root base image). A heavy
    install stage built FROM ${BASE} stays in the engine's layer cache when only the parent
    changes (e.g. vtools edited), so the tracker does not re-download torch for it.

    The CA bundle only reaches the first (wheels) stage of a multi-stage Dockerfile, so pip
    trusts a TLS-intercepting proxy during the build without the final image trusting it.
    """
    client = docker_client(docker_host)
    bundle = Path(ca_bundle) if ca_bundle else (DEFAULT_CA_BUNDLE if DEFAULT_CA_BUNDLE.exists() else None)
    if bundle is not None and not bundle.is_file():
        raise UserError(f"{bundle}: CA bundle not found (--ca-bundle)")
    log_path = Path(tempfile.gettempdir()) / f"statebox-build-{target.name}{'-' + stage if stage else ''}.log"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="statebox-ctx-") as ctx, log_path.open("w") as log:
        _assemble_context(target, bundle, Path(ctx))
        progress(f"building {tag}{' (stage ' + stage + ')' if stage else ''} FROM {parent_ref} (log: {log_path})")
        last_error = None
        cached_steps = 0
        try:
            stream = client.api.build(
                path=ctx, dockerfile="Dockerfile", tag=tag, rm=True, forcerm=True, pull=False,
                buildargs={"PARENT": parent_ref, "BASE": base_ref or parent_ref}, decode=True,
                labels={"statebox": "1", "statebox.target": target.name}, target=stage,
            )
            for chunk in stream:
                text = chunk.get("stream") or chunk.get("status") or ""
                if "error" in chunk:
                    last_error = str(chunk["error"]).strip()
                    text = last_error
                if text:
                    log.write(text if text.endswith("\n") else text + "\n")
                    log.flush()
                    line = text.strip()
                    if line.startswith("Step "):
                        progress(line)
                    elif line == "---> Using cache":
                        cached_steps += 1
        except Exception as exc:  # noqa: BLE001 - API failures during a build
            last_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if last_error:
            raise UserError(f"building image {tag} failed: {last_error[:300]} (full log: {log_path})")
    progress(f"built {tag} in {time.monotonic() - started:.0f}s ({cached_steps} steps from the layer cache)")


def list_images(docker_host: str | None = None) -> list[dict]:
    """Every statebox image present locally: repository, tags, size, created; for `doctor`."""
    client = docker_client(docker_host)
    rows = []
    for image in client.images.list():
        tags = [t for t in image.tags if t.startswith("statebox-")]
        if tags:
            rows.append({"tags": tags, "id": image.short_id, "size_mb": image.attrs.get("Size", 0) / 1e6,
                         "created": image.attrs.get("Created", "")})
    return rows


def expected_base(client) -> str | None:
    """The base `ensure_image` would use now, without pulling or building anything."""
    for ref in (PUBLIC_BASE, local_base_tag()):
        if _image_id(client, ref):
            return ref
    return None


def image_status(target: str, docker_host: str | None = None) -> dict:
    """Side-effect-free status of a target: the tag its current inputs would get, and whether it exists."""
    client = docker_client(docker_host)
    spec = get_target(target)
    if spec.parent is None:
        parent_ref = expected_base(client)
        parent_ok = parent_ref is not None
    else:
        parent = image_status(spec.parent, docker_host)
        parent_ref, parent_ok = parent["tag"], parent["present"]
    tag = None
    if parent_ok and parent_ref:
        tag = f"{spec.repository}:{content_hash(spec, _image_id(client, parent_ref) or parent_ref)}"
    latest = _image_id(client, f"{spec.repository}:latest")
    return {"target": target, "tag": tag, "parent": parent_ref, "present": bool(tag and _image_id(client, tag)),
            "latest_present": latest is not None}
