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
    built = docker_engine.client.images.get(sandbox_image).attrs["Created"]
    again = images.ensure_image("sandbox", force=False)
    assert again == sandbox_image
    assert docker_engine.client.images.get(again).attrs["Created"] == built  # nothing rebuilt (not timed: load varies)
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


def _stage_target(tmp_path, monkeypatch, nonce: str) -> None:
    """A target `stagetest` whose heavy stage is FROM the base (like the tracker's `wheels`) and
    whose final stage is FROM the parent; `nonce` makes its layers new to the engine's cache."""
    root = tmp_path / "pkg"
    image_dir = tmp_path / "image"
    image_dir.mkdir()
    root.mkdir()
    (root / "payload.txt").write_text(f"heavy work {nonce}\n")
    (image_dir / "Dockerfile.stagetest").write_text(
        "ARG PARENT\nARG BASE\n"
        "FROM ${BASE} AS heavy\nCOPY payload.txt /payload.txt\n"
        "RUN cp /payload.txt /made.txt && echo made\n"
        "FROM ${PARENT} AS final\nCOPY --from=heavy /made.txt /made.txt\n"
    )
    (image_dir / "targets.yaml").write_text(
        "stagetest:\n  dockerfile: Dockerfile.stagetest\n  parent: null\n  files:\n    payload.txt: payload.txt\n")
    monkeypatch.setattr(images, "PACKAGE_ROOT", root)
    monkeypatch.setattr(images, "IMAGE_DIR", image_dir)


def test_warm_stage_refuses_unknown_stages_and_stages_on_the_parent(tmp_path, monkeypatch):
    _stage_target(tmp_path, monkeypatch, "units")
    with pytest.raises(UserError, match="has no build stage 'nope' \\(named stages: final, heavy\\)"):
        images.warm_stage("stagetest", "nope")
    with pytest.raises(UserError, match="stage 'final' of 'stagetest' is FROM \\$\\{PARENT\\}"):
        images.warm_stage("stagetest", "final")


def test_the_real_tracker_wheels_stage_is_on_the_base():
    """`statebox sandbox build --target tracker --stage wheels` (setup's 35-tracker-wheels.sh) only
    helps while the tracker's heavy stage is FROM ${BASE}: the check warm_stage makes, on the real file."""
    text = (images.IMAGE_DIR / images.get_target("tracker").dockerfile).read_text()
    assert "FROM ${BASE} AS wheels" in text


def _step_cached(log: str, instruction: str) -> bool:
    """Whether the build log's step running `instruction` came from the layer cache."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    at = next(i for i, line in enumerate(lines) if line.startswith("Step ") and line.endswith(instruction))
    return lines[at + 1] == "---> Using cache"


@pytest.mark.docker
def test_a_warmed_stage_is_taken_from_the_cache_by_the_full_build(docker_engine, sandbox_image, tmp_path, monkeypatch):
    import tempfile
    import uuid
    from pathlib import Path

    _stage_target(tmp_path, monkeypatch, uuid.uuid4().hex)
    client = docker_engine.client
    log_dir = Path(tempfile.gettempdir())
    try:
        stage_tag = images.warm_stage("stagetest", "heavy")
        assert stage_tag == "statebox-stagetest-heavy:latest" and client.images.get(stage_tag)
        warm_log = (log_dir / "statebox-build-stagetest-heavy.log").read_text()
        assert not _step_cached(warm_log, "RUN cp /payload.txt /made.txt && echo made")  # new work: really ran
        assert "made" in warm_log.splitlines()
        tag = images.ensure_image("stagetest")
        full_log = (log_dir / "statebox-build-stagetest.log").read_text()
        assert _step_cached(full_log, "RUN cp /payload.txt /made.txt && echo made")  # the warm-up's layer
        assert "made" not in full_log.splitlines()  # the RUN did not run again
        image = client.images.get(tag)
        assert image.id == client.images.get("statebox-stagetest:latest").id
    finally:
        for ref in ("statebox-stagetest:latest", "statebox-stagetest-heavy:latest"):
            try:
                client.images.remove(ref, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        for image in client.images.list(name="statebox-stagetest"):
            for t in image.tags:
                client.images.remove(t, force=True)
