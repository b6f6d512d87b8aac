"""`statebox cluster doctor|prepare`: can a Ray cluster run attempts, and put the images on it."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from statebox.harness.cluster import doctor as run_doctor
from statebox.harness.cluster import prepare as run_prepare

ALLOW_HELP = ("connect even if the cluster runs without Ray token authentication (anyone who reaches its ports "
              "can run code on its nodes, which hold the provider keys)")


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Ray cluster: check it (doctor) and put the sandbox images on every node (prepare).",
                        no_args_is_help=True)

    @group.command("doctor")
    def doctor(
        cluster: str = typer.Option(..., "--cluster", help="auto, ray://HOST:10001 or a head's HOST:PORT"),
        image: list[str] = typer.Option(["sandbox"], "--image", help="image targets every node needs (repeatable)"),
        provider: list[str] = typer.Option([], "--provider", help="model providers every node's gateway must reach"),
        probe: bool = typer.Option(True, help="run the probe container on every node (files + no network)"),
        as_json: bool = typer.Option(False, "--json", help="print the node reports as JSON"),
        allow_unauthenticated: bool = typer.Option(False, "--allow-unauthenticated-cluster", help=ALLOW_HELP),
    ) -> None:
        """The cluster's auth mode and where the driver's token came from; nodes, engines, images
        and tags, GPUs, gateway keys and reachability. Exit 0 when the cluster can run attempts,
        else one line per problem (a missing or wrong token: that one line) and exit 2."""
        auth, reports, problems = run_doctor(cluster, list(image), list(provider), probe=probe,
                                             allow_unauthenticated=allow_unauthenticated)
        if as_json:
            sys.stdout.write(json.dumps({"auth": auth.model_dump(), "nodes": reports, "problems": problems}, default=str) + "\n")
        else:
            print(f"cluster {auth.address}: {auth.describe()}")
            for r in reports:
                res = r.get("resources", {})
                images = ", ".join(f"{t}={'ok' if s.get('present') else 'MISSING'} {s.get('tag') or ''}".strip()
                                   for t, s in (r.get("images") or {}).items())
                probe_text = ""
                if r.get("probe"):
                    p = r["probe"]
                    probe_text = (f"  files={'shared' if p['shares_filesystem'] else 'NOT shared'}"
                                  f"  network={'none' if p['egress_blocked'] else 'OPEN'}")
                print(f"{r.get('node', '?')}: cpus={res.get('CPU', 0):g} gpus={res.get('GPU', 0):g} "
                      f"engine={r.get('docker_host') or 'local socket'} gpu_runtime={r.get('gpu_runtime', False)} "
                      f"code={r.get('code', '?')}  {images}{probe_text}")
        if problems:
            for line in problems:
                print(f"problem: {line}", file=sys.stderr)
            raise typer.Exit(2)
        if not as_json:
            print(f"ok: {len(reports)} node(s) can run attempts")

    @group.command("prepare")
    def prepare(
        cluster: str = typer.Option(..., "--cluster", help="auto, ray://HOST:10001 or a head's HOST:PORT"),
        image: list[str] = typer.Option(["sandbox"], "--image", help="image targets to put on every node (repeatable)"),
        build: bool = typer.Option(False, help="build on each node instead of shipping this host's images"),
        chunk_mb: Optional[int] = typer.Option(32, help="MB per chunk of the shipped `docker save` stream"),
        allow_unauthenticated: bool = typer.Option(False, "--allow-unauthenticated-cluster", help=ALLOW_HELP),
    ) -> None:
        """Put the sandbox images on every node (ship `docker save` from here, or build there);
        content-hash tags checked afterwards."""
        problems = run_prepare(cluster, list(image), build=build, chunk_mb=chunk_mb or 32,
                               progress=lambda m: print(m, file=sys.stderr, flush=True),
                               allow_unauthenticated=allow_unauthenticated)
        if problems:
            for line in problems:
                print(f"problem: {line}", file=sys.stderr)
            raise typer.Exit(2)
        print(f"ok: {', '.join(image)} on every node")

    app.add_typer(group, name="cluster")
