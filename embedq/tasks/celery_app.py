"""A module-level Celery app for Celery's own tools: `celery -A embedq.tasks.celery_app
flower`, `... inspect active`, `... purge`. embedq's own code builds apps explicitly.

It talks to a Redis broker through kombu's own Redis transport, not `redis_transport`:
Flower picks the client that reads queue lengths by the connection's URL scheme, and a
custom transport's scheme is its import path, which Flower refuses ("'redis' broker is
not supported", a 404 on its broker page and /api/queues/length). The two read and write
the same keys; `redis_transport` only changes how a consumer holding unacknowledged
messages survives losing Redis, and these tools consume no task.
"""

from embedq.config import Settings
from embedq.tasks.app import create_app

app = create_app(Settings.from_env())
app.conf.broker_transport = None  # None: the transport of the URL's scheme (redis://)
