"""What users program: parse rules, the requests they yield, item pipelines, and the
plugin modules that hold them.

A plugin is a module (or package) named in ``CRAWLER_PLUGINS``; every worker
imports it at start, and its ``@rule`` functions register here. A rule belongs
to the plugin its module is, or lies under (``myapp`` holds ``myapp.rules``);
rules of other modules are not applied. Item pipelines and request/response
middlewares are named in ``CRAWLER_ITEM_PIPELINES`` and ``CRAWLER_MIDDLEWARES`` as
``dotted.path:priority``. Everything travels in
messages and in Redis as dotted names, never as code.

A crawl may name the plugins that apply to it (``submit(..., plugins=[...])``):
a rule or a pipeline applies to that crawl when its dotted path is one of those
names or lies under one. A crawl that names none gets every loaded one.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .asks import Failure
from .crawl_settings import CrawlSettings, parse_crawl_settings
from .errors import BadInput, PluginError

#: What a rule may return: nothing, one item or request, or an iterable of them.
RuleResult = Any


@dataclass(frozen=True)
class Rule:
    """An extractor for the pages whose URL matches ``pattern`` (and whose host is ``host``)."""

    pattern: re.Pattern[str]
    host: str | None
    follow: bool
    priority: int
    func: Callable[[Any], RuleResult]
    #: ``module.function``: the rule's name in counters, records and plugin lists.
    name: str
    #: Whether the pages it parses are rendered in a browser first.
    render: bool = False

    def matches(self, url: str, host: str) -> bool:
        return (self.host is None or self.host == host) and self.pattern.search(url) is not None


def within(name: str, plugins: Iterable[str]) -> bool:
    """Whether the dotted ``name`` is one of ``plugins`` or lies under one."""
    return any(name == p or name.startswith(p + ".") for p in plugins)


class Rules:
    """The rules registered in this process, in registration order."""

    def __init__(self) -> None:
        self._rules: list[Rule] = []
        #: Whether any rule renders its pages in a browser (asked for every link).
        self.renders = False

    def add(self, rule: Rule) -> None:
        self._rules = [r for r in self._rules if r.name != rule.name]  # a module imported again
        self._rules.append(rule)
        self.renders = any(r.render for r in self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self._rules)

    def of(self, plugins: tuple[str, ...]) -> Rules:
        """The rules that belong to ``plugins`` (their module is one, or lies under one)."""
        subset = Rules()
        subset._rules = [r for r in self._rules if within(r.name, plugins)]
        subset.renders = any(r.render for r in subset._rules)
        return subset

    def pick(self, url: str, host: str, plugins: tuple[str, ...] = ()) -> Rule | None:
        """The rule for ``url``: of those that match (and belong to ``plugins``, when given),
        the one of highest priority; the first registered among equals."""
        best: Rule | None = None
        for r in self._rules:
            if (best is None or r.priority > best.priority) and (not plugins or within(r.name, plugins)) \
                    and r.matches(url, host):
                best = r
        return best


#: The rules every ``@rule`` of this process registers into.
RULES = Rules()


def rule(pattern: str, *, host: str | None = None, follow: bool = True, priority: int = 0,
         render: bool = False) -> Callable[[Callable[[Any], RuleResult]], Callable[[Any], RuleResult]]:
    """Register the decorated function as the extractor of pages whose URL matches the
    regular expression ``pattern`` (searched anywhere in the URL), on ``host`` when given.

    The function receives a :class:`~crawler_tasks.stages.parse.rules.Page` and returns
    or yields items (dicts of JSON values) and :class:`Request` objects. With ``follow``
    the page's links are followed as on any page; without, only the requests it yields.
    Of several rules that match a page, the one of highest ``priority`` runs. With
    ``render`` the pages it matches are rendered in a browser (``crawl.render`` workers)
    before it sees them.
    """
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise PluginError(f"rule pattern {pattern!r} is not a valid regular expression: {exc}") from None

    def register(func: Callable[[Any], RuleResult]) -> Callable[[Any], RuleResult]:
        name = f"{func.__module__}.{func.__qualname__}"
        RULES.add(Rule(compiled, host.lower() if host else None, follow, int(priority), func, name,
                       bool(render)))
        return func
    return register


@dataclass(frozen=True)
class Hooks:
    """A pipeline's or middleware's ``open(crawl)`` and ``close(crawl)`` (either may be None)."""

    name: str
    open: Callable[[Any], Any] | None
    close: Callable[[Any], Any] | None

    @classmethod
    def of(cls, name: str, target: Any) -> Hooks | None:
        """The hooks ``target`` (an object, class instance or module) has; None without."""
        opens, closes = getattr(target, "open", None), getattr(target, "close", None)
        if not callable(opens) and not callable(closes):
            return None
        return cls(name, opens if callable(opens) else None, closes if callable(closes) else None)


@dataclass(frozen=True)
class Pipeline:
    """An item pipeline: ``process(item, page)`` returns the item (possibly changed) or
    raises :class:`~crawler_tasks.core.errors.DropItem`."""

    name: str
    priority: int
    process: Callable[[dict[str, Any], Any], dict[str, Any]]
    hooks: Hooks | None = None


@dataclass(frozen=True)
class Middleware:
    """A request and/or response middleware: ``process_request(request)`` runs before the
    download (ascending priority), ``process_response(request, response)`` after it
    (descending priority); either may be None."""

    name: str
    priority: int
    process_request: Callable[[Any], Any] | None
    process_response: Callable[[Any, Any], Any] | None
    hooks: Hooks | None = None


def parse_ordered(raw: str, setting: str) -> tuple[tuple[str, int], ...]:
    """``a.b.c:100,d.e:200`` as (dotted path, priority) pairs, in ascending priority
    (stable: equal priorities keep their written order)."""
    out: list[tuple[str, int]] = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        path, sep, prio = part.rpartition(":")
        if not sep:
            path, prio = part, "0"
        if not _DOTTED.fullmatch(path.strip()) or not re.fullmatch(r"-?[0-9]+", prio.strip()):
            raise BadInput(f"{setting}: {part!r} is not dotted.path:priority")
        out.append((path.strip(), int(prio)))
    return tuple(sorted(out, key=lambda pair: pair[1]))


def parse_plugins(raw: str, setting: str = "CRAWLER_PLUGINS") -> tuple[str, ...]:
    """A comma list of dotted module names."""
    names = tuple(p.strip() for p in raw.split(",") if p.strip())
    for name in names:
        if not _DOTTED.fullmatch(name):
            raise BadInput(f"{setting}: {name!r} is not a dotted module name")
    return names


_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Program:
    """The plugins this process loaded, and the item pipelines of its settings, in order."""

    plugins: tuple[str, ...] = ()
    rules: Rules = field(default_factory=Rules)
    pipelines: tuple[Pipeline, ...] = ()
    middlewares: tuple[Middleware, ...] = ()
    #: ``CRAWLER_ERROR_HANDLER``: called with each :class:`Failure`; None: the crawler's own
    #: recording and counting only.
    error_handler: Callable[[Failure], Any] | None = None
    error_handler_name: str = ""
    #: Each plugin's ``custom_settings`` (:mod:`~crawler_tasks.core.crawl_settings`), in order.
    custom: tuple[tuple[str, CrawlSettings], ...] = ()
    #: Callbacks and errbacks found by name so far: name -> function (None: not found).
    _functions: dict[str, Callable[..., Any] | None] = field(default_factory=dict, repr=False, compare=False)

    def function(self, name: str, crawl_plugins: tuple[str, ...] = ()) -> Callable[..., Any] | None:
        """The callback or errback a request names (``module.function``), when it lies in a
        plugin this process loaded (and in ``crawl_plugins``, when the crawl names some);
        None otherwise: a name in a message never reaches code outside the plugins."""
        if not within(name, self.plugins) or (crawl_plugins and not within(name, crawl_plugins)):
            return None
        if name not in self._functions:
            self._functions[name] = _function(name)
        return self._functions[name]

    def idle(self) -> list[str]:
        """The plugins that gave this process nothing: no rule, item pipeline, middleware,
        error handler or ``custom_settings`` of theirs (a package's rules count once the package imports the
        modules that hold them)."""
        names = [r.name for r in self.rules] + [p.name for p in self.pipelines] + \
            [m.name for m in self.middlewares] + [self.error_handler_name] + [p for p, _ in self.custom]
        return [p for p in self.plugins if not any(within(name, (p,)) for name in names)]

    def missing(self, crawl_plugins: tuple[str, ...]) -> list[str]:
        """The plugins a crawl names that this process did not load."""
        return [p for p in crawl_plugins if not within(p, self.plugins)]

    def pipelines_for(self, crawl_plugins: tuple[str, ...]) -> tuple[Pipeline, ...]:
        """The item pipelines of a crawl naming ``crawl_plugins`` (all when it names none)."""
        if not crawl_plugins:
            return self.pipelines
        return tuple(p for p in self.pipelines if within(p.name, crawl_plugins))

    def hooks_for(self, crawl_plugins: tuple[str, ...]) -> tuple[Hooks, ...]:
        """The ``open``/``close`` hooks of a crawl's item pipelines and middlewares, in order."""
        parts: tuple[Pipeline | Middleware, ...] = (*self.pipelines_for(crawl_plugins),
                                                    *self.middlewares_for(crawl_plugins))
        return tuple(p.hooks for p in parts if p.hooks is not None)

    def settings_for(self, crawl_plugins: tuple[str, ...]) -> CrawlSettings:
        """The ``custom_settings`` of a crawl naming ``crawl_plugins`` (all loaded plugins when
        it names none), laid over each other in order: a later plugin's value wins."""
        merged = CrawlSettings()
        for plugin, own in self.custom:
            if not crawl_plugins or within(plugin, crawl_plugins):
                merged = own.over(merged)
        return merged

    def middlewares_for(self, crawl_plugins: tuple[str, ...]) -> tuple[Middleware, ...]:
        """The middlewares of a crawl naming ``crawl_plugins`` (all when it names none)."""
        if not crawl_plugins:
            return self.middlewares
        return tuple(m for m in self.middlewares if within(m.name, crawl_plugins))


def load_program(plugins: tuple[str, ...], pipelines: tuple[str, ...] = (),
                 middlewares: tuple[str, ...] = (), error_handler: str = "") -> Program:
    """Import the plugin modules, the item pipelines and the middlewares (``dotted.path:
    priority`` entries, as ``CRAWLER_ITEM_PIPELINES`` and ``CRAWLER_MIDDLEWARES`` hold them)
    and the error handler; :class:`PluginError` with one line naming what failed and why.
    The current directory is importable, as for ``celery -A``."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    custom = []
    for name in plugins:
        own = parse_crawl_settings(name, getattr(_import(name, "CRAWLER_PLUGINS"), "custom_settings", None))
        if own:
            custom.append((name, own))
    loaded = tuple(_pipeline(path, prio) for path, prio in parse_ordered(",".join(pipelines), PIPELINES))
    chain = tuple(_middleware(path, prio) for path, prio in parse_ordered(",".join(middlewares), MIDDLEWARES))
    handler = None
    if error_handler:
        if not _DOTTED.fullmatch(error_handler):
            raise PluginError(f"{HANDLER}: {error_handler!r} is not a dotted path")
        handler = _target(error_handler, HANDLER)
        if not callable(handler):
            raise PluginError(f"{HANDLER}: {error_handler!r} is not callable")
    return Program(plugins, RULES.of(plugins), loaded, chain, handler, error_handler, tuple(custom))


class ProgramSettings(Protocol):
    """The settings :func:`program_of` reads (:class:`~crawler_tasks.core.settings.Settings`
    has them; this module is below settings, which parses its lists with it)."""

    @property
    def plugins(self) -> tuple[str, ...]: ...
    @property
    def item_pipelines(self) -> tuple[str, ...]: ...
    @property
    def middlewares(self) -> tuple[str, ...]: ...
    @property
    def error_handler(self) -> str: ...


def program_of(settings: ProgramSettings) -> Program:
    """:func:`load_program` of ``CRAWLER_PLUGINS``, ``CRAWLER_ITEM_PIPELINES``,
    ``CRAWLER_MIDDLEWARES`` and ``CRAWLER_ERROR_HANDLER``."""
    return load_program(settings.plugins, settings.item_pipelines, settings.middlewares,
                        settings.error_handler)


PIPELINES, MIDDLEWARES, HANDLER = "CRAWLER_ITEM_PIPELINES", "CRAWLER_MIDDLEWARES", "CRAWLER_ERROR_HANDLER"


def idle_warning(plugin: str) -> str:
    """What a process says at start of a plugin that registered nothing."""
    return (f"CRAWLER_PLUGINS: {plugin!r} registered no rule, pipeline or middleware: nothing of it "
            f"runs (rules in a package's submodules count once it imports them, e.g. "
            f"'from . import rules' in its __init__.py)")


def _import(name: str, setting: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure of user code at import is reported the same way
        raise PluginError(f"{setting}: cannot import {name!r}: {type(exc).__name__}: {exc}") from None


def _target(path: str, setting: str) -> Any:
    """What ``path`` names; a class is built once, with no arguments."""
    module, _, attr = path.rpartition(".")
    target = getattr(_import(module, setting), attr, None) if module else None
    if target is None:
        raise PluginError(f"{setting}: {path!r} names nothing")
    if inspect.isclass(target):
        try:
            target = target()
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"{setting}: {path}() failed: {type(exc).__name__}: {exc}") from None
    return target


def _function(name: str) -> Callable[..., Any] | None:
    """The callable ``name`` names: its longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            target = getattr(target, attr, None)
        return target if callable(target) else None
    return None


def _pipeline(path: str, priority: int) -> Pipeline:
    """A pipeline: a function ``(item, page)``, or a class or object with
    ``process_item(item, page)`` (and ``open(crawl)``/``close(crawl)`` if it likes)."""
    target = _target(path, PIPELINES)
    process = getattr(target, "process_item", target)
    if not callable(process):
        raise PluginError(f"{PIPELINES}: {path!r} is neither a function nor has process_item")
    return Pipeline(path, priority, process, None if process is target else Hooks.of(path, target))


def _middleware(path: str, priority: int) -> Middleware:
    """A middleware: a class, object or module with ``process_request`` and/or
    ``process_response``."""
    target = _target(path, MIDDLEWARES)
    request, response = getattr(target, "process_request", None), getattr(target, "process_response", None)
    if not callable(request) and not callable(response):
        raise PluginError(f"{MIDDLEWARES}: {path!r} has neither process_request nor process_response")
    return Middleware(path, priority, request if callable(request) else None,
                      response if callable(response) else None, Hooks.of(path, target))
