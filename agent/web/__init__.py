"""The web edge: every HTTP view, the websocket, what open tabs share, rendering for clients, the middleware.

Nothing below this package knows of HTTP or sockets. Its views and the
consumer call the parts' public functions and answer every refusal with the
one error body ``agent.core.errors`` defines (``http`` for HTTP, frames likewise).
"""
