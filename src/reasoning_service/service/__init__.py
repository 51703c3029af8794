"""The request path the API and the CLI share: evaluations, policies, the overall
recommendation, and the wiring that builds it all from `Settings` (`container.py`)."""
