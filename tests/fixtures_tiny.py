"""Tiny offline Qwen3 checkpoints for tests; import the fixtures into a test module to use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from unscaffold.offline.tiny import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3 with the real Qwen3.5 (thinking) chat template, built once per session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen3_5_think", template="qwen3_5_think")


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with the Qwen3 template (JSON tool calls)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen3", template="qwen3")


@pytest.fixture(scope="session")
def tiny_hybrid_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An UNSCAFFOLD_CACHE holding the built `tiny-qwen3.5` (the Qwen3.5 hybrid), built once per session.

    Tests that name the model `tiny-qwen3.5` set UNSCAFFOLD_CACHE to it; the Qwen BPE stays in the user's cache."""
    from unscaffold.offline.tiny import HYBRID, build_tiny_model, tiny_model_dir

    root = tmp_path_factory.mktemp("cache")
    build_tiny_model(tiny_model_dir(arch=HYBRID, cache=root), arch=HYBRID)
    return root
