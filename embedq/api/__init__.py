"""The HTTP API (FastAPI), run by `embedq serve`.

For feature routers (`embedq/api/routes/<feature>.py` exposing `router`):
  - `embedq.api.state.get_service`: a dependency giving the process's EmbeddingService;
  - `embedq.api.auth.require_api_key`: the API-key check (create_app already adds it);
  - `embedq.api.errors.ERROR_TABLE`: raise embedq exceptions, the table answers them.
This package imports nothing at import time, so `embedq --help` stays fast.
"""
