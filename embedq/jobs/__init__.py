"""Async jobs and bulk vectorization: jobs and their items live in the database, chunk
tasks run on workers, progress is counted in the database (see `embedq.jobs.service`)."""
