"""Each queue has its own binding: a message routed to one queue is put on that queue only."""

from __future__ import annotations

from embedq.config import Settings
from embedq.tasks.app import create_app
from embedq.tasks.names import BULK_CHUNK, EMBED


def test_online_and_bulk_queues_never_share_a_binding() -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing"})
    app = create_app(settings)
    queues = {q.name: q for q in app.conf.task_queues}
    online, bulk = queues[settings.queue.online_queue], queues[settings.queue.bulk_queue]
    assert (online.exchange.name, online.routing_key) != (bulk.exchange.name, bulk.routing_key)
    for task, queue in ((EMBED, online), (BULK_CHUNK, bulk)):
        route = app.amqp.router.route({}, task)
        assert route["queue"].name == queue.name
        assert route["queue"].exchange.name == queue.exchange.name
        assert route["queue"].routing_key == queue.routing_key
