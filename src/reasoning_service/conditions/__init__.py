"""The deterministic controller: criteria decided without an LLM (fallback and offline baseline).

For now this is the text heuristic (`heuristic.py` with `clinical_text.py` and
`criterion_reading.py`); the conditions evaluator (DESIGN.md, "Criteria as checkable
conditions") replaces it. Imports tools, retrieval, models; never agent, rollout or service."""
