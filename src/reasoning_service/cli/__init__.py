"""The command line (`reasoning-service`): the same service path as the API, plus the offline
harness, benchmarks and key management. Nothing below imports from here."""

from reasoning_service.cli.main import main

__all__ = ["main"]
