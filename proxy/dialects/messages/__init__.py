"""The Anthropic Messages dialect (``POST /v1/messages``): content-block helpers and answer capture."""
