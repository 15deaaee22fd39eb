"""The OpenAI Responses API (``POST /v1/responses``): its call item families and the capture of its answers."""
