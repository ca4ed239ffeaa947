"""unscaffold: distil an agent harness into model weights, deploy with one bash tool."""

__version__ = "0.1.0"
