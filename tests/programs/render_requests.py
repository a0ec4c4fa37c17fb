"""Rules that ask for a browser request by request: the catalogue's rule yields its items
with ``render=True`` (the items' own rule does not render)."""

from crawler_tasks import Request, rule


@rule(r"/$", follow=False)
def catalogue(page):
    for href in page.xpath("//div[@id='list']/a/@href").getall():
        yield Request(page.urljoin(href), render=True)


@rule(r"/(item|slow)/\d+")
def item(page):
    yield {"name": page.xpath("string(//h1[@class='name'])").get(),
           "price": page.xpath("string(//span[@class='price'])").get()}
