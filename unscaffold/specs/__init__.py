"""The options with a grammar of their own (`--student`, `--reviewer`, `--harness`, `--executor`,
`--base-image`, `--model`), each parsed here once into a typed spec: settings hold the spec, `config.json`
stores it as a JSON object, and `str(spec)` gives the option's text back."""

from unscaffold.specs.base import Spec, read_as
from unscaffold.specs.executor import ExecutorSpec
from unscaffold.specs.harness import HarnessSpec
from unscaffold.specs.image import BaseImageSpec
from unscaffold.specs.model import ModelSpec, WeightsSpec
from unscaffold.specs.reviewer import ReviewerSpec

__all__ = ["BaseImageSpec", "ExecutorSpec", "HarnessSpec", "ModelSpec", "ReviewerSpec", "Spec", "WeightsSpec",
           "read_as"]
