"""The remote cache's client: redis-py (the optional extra ``pip install 'heddle[redis]'``), as torch
inductor's remote cache uses it.

The C++ kernel cache keeps its remote tier as an interface (src/heddle/runtime/cache/remote_cache.h: get,
put); the bindings import this module the first time HEDDLE_REMOTE_CACHE is set and call
``connect(url)`` for the client. The C++ side keeps the policy: entries verified before use, the first
failure warned once and the remote cache off for the rest of the process, the kernel compiled here.

URLs (redis-py's own parsing, ``redis.Redis.from_url``)::

    redis://host[:port][/db]                      plain TCP, port 6379, database 0 by default
    redis://[user]:password@host:port/db          AUTH (``redis://:secret@host`` for requirepass)
    rediss://host:port                            TLS; ``?ssl_cert_reqs=none`` and ``?ssl_ca_certs=...``
                                                  go through as redis-py's options

Every exchange (connect, read, write) has a deadline of HEDDLE_REMOTE_CACHE_TIMEOUT seconds (default 2)
and is not retried: a server that accepts but never answers costs one deadline, then the local cache.
"""
import os
import urllib.parse

TIMEOUT_ENV = "HEDDLE_REMOTE_CACHE_TIMEOUT"
DEFAULT_TIMEOUT = 2.0
SCHEMES = ("redis", "rediss")


class RemoteCacheFailure(Exception):
    """Why the remote cache cannot be used; the text completes "remote cache <url> ..."."""


def timeout_seconds() -> float:
    """HEDDLE_REMOTE_CACHE_TIMEOUT when it is a positive number of seconds, else 2."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def client_for(url: str, timeout: float):
    """The redis-py client for `url` (no exchange with the server yet)."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise RemoteCacheFailure("needs the redis-py client, which is not installed "
                                 "(pip install 'heddle[redis]')") from None
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise RemoteCacheFailure("is not a redis:// or rediss:// URL (redis[s]://[[user]:password@]host[:port][/db])")
    try:
        return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                    retry=Retry(NoBackoff(), 0), retry_on_timeout=False)
    except (ValueError, TypeError) as e:
        raise RemoteCacheFailure(f"is not a usable redis URL: {e}") from None


class RedisBackend:
    """get/put of bytes on one server; every redis-py failure becomes a RemoteCacheFailure."""

    def __init__(self, client):
        self.client = client

    def get(self, key: str):
        return self._call(self.client.get, key)

    def put(self, key: str, value: bytes) -> None:
        self._call(self.client.set, key, value)

    @staticmethod
    def _call(op, *args):
        from redis import exceptions as rx
        try:
            return op(*args)
        except rx.TimeoutError:
            raise RemoteCacheFailure("timed out") from None
        except rx.AuthenticationError as e:
            raise RemoteCacheFailure(f"refused the credentials: {e}") from None
        except rx.ConnectionError as e:
            raise RemoteCacheFailure(f"is unreachable: {e}") from None
        except rx.RedisError as e:
            raise RemoteCacheFailure(f"answered an error: {e}") from None


def connect(url: str) -> RedisBackend:
    """The remote-cache backend for `url`, with the deadline of HEDDLE_REMOTE_CACHE_TIMEOUT."""
    return RedisBackend(client_for(url, timeout_seconds()))
