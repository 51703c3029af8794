"""`python -m reasoning_service …`: the console script, for processes started by path."""

from reasoning_service.cli import main

raise SystemExit(main())
