"""Gemini's native API (``generateContent``, ``streamGenerateContent``): a history of ``contents`` made of parts."""
