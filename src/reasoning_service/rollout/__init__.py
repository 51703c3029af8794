"""Rollout: which controller serves a case (`routing.py`), flags changed without a restart
(`flags.py`), and shadow runs compared with the served result (`shadow.py`)."""
