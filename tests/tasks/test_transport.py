"""The broker plumbing `tasks.app` installs: kombu's Redis transport with one command client
per channel, and `task-sent` events published without the process-wide dispatcher lock."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Queue

from tasks import transport
from tasks.app import app
from tests.conftest import own_redis_db


@pytest.fixture
def broker(redis_url: str) -> Iterator[Connection]:
    with own_redis_db(redis_url) as url, Connection(url) as connection:
        yield connection


def test_redis_urls_use_the_verity_transport_and_keep_their_scheme(broker: Connection) -> None:
    assert isinstance(broker.transport, transport.Transport)
    assert broker.as_uri().startswith("redis://")  # Flower picks its broker view by scheme
    assert str(broker.virtual_host) == broker.as_uri().rsplit("/", 1)[1]


def test_a_channel_reuses_one_command_client_until_its_pool_is_replaced(
    broker: Connection,
) -> None:
    channel = broker.channel()
    with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
        assert first is second
        assert first.connection_pool is channel.pool
        assert first.connection_pool.connection_kwargs["db"] == int(broker.virtual_host)
    given = object()
    with channel.conn_or_acquire(given) as client:
        assert client is given
    channel._disconnect_pools()  # what kombu does after a lost connection
    with channel.conn_or_acquire() as third:
        assert third is not first
        assert third.connection_pool is channel.pool
    channel.close()


def test_messages_events_and_acks_go_through_the_shared_client(broker: Connection) -> None:
    exchange = Exchange("verity-test", type="direct")
    queue = Queue("verity-test", exchange, routing_key="verity-test")
    events = Exchange("verity-test-events", type="fanout")
    client = redis.Redis.from_url(broker.as_uri(include_password=True))
    subscriber = client.pubsub()
    subscriber.psubscribe("*verity-test-events*")
    subscriber.get_message(timeout=2)  # the subscription's confirmation
    got: list[Any] = []
    with broker.Consumer([queue], callbacks=[lambda body, msg: (got.append(body), msg.ack())]):
        producer = broker.Producer()
        for n in range(20):
            producer.publish({"n": n}, exchange=exchange, routing_key="verity-test",
                             declare=[queue])
        producer.publish({"event": "x"}, exchange=events, declare=[events])  # as events are
        while len(got) < 20:
            broker.drain_events(timeout=5)
    assert sorted(b["n"] for b in got) == list(range(20))
    assert client.hlen("unacked") == 0  # every ack landed
    event = subscriber.get_message(timeout=5)
    assert event is not None
    assert base64.b64decode(json.loads(event["data"])["body"]) == b'{"event": "x"}'
    subscriber.close()
    client.close()


def test_task_sent_events_do_not_wait_for_the_dispatcher_lock() -> None:
    dispatcher = app.amqp._event_dispatcher
    published: list[tuple[Any, dict[str, Any]]] = []

    class Producer:
        def publish(self, body: Any, **kwargs: Any) -> None:
            published.append((body, kwargs))

    done = threading.Event()

    def send() -> None:
        dispatcher.publish("task-sent", {"uuid": "t-1", "name": "verity.node.plan"},
                           Producer())
        done.set()

    with dispatcher.mutex:  # another thread inside Celery's locked publish
        thread = threading.Thread(target=send)
        thread.start()
        assert done.wait(5), "publish waited for the dispatcher lock"
    thread.join()
    (body, kwargs), = published
    assert body["type"] == "task-sent" and body["uuid"] == "t-1"
    assert body["clock"] >= 1 and body["hostname"]
    assert kwargs["routing_key"] == "task.sent"
    assert kwargs["exchange"] == "celeryev"
