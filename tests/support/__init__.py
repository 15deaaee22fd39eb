"""Test support: a strict provider (validator + upstream app) and a uvicorn serving helper."""
