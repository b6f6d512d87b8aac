"""The SDK clients a host-side agent talks to its model with, all through its gateway lease.

The official SDKs (and the langchain chat models built on them) are pointed at the
lease's unix socket with an httpx transport: base URL http://localhost, key = the
lease's per-attempt token. The gateway swaps in the real key, applies the budgets and
logs every request, so host-side agents are accounted exactly like sandboxed ones.
The SDKs are imported where used: each is a heavy optional dependency of one agent kind.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from statebox.attempt import Provider, provider_for_model
from statebox.sandbox.gateway import GatewayLease

if TYPE_CHECKING:  # the SDKs themselves are imported where used (see above)
    import anthropic
    import openai
    from langchain_core.language_models import BaseChatModel


def _sdk_http_lib(sdk: str = "anthropic") -> Any:
    """The httpx flavour an SDK was built on: `httpx2` for anthropic>=2 / openai>=3, else `httpx`.

    The SDKs refuse a client from the other library, so the unix-socket transport must
    be built from the one they import.
    """
    base = importlib.import_module(f"{sdk}._base_client")
    return getattr(base, "httpx2", None) or getattr(base, "httpx")


def host_http_client(lease: GatewayLease, timeout_s: float = 600.0, sdk: str = "anthropic") -> Any:
    """A sync HTTP client (of the SDK's httpx flavour) whose every request goes to the lease's socket.

    Typed Any on purpose: its class (`httpx.Client` or `httpx2.Client`) is the one the installed
    SDK was built on, known only at run time, and each SDK accepts only its own."""
    lib = _sdk_http_lib(sdk)
    return lib.Client(transport=lib.HTTPTransport(uds=str(lease.host_socket_path or lease.socket_path)), timeout=timeout_s)


def host_async_http_client(lease: GatewayLease, timeout_s: float = 600.0, sdk: str = "anthropic") -> Any:
    """`host_http_client`'s async twin (Any for the same reason)."""
    lib = _sdk_http_lib(sdk)
    return lib.AsyncClient(transport=lib.AsyncHTTPTransport(uds=str(lease.host_socket_path or lease.socket_path)), timeout=timeout_s)


def anthropic_client(lease: GatewayLease, **kwargs: Any) -> anthropic.Anthropic:
    """`anthropic.Anthropic` through the gateway (base URL http://localhost, key = the lease token)."""
    import anthropic  # why: a heavy SDK only the model-driven agents need

    return anthropic.Anthropic(base_url="http://localhost", api_key=lease.token,
                               http_client=host_http_client(lease, sdk="anthropic"), **kwargs)


def async_anthropic_client(lease: GatewayLease, **kwargs: Any) -> anthropic.AsyncAnthropic:
    import anthropic  # why: a heavy SDK only the model-driven agents need

    return anthropic.AsyncAnthropic(base_url="http://localhost", api_key=lease.token,
                                    http_client=host_async_http_client(lease, sdk="anthropic"), **kwargs)


def openai_client(lease: GatewayLease, **kwargs: Any) -> openai.OpenAI:
    """`openai.OpenAI` through the gateway (base URL http://localhost/v1, key = the lease token)."""
    import openai  # why: a heavy SDK only the model-driven agents need

    return openai.OpenAI(base_url="http://localhost/v1", api_key=lease.token,
                         http_client=host_http_client(lease, sdk="openai"), **kwargs)


def async_openai_client(lease: GatewayLease, **kwargs: Any) -> openai.AsyncOpenAI:
    import openai  # why: a heavy SDK only the model-driven agents need

    return openai.AsyncOpenAI(base_url="http://localhost/v1", api_key=lease.token,
                              http_client=host_async_http_client(lease, sdk="openai"), **kwargs)


def langchain_chat_model(lease: GatewayLease, model: str, provider: Provider | None = None,
                         **kwargs: Any) -> BaseChatModel:
    """A langchain chat model (ChatAnthropic / ChatOpenAI) whose requests all go through the lease."""
    provider = provider or provider_for_model(model)
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic  # why: langchain is the react agent's alone

        llm = ChatAnthropic(model_name=model, base_url="http://localhost", api_key=SecretStr(lease.token), **kwargs)
        # ChatAnthropic builds its SDK clients lazily (cached properties): hand it ours instead.
        llm.__dict__["_client"] = anthropic_client(lease, max_retries=llm.max_retries)
        llm.__dict__["_async_client"] = async_anthropic_client(lease, max_retries=llm.max_retries)
        return llm
    from langchain_openai import ChatOpenAI  # why: langchain is the react agent's alone

    return ChatOpenAI(model=model, base_url="http://localhost/v1", api_key=SecretStr(lease.token),
                      http_client=host_http_client(lease, sdk="openai"),
                      http_async_client=host_async_http_client(lease, sdk="openai"), **kwargs)
