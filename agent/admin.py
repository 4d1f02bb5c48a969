"""Staff pages; filled in by the admin module."""
