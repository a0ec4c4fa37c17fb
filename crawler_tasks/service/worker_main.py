"""``python -m crawler_tasks.service.worker_main -A crawler_tasks worker [OPTIONS]``: the worker
``celery -A crawler_tasks worker [OPTIONS]`` runs, without the rest of the ``celery`` command.

``celery`` builds its whole command group before it runs one: every subcommand's module
(``amqp`` brings a REPL and prompt_toolkit) and every ``celery.commands`` plugin (Flower's,
with tornado and its web app), a third of a worker's start. The workers of
``crawler-tasks crawl`` start here instead, with the same options, banner and log
(:func:`crawler_tasks.cli.local.worker_command`). The command line keeps
``-A crawler_tasks worker`` so that the app reads it as ``celery``'s (its ``-P`` pool,
its one-line refusals: :mod:`~crawler_tasks.service.celery_app`). Once it stopped, the
process skips its interpreter's last walks of the heap (:func:`gc.freeze` at exit), a few
hundred ms of each stopping worker.
"""

from __future__ import annotations

import atexit
import gc
import sys

from celery import maybe_patch_concurrency

#: What the command line starts with, as ``celery``'s would.
PREFIX = ["-A", "crawler_tasks", "worker"]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:3] != PREFIX:
        sys.exit(f"usage: python -m crawler_tasks.service.worker_main {' '.join(PREFIX)} [OPTIONS]")
    maybe_patch_concurrency(argv)  # gevent or eventlet (-P) patched before anything else is imported

    # Celery's command module builds a Python lexer for colouring (pygments, about 50 ms)
    # when pygments can be imported; a worker colours nothing. Hidden while it loads.
    hidden = "pygments" not in sys.modules
    if hidden:
        sys.modules["pygments"] = None  # type: ignore[assignment]  # import fails: Celery's fallback
    try:
        from celery.bin.base import CLIContext
        from celery.bin.worker import worker
    finally:
        if hidden:
            del sys.modules["pygments"]

    from .celery_app import default_app

    atexit.register(gc.freeze)  # at exit, the final collections skip the heap (the OS takes it back)

    # As ``celery`` does for its subcommands: CELERY_WORKER_* variables give options.
    worker.main(args=argv[3:], prog_name="celery worker", auto_envvar_prefix="CELERY_WORKER",
                obj=CLIContext(app=default_app(), no_color=None, workdir=None))


if __name__ == "__main__":
    main()
