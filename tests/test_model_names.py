"""The models statebox asks by default still answer, and each caller takes them from `statebox.model_names`.

Why: the shared Anthropic default reached its retirement (2026-11-30) while four modules still named it. The SDK
`make setup` installs (constraints.txt's pin) lists the models Anthropic has announced a retirement for; a default on
that list, or on statebox's record of the days the SDK has dropped since (`ANTHROPIC_RETIRED`), fails here, months
before the day it would fail a user's run (once scripts/update-constraints.sh moves the pin). OpenAI's defaults (`gpt-5`, shut down 2026-12-11; `gpt-4.1`,
2027-01-14) are held the same way against `model_retirement.OPENAI_SHUTDOWNS`, statebox's copy of OpenAI's page."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace

import pytest
from anthropic._data import DEPRECATED_MODELS  # the SDK's own list; if it moves, this import fails loudly

from statebox import model_names, model_retirement
from statebox.agents import react, vision_client
from statebox.audits import llm_pass
from statebox.commands import demo
from statebox.commands.run import warn_of_retired_models
from statebox.model_retirement import (
    ANTHROPIC_RETIRED,
    OPENAI_SHUTDOWNS,
    anthropic_retirements,
    retirement_day,
    retirement_note,
    retirement_notes,
    sdk_retirements,
)
from statebox.sandbox.gateway.accounting import Rate, price_lookup, rate_lookup
from statebox.sandbox.images import PACKAGE_ROOT
from statebox.scoring import judge

DEFAULTS = {
    "react agent": react.DEFAULT_MODEL,
    "audit second pass": llm_pass.DEFAULT_MODEL,
    "anthropic judge": judge.DEFAULT_MODELS["anthropic"],
    "openai judge": judge.DEFAULT_MODELS["openai"],
    "vision agent (anthropic)": vision_client.DEFAULT_MODELS["anthropic"],
    "vision agent (openai)": vision_client.DEFAULT_MODELS["openai"],
}


def test_the_sdk_list_is_read_and_every_day_in_it_is_read() -> None:
    # the list this check stands on is there and in the shape read: an empty or renamed list would pass anything. The
    # SDK drops a model once its day has passed (2.15.0 dropped the default that prompted this check), so which
    # models it names moves with each release; that each names a day this module reads does not
    assert DEPRECATED_MODELS and all(retirement_day(day) is not None for day in DEPRECATED_MODELS.values())


def test_the_record_keeps_the_retired_default_and_reads_every_day() -> None:
    assert ANTHROPIC_RETIRED["claude-sonnet-4-5"] == "November 30th, 2026"
    assert all(retirement_day(day) is not None for day in ANTHROPIC_RETIRED.values())


@pytest.mark.parametrize("caller", sorted(DEFAULTS))
def test_no_default_is_announced_for_retirement(caller: str) -> None:
    model = DEFAULTS[caller]
    assert model not in DEPRECATED_MODELS, f"{caller}: {model} retires {DEPRECATED_MODELS.get(model)}"
    assert model not in ANTHROPIC_RETIRED, f"{caller}: {model} retired {ANTHROPIC_RETIRED.get(model)}"
    assert model not in OPENAI_SHUTDOWNS, f"{caller}: {model} shuts down {OPENAI_SHUTDOWNS.get(model)}"
    assert retirement_note(model, date(2030, 1, 1)) is None


def test_openais_list_names_the_defaults_it_replaced() -> None:
    # the copy this check stands on holds the two models that prompted it, on the days OpenAI gave
    assert OPENAI_SHUTDOWNS["gpt-5"] == date(2026, 12, 11) and OPENAI_SHUTDOWNS["gpt-4.1"] == date(2027, 1, 14)


def test_the_demos_codex_knows_the_openai_default() -> None:
    """Codex runs the demo's real agent on OPENAI_MODEL when only an OpenAI key is set: the pinned CLI must know the
    model by name (an unknown one gets a generic profile: no tool or reasoning settings of its own)."""
    cli = PACKAGE_ROOT / ".cache/agent-clis/image/codex"  # the pinned binary the agents image copies (make setup)
    if not cli.exists():
        pytest.skip("the pinned Codex CLI is not installed here (`make setup` installs it, and CI runs make setup)")
    assert model_names.OPENAI_MODEL.encode() in cli.resolve().read_bytes()


@pytest.mark.parametrize("caller", sorted(DEFAULTS))
def test_every_default_has_a_price(caller: str) -> None:
    # under a cost budget the gateway refuses a model with no price (it would cost $0 and never trip the budget)
    assert price_lookup(DEFAULTS[caller]) is not None


def test_the_callers_take_the_shared_defaults() -> None:
    assert react.DEFAULT_MODEL == llm_pass.DEFAULT_MODEL == model_names.ANTHROPIC_MODEL
    assert judge.DEFAULT_MODELS == {"anthropic": model_names.ANTHROPIC_MODEL, "openai": model_names.OPENAI_MODEL}
    assert vision_client.DEFAULT_MODELS == {"anthropic": model_names.ANTHROPIC_MODEL,
                                            "openai": model_names.OPENAI_VISION_MODEL}


def test_the_demo_adds_a_real_agent_on_the_shared_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATEBOX_DEMO_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    assert demo._real_agent() == ("claude-code", model_names.ANTHROPIC_MODEL)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    assert demo._real_agent() == ("codex", model_names.OPENAI_MODEL)


@pytest.mark.parametrize("model, price", [
    ("claude-opus-5-5", (4.0, 20.0)),
    ("claude-opus-5", (5.0, 25.0)),
    ("claude-sonnet-5-5", (2.0, 10.0)),
    ("claude-opus-4-8", (5.0, 25.0)),          # not claude-opus-4's $15/$75
    ("claude-opus-4-1-20250805", (15.0, 75.0)),  # a dated snapshot of a listed name
    ("gpt-6.1-sol", (2.0, 10.0)),
    ("gpt-5.5", (5.0, 30.0)),                  # not gpt-5's $1.25/$10
    ("claude-opus-4-7", None),                 # no official price read: refused under a cost budget, never guessed
    ("gpt-5-pro", None),                       # dearer than gpt-5: once charged gpt-5's price by its prefix
    ("claude-haiku-5-5", None),                # priced "from": refused under a cost budget unless the policy prices it
])
def test_current_models_are_priced_by_their_own_name(model: str, price: tuple[float, float] | None) -> None:
    assert price_lookup(model) == price


def test_a_long_context_request_pays_the_long_context_rate() -> None:
    """Past 272K input tokens GPT-6.1 Sol bills $4/$15 for the whole request, past 200K Sonnet 4.6 bills $6/$22.50."""
    sol = rate_lookup("gpt-6.1-sol")
    assert sol is not None
    assert sol.cost_usd(272_000, 1_000) == pytest.approx((272_000 * 2.0 + 1_000 * 10.0) / 1e6)
    assert sol.cost_usd(272_001, 1_000) == pytest.approx((272_001 * 4.0 + 1_000 * 15.0) / 1e6)
    sonnet = rate_lookup("claude-sonnet-4-6")
    assert sonnet is not None and sonnet.for_input(200_001) == (6.0, 22.5)
    opus5 = rate_lookup("claude-opus-5")  # one rate over its whole 1M context
    assert opus5 is not None and opus5.for_input(900_000) == (5.0, 25.0)
    assert rate_lookup("gpt-6.1-sol", extra={"gpt-6.1-sol": (1.0, 1.0)}) == Rate((1.0, 1.0))  # the policy's own price


# ---------------------------------------------------------------- retirements, read from the SDK's list as data

def test_the_list_read_as_data_is_the_sdks_own() -> None:
    # read without importing the SDK, it must be the very dict the SDK holds
    assert sdk_retirements() == DEPRECATED_MODELS


def test_the_sdk_answers_over_the_record_and_the_record_outlives_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_retirement, "sdk_retirements",
                        lambda: {"claude-sonnet-4-5": "December 1st, 2026", "claude-next": "March 3rd, 2027"})
    merged = anthropic_retirements()
    assert merged["claude-sonnet-4-5"] == "December 1st, 2026" and merged["claude-next"] == "March 3rd, 2027"
    assert merged["claude-3-opus-20240229"] == "January 5th, 2026"
    monkeypatch.setattr(model_retirement, "sdk_retirements", dict)  # no SDK installed, or a release that dropped all
    note = retirement_note("claude-sonnet-4-5-20250929", date(2026, 12, 1))
    assert note is not None and "retired this model on November 30th, 2026" in note


@pytest.mark.parametrize("text, day", [
    ("November 30th, 2026", date(2026, 11, 30)),
    ("January 22nd, 2027", date(2027, 1, 22)),
    ("June 1st, 2026", date(2026, 6, 1)),
    ("March 3rd, 2027", date(2027, 3, 3)),
    ("2026-11-30", None),          # another shape: no day, and the note says the text as the SDK wrote it
    ("Smarch 40th, 2026", None),
])
def test_retirement_days_are_read_as_the_sdk_writes_them(text: str, day: date | None) -> None:
    assert retirement_day(text) == day


def test_a_retired_model_and_a_retiring_one_are_told_apart() -> None:
    retired = retirement_note("claude-sonnet-4-5", date(2026, 11, 30))  # the day itself: requests already fail
    assert retired is not None and "retired this model on November 30th, 2026" in retired
    retiring = retirement_note("claude-sonnet-4-5", date(2026, 11, 29))
    assert retiring is not None and "retires this model on November 30th, 2026" in retiring
    assert retirement_note(model_names.ANTHROPIC_MODEL, date(2030, 1, 1)) is None
    assert retirement_note("gpt-6.1-sol", date(2030, 1, 1)) is None


@pytest.mark.parametrize("model, today, said", [
    ("gpt-5", date(2026, 12, 10), "gpt-5: OpenAI shuts this model down on 2026-12-11"),
    ("gpt-5", date(2026, 12, 11), "gpt-5: OpenAI shut this model down on 2026-12-11"),
    ("gpt-5-2025-08-07", date(2026, 11, 30), "OpenAI shuts this model down on 2026-12-11"),
    ("gpt-4.1-2025-04-14", date(2026, 11, 30), "OpenAI shuts this model down on 2027-01-14"),
    ("gpt-4.1-2099-01-01", date(2026, 11, 30), "OpenAI shuts this model down on 2027-01-14"),  # a snapshot takes its id's day
    ("o4-mini", date(2026, 11, 30), "OpenAI shut this model down on 2026-10-23"),
    ("gpt-5.4", date(2026, 11, 30), None),
    ("gpt-5-pro-x", date(2026, 11, 30), None),  # not a dated snapshot: not the listed model
])
def test_openais_shutdowns_are_told_as_anthropics_are(model: str, today: date, said: str | None) -> None:
    note = retirement_note(model, today)
    assert (note is None) if said is None else (note is not None and said in note)


def test_a_run_warns_once_per_retired_model_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    config = SimpleNamespace(agent_options={
        "react": {"model": "claude-sonnet-4-5"}, "react@frames=8": {"model": "claude-sonnet-4-5"},
        "claude-code": {"model": model_names.ANTHROPIC_MODEL}, "oracle": {},
    })
    warn_of_retired_models(config)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: claude-sonnet-4-5: Anthropic retire")


def test_notes_are_one_per_model_named_in_order() -> None:
    notes = retirement_notes(["claude-sonnet-4-5", "gpt-6.1-sol", "gpt-5", "claude-sonnet-4-5"], date(2026, 12, 1))
    assert len(notes) == 2 and notes[0].startswith("claude-sonnet-4-5: Anthropic retired")
    assert notes[1].startswith("gpt-5: OpenAI shuts this model down on 2026-12-11")
