"""The Celery side: the app built from settings, its tasks and the Beat schedule."""
