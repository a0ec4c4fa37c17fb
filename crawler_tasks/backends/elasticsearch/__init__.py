"""Elasticsearch store: page records in one index, crawl statistics in ``<index>-stats``.

``elasticsearch://[user:password@]host[:9200]/index``, or ``elasticsearchs://`` for
TLS. One document per page, its fingerprint the id, so a redelivered batch
overwrites what it wrote; a record Elasticsearch refuses for good comes back as
a :class:`~crawler_tasks.backends.RecordFailure`, anything else retries the
batch. The design, and why, module by module:

* :mod:`~crawler_tasks.backends.elasticsearch.uri`: the URI read into a
  :class:`Target` (node, index, credentials or ``CRAWLER_ES_API_KEY``, CA);
* :mod:`~crawler_tasks.backends.elasticsearch.documents`: the two mappings
  (:data:`PAGES_MAPPING`, :data:`STATS_MAPPING`: why each field is mapped as it
  is) and the statistics document of a crawl;
* :mod:`~crawler_tasks.backends.elasticsearch.bulk`: a batch through
  ``streaming_bulk``, 429 and 5xx items retried, a record's own fault told from
  the cluster's;
* :mod:`~crawler_tasks.backends.elasticsearch.errors`: the server's and the
  client's errors in one line, credentials never shown;
* :mod:`~crawler_tasks.backends.elasticsearch.store`: :class:`ElasticsearchStore`,
  one client per process, indices created on first write, real-time ``get``,
  refreshed counts and scrolled exports.
"""

from __future__ import annotations

from .documents import PAGES_MAPPING, STATS_MAPPING
from .store import ElasticsearchStore
from .uri import Target, parse_uri

__all__ = ["PAGES_MAPPING", "STATS_MAPPING", "ElasticsearchStore", "Target", "parse_uri"]
