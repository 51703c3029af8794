"""The HTTP API (FastAPI): `create_app`, auth, error mapping and one route module per resource.
Routes are thin: they validate, call the service layer and return a response model."""
