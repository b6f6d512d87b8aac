"""One multimodal request, in each provider's native wire format, through the gateway.

The mllm baseline and the video agent both send "text + frames" to a model. Frames
go as each API expects them — Anthropic Messages: base64 `image` blocks; OpenAI Chat
Completions: `image_url` parts with data URLs; OpenAI Responses: `input_image` parts —
through the official SDKs, whose HTTP client is pointed at the attempt's gateway
socket. The gateway swaps in the real key, applies the budgets, logs the request and,
for OpenAI-compatible local servers, forwards to `OPENAI_BASE_URL`.

Chat Completions is the default OpenAI wire format because every OpenAI-compatible
server (vLLM, SGLang, llama.cpp, LM Studio) speaks it; `api="responses"` is there for
models only served by the Responses API.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from statebox.agents.model_clients import anthropic_client, openai_client
from statebox.attempt import AgentOptions, AttemptContext, Provider, provider_for
from statebox.model_names import ANTHROPIC_MODEL, OPENAI_VISION_MODEL

OpenAIApi = Literal["chat", "responses"]
DEFAULT_MODELS = {"anthropic": ANTHROPIC_MODEL, "openai": OPENAI_VISION_MODEL}


def model_choice(ctx: AttemptContext, defaults: AgentOptions) -> tuple[AgentOptions, Provider, str]:
    """The attempt's options (a sweep's own, else the agent's), its provider and its model
    (the options' `model`, else the provider's default): what every agent here asks first."""
    options = ctx.options if ctx.options is not None else defaults
    provider = provider_for(options)
    return options, provider, options.model or DEFAULT_MODELS[provider]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Image:
    """A base64 image and the moment of the video it shows (for accounting)."""

    data: str
    media_type: str = "image/jpeg"
    times: tuple[float, ...] = ()  # video times shown (one for a frame, many for a contact sheet)


Part = Union[Text, Image]


@dataclass
class Reply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str = ""


@dataclass
class ModelError(Exception):
    """The model call failed for good (API error, budget exhausted, unreachable)."""

    message: str
    status: int | None = None
    budget: bool = False

    def __str__(self) -> str:
        return self.message


def _accepts(method: Any, name: str) -> bool:
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _is_openai_hosted(model: str) -> bool:
    return model.lower().startswith(("gpt-", "o1", "o3", "o4", "chatgpt", "codex"))


# The Anthropic models that take a temperature other than the default: Claude 3 and Claude 4 up to 4.6 (and their dated
# snapshots). The Claude 5 line answers a non-default sampling parameter with a 400.
_ANTHROPIC_SAMPLING = re.compile(r"claude-(?:3-.*|(?:opus|sonnet|haiku)-4(?:-[0-6])?(?:-\d{8})?)\Z")
# The OpenAI-hosted models that do: the GPT-4 and GPT-3.5 lines. The o-series, GPT-5 and later reason by default and
# answer a temperature with a 400 (GPT-6: "when reasoning effort is not none, remove temperature, top_p").
_OPENAI_SAMPLING = ("gpt-4", "gpt-3.5", "chatgpt-4o")


def takes_temperature(model: str, provider: Provider) -> bool:
    """Whether `model` takes a temperature: an allow-list, so a model not known here (a newer one) is sent none and
    answers with its default sampling, where a temperature it refuses would fail every request of the attempt. A
    model an OpenAI-compatible local server (vLLM, llama.cpp) serves takes one."""
    m = model.lower()
    if provider == "anthropic":
        return _ANTHROPIC_SAMPLING.match(m) is not None
    if not _is_openai_hosted(m):
        return True
    return m.startswith(_OPENAI_SAMPLING)


def _is_reasoning(model: str) -> bool:
    """OpenAI-hosted models that reason by default (every one past the sampling allow-list): their reasoning counts
    in the completion cap, so a frame question is asked at `REASONING_EFFORT` unless the run names an effort."""
    return _is_openai_hosted(model) and not takes_temperature(model, "openai")


# The lowest effort every OpenAI reasoning model takes (GPT-6.1 Sol and GPT-6 Astra refuse "none" and "minimal"): a
# frame question needs little reasoning, and at the default effort the reasoning could spend the whole 2,048-token
# cap and leave no answer.
REASONING_EFFORT = "low"


def anthropic_content(parts: list[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, Image):
            out.append({"type": "image", "source": {"type": "base64", "media_type": p.media_type, "data": p.data}})
        else:
            out.append({"type": "text", "text": p.text})
    return out


def chat_content(parts: list[Part], detail: str = "auto") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, Image):
            out.append({"type": "image_url",
                        "image_url": {"url": f"data:{p.media_type};base64,{p.data}", "detail": detail}})
        else:
            out.append({"type": "text", "text": p.text})
    return out


def responses_content(parts: list[Part], detail: str = "auto") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, Image):
            out.append({"type": "input_image", "image_url": f"data:{p.media_type};base64,{p.data}", "detail": detail})
        else:
            out.append({"type": "input_text", "text": p.text})
    return out


@dataclass
class VisionClient:
    """Sends (system, parts) to one model through a gateway lease; one instance per attempt."""

    lease: Any
    model: str
    provider: Provider
    api: OpenAIApi = "chat"
    max_tokens: int = 2048
    temperature: float | None = 0.0
    detail: str = "auto"
    effort: str | None = None  # an OpenAI reasoning model's effort (the run's --effort); REASONING_EFFORT when None
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.provider == "anthropic":
            self._client = anthropic_client(self.lease, max_retries=2)
        else:
            self._client = openai_client(self.lease, max_retries=2)

    def ask(self, parts: list[Part], system: str | None = None, max_tokens: int | None = None) -> Reply:
        """One request; raises `ModelError` when the API refuses or fails after retries."""
        limit = max_tokens or self.max_tokens
        try:
            if self.provider == "anthropic":
                return self._anthropic(parts, system, limit)
            if self.api == "responses":
                return self._responses(parts, system, limit)
            return self._chat(parts, system, limit)
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - SDK error classes differ by provider and version
            status = getattr(exc, "status_code", None)
            exceeded = getattr(self.lease, "exceeded", None)
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]
            raise ModelError(exceeded or message, status=status, budget=bool(exceeded)) from exc

    def _anthropic(self, parts: list[Part], system: str | None, limit: int) -> Reply:
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": limit,
                                  "messages": [{"role": "user", "content": anthropic_content(parts)}]}
        if system:
            kwargs["system"] = system
        if (self.temperature is not None and takes_temperature(self.model, "anthropic")
                and _accepts(self._client.messages.create, "temperature")):
            kwargs["temperature"] = self.temperature  # newer SDKs dropped the knob: then the model default
        msg = self._client.messages.create(**kwargs)
        text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text")
        usage = getattr(msg, "usage", None)
        return Reply(text, getattr(usage, "input_tokens", 0) or 0, getattr(usage, "output_tokens", 0) or 0,
                     str(getattr(msg, "stop_reason", "") or ""))

    def _chat(self, parts: list[Part], system: str | None, limit: int) -> Reply:
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": chat_content(parts, self.detail)})
        # OpenAI's own newer models only take max_completion_tokens; local servers know max_tokens.
        limit_key = "max_completion_tokens" if _is_openai_hosted(self.model) else "max_tokens"
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, limit_key: limit}
        if (self.temperature is not None and takes_temperature(self.model, "openai")
                and _accepts(self._client.chat.completions.create, "temperature")):
            kwargs["temperature"] = self.temperature
        if _is_reasoning(self.model) and _accepts(self._client.chat.completions.create, "reasoning_effort"):
            kwargs["reasoning_effort"] = self.effort or REASONING_EFFORT
        completion = self._client.chat.completions.create(**kwargs)
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = completion.usage
        return Reply(text, getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0,
                     str(getattr(choice, "finish_reason", "") or ""))

    def _responses(self, parts: list[Part], system: str | None, limit: int) -> Reply:
        kwargs: dict[str, Any] = {"model": self.model, "max_output_tokens": limit,
                                  "input": [{"role": "user", "content": responses_content(parts, self.detail)}]}
        if system:
            kwargs["instructions"] = system
        if (self.temperature is not None and takes_temperature(self.model, "openai")
                and _accepts(self._client.responses.create, "temperature")):
            kwargs["temperature"] = self.temperature
        if _is_reasoning(self.model) and _accepts(self._client.responses.create, "reasoning"):
            kwargs["reasoning"] = {"effort": self.effort or REASONING_EFFORT}
        response = self._client.responses.create(**kwargs)
        usage = response.usage
        return Reply(response.output_text or "", getattr(usage, "input_tokens", 0) or 0,
                     getattr(usage, "output_tokens", 0) or 0, str(getattr(response, "status", "") or ""))
