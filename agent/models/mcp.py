from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class McpToken(models.Model):
    """A personal access token an MCP client calls with: a credential like a browser session.

    Only the secret's SHA-256 digest is kept; the secret is shown once, when it is made. Live while
    not revoked and not past ``expires_at``.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_mcp_tokens")
    name = models.CharField(_("name"), max_length=100)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires"))
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("MCP token")
        verbose_name_plural = _("MCP tokens")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "name"], condition=models.Q(revoked_at__isnull=True), name="agent_mcptoken_live_name"
            )
        ]

    def __str__(self) -> str:
        return self.name


class McpCall(models.Model):
    """One call an MCP client made with a token: the journal, and what the per-minute cap counts.

    A call with a personal token names the token; one with an OAuth token names the OAuth client
    (django-oauth-toolkit's application, by id: the app needs no table of it) and, as
    ``token_name``, the client's name as it registered.
    """

    token = models.ForeignKey(McpToken, on_delete=models.CASCADE, related_name="calls", null=True, blank=True)
    oauth_application_id = models.BigIntegerField(_("OAuth client"), null=True, blank=True)
    token_name = models.CharField(_("token"), max_length=255)  # as it was named at the call
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    client = models.CharField(_("client"), max_length=200, blank=True)  # the name the client gave, if any
    method = models.CharField(_("method"), max_length=64)
    tool_name = models.CharField(_("tool"), max_length=64, blank=True)
    outcome = models.CharField(_("outcome"), max_length=32, blank=True)
    at = models.DateTimeField(_("at"), auto_now_add=True)

    class Meta:
        ordering = ["-at"]
        verbose_name = _("MCP call")
        verbose_name_plural = _("MCP calls")
        indexes = [
            models.Index(fields=["token", "at"], name="agent_mcpcall_token_at"),
            models.Index(fields=["oauth_application_id", "user", "at"], name="agent_mcpcall_oauth_at"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(token__isnull=False, oauth_application_id__isnull=True)
                | models.Q(token__isnull=True, oauth_application_id__isnull=False),
                name="agent_mcpcall_one_credential",
            )
        ]

    def __str__(self) -> str:
        return f"{self.token_name}: {self.tool_name or self.method}"
