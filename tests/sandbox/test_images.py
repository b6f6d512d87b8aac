"""Image targets: content hashes move with their inputs; the built image is what agents expect."""

from __future__ import annotations

import pytest

from statebox.errors import UserError
from statebox.sandbox import images


def test_targets_registry_has_sandbox():
    targets = images.load_targets()
    sandbox = targets["sandbox"]
    assert sandbox.parent is None and sandbox.repository == "statebox-sandbox"
    assert {"vtools", "statebox-relay"} <= set(sandbox.executables)


def test_unknown_target_is_a_user_error():
    with pytest.raises(UserError, match="unknown image target 'nope'"):
        images.get_target("nope")


def test_content_hash_follows_inputs(tmp_path, monkeypatch):
    root = tmp_path / "pkg"
    image_dir = tmp_path / "image"
    image_dir.mkdir()
    (root / "statebox/tools").mkdir(parents=True)
    (image_dir / "Dockerfile").write_text("FROM x\n")
    (root / "statebox/tools/t.py").write_text("print(1)\n")
    monkeypatch.setattr(images, "PACKAGE_ROOT", root)
    monkeypatch.setattr(images, "IMAGE_DIR", image_dir)
    target = images.ImageTarget(name="t", dockerfile="Dockerfile", files={"t": "statebox/tools/t.py"}, executables=["t"])
    first = images.content_hash(target, "sha256:parent1")
    assert images.content_hash(target, "sha256:parent1") == first
    assert images.content_hash(target, "sha256:parent2") != first  # a new parent image rebuilds
    (root / "statebox/tools/t.py").write_text("print(2)\n")
    second = images.content_hash(target, "sha256:parent1")
    assert second != first  # a changed tool rebuilds
    (image_dir / "Dockerfile").write_text("FROM y\n")
    assert images.content_hash(target, "sha256:parent1") != second
    plain = target.model_copy(update={"executables": []})
    assert images.content_hash(plain, "sha256:parent1") != images.content_hash(target, "sha256:parent1")


def test_local_base_tag_and_mirror():
    assert images.local_base_tag().startswith("statebox-base:bookworm-")
    assert images.debian_mirror().startswith("http")


@pytest.mark.docker
def test_ensure_image_is_cached_and_contents_are_right(docker_engine, sandbox_image, agent_dir, tmp_path):
    import time

    started = time.monotonic()
    again = images.ensure_image("sandbox", force=False)
    assert again == sandbox_image
    assert time.monotonic() - started < 10  # nothing rebuilt
    assert docker_engine.client.images.get("statebox-sandbox:latest").id == docker_engine.client.images.get(sandbox_image).id
    status = images.image_status("sandbox")
    assert status["present"] and status["tag"] == sandbox_image

    from statebox.policies import load_policy
    from statebox.sandbox.docker import ContainerSpec

    script = (
        "set -e; id -u; id -un; test -x /usr/local/bin/vtools; test -x /usr/local/bin/statebox-relay; "
        "test -d /run/statebox; test ! -e /tmp/statebox-ca.crt; "
        "python3 -c 'import sys,numpy,scipy,cv2,PIL,av; print(sys.version_info[:2])'; "
        "ffmpeg -hide_banner -version | head -1; find / -xdev -perm /6000 -type f | wc -l"
    )
    spec = ContainerSpec(image=sandbox_image, command=["bash", "-c", script], workspace=agent_dir, policy=load_policy("default"))
    result = docker_engine.run(spec, tmp_path / "out", tmp_path / "err")
    out = (tmp_path / "out").read_text().split("\n")
    assert result.status == "ok", (tmp_path / "err").read_text()
    assert out[0] == "1000" and out[1] == "agent"
    assert out[2] == "(3, 11)"
    assert out[3].startswith("ffmpeg version")
    assert out[4] == "0"  # no setuid/setgid files
    # the CA bundle never reaches the final image's history
    history = docker_engine.client.images.get(sandbox_image).history()
    assert not any("statebox-ca.crt" in (h.get("CreatedBy") or "") for h in history[:6])


@pytest.mark.docker
def test_build_cli_prints_the_tag(sandbox_image):
    import subprocess
    import sys
    from pathlib import Path

    statebox = Path(sys.executable).parent / "statebox"
    out = subprocess.run([str(statebox), "sandbox", "build"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == sandbox_image
