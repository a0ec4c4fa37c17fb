"""Plugin modules the tests load into real workers (``CRAWLER_PLUGINS=tests.programs.<name>``)."""
