"""The ``crawler-tasks`` command: crawl, demo, submit, export, status and the
rest; local workers and an embedded Redis for one-machine crawls."""
