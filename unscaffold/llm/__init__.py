"""Model backends behind one interface: a transcript and tools in, one assistant response out."""

from unscaffold.llm.base import Model, ModelProvider
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import AssistantResponse, Message, ToolCall, Usage

__all__ = ["AssistantResponse", "Message", "Model", "ModelProvider", "ToolCall", "Usage", "load_provider"]
