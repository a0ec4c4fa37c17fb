"""A plugin that cannot be imported."""

raise ImportError("this plugin is broken on purpose")
