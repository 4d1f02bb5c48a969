"""A personal AI assistant for every signed-in user of a Django site."""
