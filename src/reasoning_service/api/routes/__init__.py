"""One route module per resource; `app.py` includes their routers."""
