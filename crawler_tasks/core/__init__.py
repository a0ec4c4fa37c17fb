"""Pure rules and models: no Redis, no HTTP, no Celery app.

Settings and their defaults, request and record models, URL rules, address
classification, the fetch decisions (retry, redirect, back-off), routing of
priorities to queues, the error tree, and the registry of counter names
(:mod:`~crawler_tasks.core.counters`). Everything else imports from here.
"""
