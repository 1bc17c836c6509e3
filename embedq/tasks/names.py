"""Task names: the queue contract between producers and workers (stable across versions)."""

EMBED = "embedq.embed"
BULK_CHUNK = "embedq.bulk_chunk"
CLOSE_JOB = "embedq.close_job"
JOBS_TICK = "embedq.jobs_tick"
