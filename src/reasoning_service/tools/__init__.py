"""What the agent can call: `ToolExecutor` (pi_search, facts_get, spans_tighten), tree search,
citation verification, and `finish` (schema, parsing and validation in `finish.py`), plus the
per-criterion LLM call path (`llm_calls.py`) both the loop and tree search go through."""
