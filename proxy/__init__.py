"""toolmend: an OpenAI-compatible reverse proxy that repairs broken tool-call histories."""

__version__ = "0.1.0"
