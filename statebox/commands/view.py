"""`statebox view RUN_DIR [--port P]`: the report, live, on localhost, while a run is still going."""

from __future__ import annotations

import threading
from pathlib import Path

import typer

from statebox import signals
from statebox.errors import UserError
from statebox.report.live_view import serve
from statebox.harness.plan import RUN_CONFIG_FILE


def register(app: typer.Typer) -> None:
    @app.command("view")
    def view(
        run_dir: Path = typer.Argument(..., help="a run folder, finished or still running"),
        port: int = typer.Option(8765, min=0, max=65535, help="port on 127.0.0.1 (0: any free port)"),
        poll_ms: int = typer.Option(2000, "--poll-ms", min=1, help="how often the page asks for new rows"),
    ) -> None:
        """Serve a run's report on localhost with progress, rows as they are written, and attempts in flight (reads the run folder only; only the printed address, which carries a token, opens it)."""
        if not (run_dir / RUN_CONFIG_FILE).exists():
            raise UserError(f"{run_dir}: not a statebox run folder (no {RUN_CONFIG_FILE})")

        def ready(url: str) -> None:
            print(f"statebox view: serving {url} (Ctrl-C to stop)", flush=True)

        # the server runs in a daemon thread; the main thread waits at a safe point, where a stop
        # signal raises `Interrupted` (statebox/signals.py: the handler itself never raises)
        failed: list[BaseException] = []
        ended = threading.Event()

        def serving() -> None:
            try:
                serve(run_dir, port=port, poll_ms=poll_ms, ready=ready)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread below
                failed.append(exc)
            finally:
                ended.set()

        threading.Thread(target=serving, name="statebox-view", daemon=True).start()
        signals.wait_event(ended)
        if failed and isinstance(failed[0], OSError):
            exc = failed[0]
            raise UserError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from exc
        if failed:
            raise failed[0]
