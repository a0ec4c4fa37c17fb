"""redis-py's connection pool less what it costs on every command and serves nothing here.

A worker's threads make four round trips a page (more on a Redis Cluster, whose client
takes a connection from a master's pool for every command), and each takes a connection
from the pool and gives it back. redis-py's ``ConnectionPool`` spends most of that on
three things it need not do every time:

* a wrapper that warns about deprecated arguments, which looks at every call's
  arguments (``get_connection`` is always called without them here);
* a poll of the socket (``can_read``) at every take, to see whether a reply was left
  unread or the server closed the connection. redis-py already closes a connection
  whose command failed half-way (on any error while sending or reading), so the poll
  is left for what it is there for: a connection idle for :data:`IDLE_CHECK_S` or more,
  which the server may have closed meanwhile (a restart, ``CLIENT KILL``, its
  ``timeout``). Under a worker's threads a connection is taken again within
  milliseconds, and each poll was a system call that handed the GIL to another thread;
* an event for every release, which only re-authentication with streaming
  credentials listens to.

:class:`LeanPool` keeps the rest as it is: the lock, the connections kept for
reuse, the limit, a new pool after a fork. It leans on the pool's internals: ``redis``
is pinned to the minor version it was read against (``pyproject.toml``), and
``tests/state/test_pool.py`` names the method that moved when a release changes one.
"""

from __future__ import annotations

import time
from typing import Any

import redis

#: Seconds a connection may sit unused in the pool before its next take polls it first.
IDLE_CHECK_S = 0.5


def _look_at(connection: Any) -> None:
    """Open ``connection`` anew if the server closed it or a reply waits unread on it
    (redis-py's own check)."""
    try:
        if not connection.can_read():
            return
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        pass
    connection.disconnect()
    connection.connect()


class LeanPool(redis.ConnectionPool):
    """A :class:`redis.ConnectionPool` whose get and release do only what they must."""

    def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> Any:
        """A connected connection, taken from those kept or made anew."""
        self._checkpid()
        with self._lock:
            try:
                connection = self._available_connections.pop()
            except IndexError:
                connection = self.make_connection()
            self._in_use_connections.add(connection)
        try:
            connection.connect()
            if time.monotonic() - getattr(connection, "crawler_idle_since", 0.0) >= IDLE_CHECK_S:
                _look_at(connection)
        except BaseException:
            self.release(connection)
            raise
        return connection

    def release(self, connection: Any) -> None:
        """Keep ``connection`` for the next user (closed first when it must reconnect)."""
        self._checkpid()
        with self._lock:
            try:
                self._in_use_connections.remove(connection)
            except KeyError:  # not one of this pool's (a pool made again after a fork)
                return
            if self.owns_connection(connection):
                if connection.should_reconnect():  # told by a maintenance notice
                    connection.disconnect()
                connection.crawler_idle_since = time.monotonic()
                self._available_connections.append(connection)
                return
        connection.disconnect()
