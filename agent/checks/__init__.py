"""System checks for ``settings.AGENT`` and the site around the app, each with its own id.

``manage.py check --tag agent`` runs them all; ``AgentConfig.ready`` imports the modules that
register them.
"""
