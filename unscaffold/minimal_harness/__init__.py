"""The deployment harness h: one `execute` tool, a fixed system prompt, a small agent loop."""
