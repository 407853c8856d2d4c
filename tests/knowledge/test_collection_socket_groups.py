"""A collection socket stays in its group however long it is open, while the channels of a
killed web process leave the group after GROUP_EXPIRY (channels_redis's default was a day,
every event meanwhile queued for them and logged "over capacity")."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers, get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connections

from knowledge.events import collection_group
from portal.routing import websocket_urlpatterns


@pytest.fixture
def short_groups(settings):
    layers = {
        name: {**config, "CONFIG": {**config["CONFIG"], "group_expiry": 2}}
        for name, config in settings.CHANNEL_LAYERS.items()
    }
    settings.CHANNEL_LAYERS = layers
    settings.GROUP_REFRESH = 0.5
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
def test_an_open_socket_keeps_its_group_and_a_dead_channel_leaves_it(short_groups, alice, private_collection):
    group = collection_group(private_collection.pk)
    dead = "specific.killed-daphne!1"

    async def scenario() -> tuple[dict, list[str], list[str]]:
        socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/collections/{private_collection.pk}/")
        socket.scope["user"] = alice
        connected, _ = await socket.connect()
        assert connected
        assert (await socket.receive_json_from(5))["type"] == "subscribed"
        layer = get_channel_layer()
        await layer.group_add(group, dead)  # a channel whose web process was killed: never renewed
        connection = layer.connection(layer.consistent_hash(group))
        before = sorted(name.decode() for name in await connection.zrange(layer._group_key(group), 0, -1))
        await asyncio.sleep(3.5)  # past the expiry: only renewed members stay
        await layer.group_send(group, {"type": "collection.event", "event": {"type": "test.event", "n": 1}})
        event = await socket.receive_json_from(5)
        after = sorted(name.decode() for name in await connection.zrange(layer._group_key(group), 0, -1))
        await socket.disconnect()
        await database_sync_to_async(connections.close_all)()  # the consumer's thread's connection
        return event, before, after

    event, before, after = asyncio.run(scenario())
    assert event == {"type": "test.event", "n": 1}
    assert dead in before
    assert len(before) == 2
    assert dead not in after
    assert len(after) == 1  # the open socket, renewed every GROUP_REFRESH
