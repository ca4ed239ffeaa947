"""Model backends behind one interface: a transcript and tools in, one assistant response out (a spec's
backend: `unscaffold.llm.registry.load_provider`)."""

from unscaffold.llm.base import Model, ModelProvider
from unscaffold.llm.types import AssistantResponse, Message, ToolCall, Usage

__all__ = ["AssistantResponse", "Message", "Model", "ModelProvider", "ToolCall", "Usage"]
