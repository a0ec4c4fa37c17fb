"""Scrapy, scrapy-redis and a bare asyncio crawler for bench/compare (run in bench/.venv-scrapy)."""
