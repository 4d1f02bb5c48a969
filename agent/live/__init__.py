"""What carries events between processes to the open tabs: the Redis channel layer and each user's
count of open streams."""
