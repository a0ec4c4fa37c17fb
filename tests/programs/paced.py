"""A plugin with its own crawl settings (``custom_settings``) and one rule that follows
every link: its crawls go one request at a time per host, with a budget and a header."""

from crawler_tasks import rule

custom_settings = {
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    "delay": 0.05,
    "max_pages": 7,
    "headers": {"X-Paced-Client": "paced-plugin", "Authorization": "Bearer paced-secret"},
}


@rule(r"/")
def every_page(page):
    yield {"url": page.url, "title": page.css("title::text").get()}
