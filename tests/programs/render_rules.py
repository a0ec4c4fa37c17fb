"""Rules that render their pages: a catalogue and its items exist only once their scripts ran
(tests/fakes/js_site.py), so both rules ask for a browser."""

from crawler_tasks import rule


@rule(r"/$", render=True)
def catalogue(page):
    """Nothing to extract: the rendered page's links are followed (to the items)."""
    return None


@rule(r"/(item|slow)/\d+", render=True)
def item(page):
    yield {"name": page.xpath("string(//h1[@class='name'])").get(),
           "price": page.xpath("string(//span[@class='price'])").get()}
