"""The channel layer a site names in ``CHANNEL_LAYERS`` (the host's import path; the code is ``agent.live``'s)."""

from .live.channel_layer import RedisChannelLayer, redis_channel_layer

__all__ = ["RedisChannelLayer", "redis_channel_layer"]
