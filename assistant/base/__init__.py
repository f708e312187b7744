"""The ground floor: settings, paths, errors, secrets and the text rules every layer shares.

Imports nothing else of the assistant (an import-linter contract in pyproject.toml)."""
