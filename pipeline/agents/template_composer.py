"""The offline Composer: the deterministic, verdict-worded rendering of its input."""

from __future__ import annotations

from models.composer import ComposerInput
from pipeline.agents.base import ModelReply
from pipeline.prompts import Prompt
from pipeline.rendering import render

MODEL_NAME = "offline-template-composer-1"


class TemplateComposer:
    """Composes from filtered material only; used without an API key."""

    model = MODEL_NAME

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Render the serialized ComposerInput; answer with ComposerOutput JSON."""
        return ModelReply(text=render(ComposerInput.model_validate_json(payload)).model_dump_json())
