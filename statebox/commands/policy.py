"""`statebox policy show NAME | list`: the limits and switches an attempt runs under."""

from __future__ import annotations

import json

import typer
import yaml

from statebox.policies.model import POLICY_DIR, load_policy

policy_app = typer.Typer(help="Policy profiles (limits, environment allow-list, budgets, audit actions).", no_args_is_help=True)


@policy_app.command("show")
def show(
    name: str = typer.Argument("default", help="built-in profile name or a YAML file path"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of YAML"),
) -> None:
    """Print a profile after validation, with every default filled in."""
    data = load_policy(name).model_dump(mode="json")
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        class _Dumper(yaml.SafeDumper):
            pass

        def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
            style = "|" if "\n" in value else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        _Dumper.add_representer(str, _text)
        print(yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100).rstrip())


@policy_app.command("list")
def list_policies() -> None:
    """List the built-in profiles with their descriptions."""
    for path in sorted(POLICY_DIR.glob("*.yaml")):
        print(f"{path.stem:12s} {load_policy(path.stem).description}")


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")
