"""A module-level Celery app for Celery's own tools: `celery -A embedq.tasks.celery_app
flower`, `... inspect active`, `... purge`. embedq's own code builds apps explicitly."""

from embedq.config import Settings
from embedq.tasks.app import create_app

app = create_app(Settings.from_env())
