"""Routers of the HTTP API; feature routers (jobs, semantic) live here too."""
