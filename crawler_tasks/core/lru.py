"""Per-process caches bounded by bytes, not by entries.

An entry cap (``functools.lru_cache(maxsize=65536)``) bounds memory only while
entries stay small: 65,536 URLs of 10 KiB are 640 MiB. :class:`ByteLRU` weighs
each entry and evicts the least recently used ones past its byte budget, and
refuses an entry heavier than a fixed share of the budget, so one huge key
cannot flush everything else out.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

#: Bytes an entry costs besides its strings' characters: the key and value objects'
#: headers, the dict and order slots, the weight (measured with tracemalloc).
ENTRY_OVERHEAD = 300
#: An entry heavier than this share of the budget is not kept.
MAX_ENTRY_SHARE = 1024

_MISSING: Any = object()


class ByteLRU(Generic[K, V]):
    """A thread-safe least-recently-used map holding at most ``max_bytes`` of weighed entries."""

    def __init__(self, max_bytes: int, *, max_entry: int | None = None) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes: must be greater than 0")
        self.max_bytes = max_bytes
        self.max_entry = max_entry if max_entry is not None else max(1, max_bytes // MAX_ENTRY_SHARE)
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The weight of the entries held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: K, default: Any = None) -> V | Any:
        """The value under ``key`` (now the most recently used), or ``default``.

        Without the lock: the dict's ``get`` and ``move_to_end`` are each one step under
        the GIL (keys are strings and tuples of strings, hashed and compared in C); a key
        another thread evicts in between is a hit all the same.
        """
        hit = self._data.get(key, _MISSING)
        if hit is _MISSING:
            return default
        try:
            self._data.move_to_end(key)
        except KeyError:
            pass
        return hit[0]

    def put(self, key: K, value: V, weight: int) -> bool:
        """Keep ``value`` under ``key``, evicting the least recently used entries to fit.

        False (nothing kept) when ``weight`` is over ``max_entry``.
        """
        if weight > self.max_entry:
            return False
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, weight)
            self._bytes += weight
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._data.popitem(last=False)
                self._bytes -= dropped
        return True

    def pop(self, key: K) -> None:
        """Forget ``key`` (no error when absent)."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


def text_weight(*parts: str | None) -> int:
    """The bytes an entry of these strings costs (characters plus :data:`ENTRY_OVERHEAD`)."""
    return ENTRY_OVERHEAD + sum(len(p) for p in parts if p)


def memoize(max_bytes: int) -> Callable[[F], F]:
    """Cache a function of strings that returns a string (or None) in a :class:`ByteLRU`.

    Exceptions are not cached. The cache is the wrapper's ``cache`` attribute;
    ``cache_clear()`` empties it (as with ``functools.lru_cache``).
    """
    def decorate(fn: F) -> F:
        cache: ByteLRU[tuple[str, ...], str | None] = ByteLRU(max_bytes)

        @functools.wraps(fn)
        def wrapper(*args: str) -> str | None:
            value = cache.get(args, _MISSING)
            if value is _MISSING:
                value = fn(*args)
                cache.put(args, value, text_weight(*args, value))
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
