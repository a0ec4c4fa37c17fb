"""Scrapy, scrapy-redis and a bare asyncio crawler for bench/compare and bench/broad (run in bench/.venv-scrapy)."""
