"""The offline Composer: the deterministic, verdict-worded rendering of its input."""

from __future__ import annotations

from models.composer import ComposerInput
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.rules.statements import self_statements

MODEL_NAME = "offline-template-composer-1"


class TemplateComposer:
    """Composes from filtered material only; used without an API key."""

    model = MODEL_NAME

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Restate the serialized ComposerInput statement by statement; answer with
        ComposerReply JSON (every statement cites the item it restates)."""
        composer_input = ComposerInput.model_validate_json(payload)
        return ModelReply(text=self_statements(composer_input).model_dump_json())
