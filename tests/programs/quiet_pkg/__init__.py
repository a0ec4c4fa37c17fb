"""A plugin package whose rule lives in a submodule its __init__ does not import."""
