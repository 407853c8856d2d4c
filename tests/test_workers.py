"""tests/workers.py: each xdist worker's Redis database."""

from tests.workers import worker_redis_url


def test_each_worker_gets_the_next_redis_database():
    assert worker_redis_url("redis://127.0.0.1:6379/11", "gw0") == "redis://127.0.0.1:6379/11"
    assert worker_redis_url("redis://127.0.0.1:6379/11", "gw1") == "redis://127.0.0.1:6379/12"
    assert worker_redis_url("redis://:secret@cache:6379", "gw2") == "redis://:secret@cache:6379/2"
    assert worker_redis_url("unix:///run/redis.sock", "gw1") == "unix:///run/redis.sock?db=1"
    assert worker_redis_url("unix:///run/redis.sock?db=3", "gw1") == "unix:///run/redis.sock?db=4"
