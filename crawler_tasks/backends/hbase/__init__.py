"""HBase store: page records in one HBase table, through the Thrift (v1) gateway and happybase.

``hbase://host[:port]/table[?transport=framed][&protocol=compact][&prefix=p][&pool=8]``
(:mod:`~crawler_tasks.backends.hbase.uri`). The design, and why, module by module:

* :mod:`~crawler_tasks.backends.hbase.keys`: row keys, the site first
  (``com.example.www:https:8443/a/b?q=1 <fingerprint>``) so that one site is one
  range, and the ``~fp:<fingerprint>`` index rows that ``get`` reads;
* :mod:`~crawler_tasks.backends.hbase.cells`: a record as cells (families ``f``,
  ``c``, ``l``, ``i``; JSON values; the body zlib-compressed and split over cells
  when large) and the cells packed into ``mutateRows`` calls the wire accepts;
* :mod:`~crawler_tasks.backends.hbase.gateway`: pooled connections per process,
  the gateway's errors as :class:`~crawler_tasks.core.errors.StoreUnavailable`,
  the table created on first write;
* :mod:`~crawler_tasks.backends.hbase.store`: :class:`HBaseStore`, the store
  protocol on top of them (batched writes, scans by crawl and by site).
"""

from __future__ import annotations

from .gateway import describe_error
from .keys import row_key, site_prefix
from .store import HBaseStore
from .uri import parse_uri

__all__ = ["HBaseStore", "describe_error", "parse_uri", "row_key", "site_prefix"]
