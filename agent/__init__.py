"""A personal AI assistant for every signed-in user of a Django site."""

__version__ = "0.1.0"
