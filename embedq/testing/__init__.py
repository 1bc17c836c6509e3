"""Real stand-ins shipped with embedq for tests and benchmarks (not used in production)."""
