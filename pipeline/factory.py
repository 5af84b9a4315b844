"""Building a Runtime from settings: the store, the tool registry, the agents, the data source.

`load_source` and `resolve_scenario` are the source registry's (`pipeline.sources.registry`),
named here too because runtimes are built here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.agents.claude import (
    ClaudeComposer,
    ClaudeExtractor,
    ClaudeKnowledgeAnswerer,
    ClaudePlanner,
    ClaudeVerifier,
)
from pipeline.agents.claude_executor import ClaudeExecutor
from pipeline.agents.investigator import OfflineExecutor
from pipeline.agents.knowledge import OfflineKnowledgeAnswerer, validate_knowledge_answer
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.planner import OfflinePlanner, classify_intent
from pipeline.agents.template_composer import TemplateComposer
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.model import Model
from pipeline.notify.plan import tenant_targets
from pipeline.providers.messages import MessagesProvider
from pipeline.providers.pricing import load_prices
from pipeline.run.attempts import Retrying, RetryPolicy
from pipeline.run.faults import with_faults
from pipeline.run.graph import GRAPH
from pipeline.run.runtime import Agents, Runtime
from pipeline.sources.registry import load_source, resolve_scenario
from pipeline.store import RunStore, open_store
from pipeline.tools.builtin import default_registry


def offline_agents() -> Agents:
    """The deterministic agents used without an API key."""
    return Agents(
        planner=OfflinePlanner(),
        executor=OfflineExecutor(),
        verifier=OfflineVerifier(),
        composer=TemplateComposer(),
        knowledge=OfflineKnowledgeAnswerer(),
        classify_intent=classify_intent,
        validate_knowledge=validate_knowledge_answer,
    )


def claude_agents(
    settings: VeritySettings, *, provider: MessagesProvider | None = None
) -> Agents:
    """Claude for the Planner, Executor, Verifier, Composer, knowledge answers and the claim
    extractor, one model per role from settings; intent routing and knowledge validation stay
    deterministic.

    `provider` defaults to the Anthropic SDK provider built from settings (key, base URL,
    timeouts); a missing key is a one-line ConfigurationError.
    """
    options = _claude_options(settings, provider)
    return Agents(
        planner=ClaudePlanner(**options("planner")),
        executor=ClaudeExecutor(
            **options("executor"), max_turns=settings.executor_max_turns,
            max_tool_calls=settings.executor_max_tool_calls,
            max_continuations=settings.executor_max_continuations),
        verifier=ClaudeVerifier(**options("verifier")).retrying(),
        composer=ClaudeComposer(**options("composer")).retrying(),
        knowledge=ClaudeKnowledgeAnswerer(**options("knowledge")),
        classify_intent=classify_intent,
        validate_knowledge=validate_knowledge_answer,
        extractor=ClaudeExtractor(**options("extractor")).retrying(),
        remote=True,
    )


def claude_extractor(
    settings: VeritySettings, provider: MessagesProvider | None = None
) -> Retrying:
    """The Claude claim extractor alone, under its retry policy, as `claude_agents` builds it
    (model `settings.model_for("extractor")`; `provider` as there)."""
    return ClaudeExtractor(**_claude_options(settings, provider)("extractor")).retrying()


def _claude_options(
    settings: VeritySettings, provider: MessagesProvider | None
) -> Callable[[str], dict[str, Any]]:
    """The constructor arguments of a Claude role, by role name."""
    if provider is None:
        from pipeline.providers.anthropic import AnthropicProvider  # the SDK only when used

        provider = AnthropicProvider.from_settings(settings)
    common: dict[str, Any] = {
        "provider": provider,
        "prices": load_prices(settings.prices_file),
        "force_tool_choice": settings.force_tool_choice,
        "policy": RetryPolicy.from_settings(settings),
    }

    def options(role: str) -> dict[str, Any]:
        return {"model": settings.model_for(role), "max_tokens": settings.max_tokens_for(role),
                **common}

    return options


def batch_judges(
    settings: VeritySettings, provider: str, *, message_batches: bool = False,
    max_batch: int = 100,
) -> tuple[Model, Model]:
    """The Verifier and Composer a re-verification batch uses for `provider`. With
    `message_batches` (anthropic only), their requests go through the Message Batches API:
    concurrent calls are gathered into one batch of up to `max_batch` requests, polled, and
    an expired or errored request is sent once more as a normal call."""
    if provider != "anthropic":
        agents = offline_agents()
        return agents.verifier, agents.composer
    claude_settings = settings.model_copy(update={"provider": "anthropic"})
    transport: MessagesProvider | None = None
    if message_batches:
        from pipeline.providers.anthropic import AnthropicProvider  # the SDK only when used
        from pipeline.providers.batches import BatchingProvider

        transport = BatchingProvider(
            AnthropicProvider.from_settings(claude_settings), max_batch=max_batch,
            flush_after_s=0.2, poll_interval_s=settings.message_batch_poll_s,
            timeout_s=settings.message_batch_timeout_s, fallback_to_messages=True)
    agents = claude_agents(claude_settings, provider=transport)
    return agents.verifier, agents.composer


def agents_for(settings: VeritySettings) -> Agents:
    """Claude agents when the provider resolves to `anthropic`, else the offline ones."""
    if settings.resolved_provider() == "anthropic":
        return claude_agents(settings)
    return offline_agents()


def build_runtime(
    settings: VeritySettings | None = None, *, store: RunStore | None = None
) -> Runtime:
    """A Runtime over the configured database with the agents the settings select
    (`agents_for`: Claude with an API key or `VERITY_PROVIDER=anthropic`, offline otherwise)."""
    settings = settings or VeritySettings()
    agents = agents_for(settings)  # before the store: a missing key fails first, in one line
    graph, registry = with_faults(GRAPH, default_registry(), settings)
    return Runtime(
        store=store or open_store(resolve_database_url(settings),
                                     run_deadline_s=settings.run_deadline_s),
        registry=registry,
        agents=agents,
        settings=settings,
        source_loader=load_source,
        graph=graph,
        notify_targets=tenant_targets,
    )


__all__ = [
    "agents_for",
    "batch_judges",
    "build_runtime",
    "claude_agents",
    "claude_extractor",
    "load_source",
    "offline_agents",
    "resolve_scenario",
]
