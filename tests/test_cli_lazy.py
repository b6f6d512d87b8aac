"""`statebox --help` imports no command module; the static table in cli.py says what each
module registers; a command still runs (and shows its own help) when named."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from statebox import cli


def _first_paragraph(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_table_matches_each_modules_registered_help(name):
    command = cli.load_command(name)
    assert command.name == name
    assert _first_paragraph(command.short_help or command.help) == cli.COMMANDS[name]


def test_table_names_every_command_module():
    from pathlib import Path

    import statebox.commands

    modules = {p.stem for p in Path(statebox.commands.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert modules == set(cli.COMMANDS)


def _probe(args: list[str]) -> subprocess.CompletedProcess:
    code = ("import sys; sys.argv = ['statebox', *sys.argv[1:]]\n"
            "from statebox import cli\n"
            "try:\n    cli.app()\n"
            "except SystemExit:\n    pass\n"
            "print('LOADED=' + ','.join(sorted(m.split('.')[-1] for m in sys.modules if m.startswith('statebox.commands.'))))\n"
            "print('DOCKER=' + str('statebox.sandbox.docker' in sys.modules))\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def _loaded(out: str) -> tuple[str, str]:
    lines = dict(line.split("=", 1) for line in out.splitlines() if line.startswith(("LOADED=", "DOCKER=")))
    return lines["LOADED"], lines["DOCKER"]


def test_root_help_lists_every_command_without_importing_one():
    proc = _probe(["--help"])
    assert proc.returncode == 0, proc.stderr
    for name, line in cli.COMMANDS.items():
        assert f" {name} " in proc.stdout
    assert "version" in proc.stdout
    assert _loaded(proc.stdout) == ("", "False")


def test_a_command_imports_only_its_own_module():
    proc = _probe(["policy", "--help"])
    assert proc.returncode == 0, proc.stderr
    assert "Usage: statebox policy" in proc.stdout and "show" in proc.stdout
    assert _loaded(proc.stdout)[0] == "policy"


def test_commands_run_through_the_entry_point():
    out = subprocess.run([sys.executable, "-m", "statebox.cli", "version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip()
    bad = subprocess.run([sys.executable, "-m", "statebox.cli", "nosuch"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "No such command" in bad.stderr
