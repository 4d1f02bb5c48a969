import django.db.models.deletion
from django.db import migrations, models

# Every message stored so far is on its chat's one line: its parent is the message just before it.
LINK_EXISTING = """
UPDATE agent_message SET parent_id = (
    SELECT earlier.id FROM agent_message earlier
    WHERE earlier.conversation_id = agent_message.conversation_id AND earlier.seq < agent_message.seq
    ORDER BY earlier.seq DESC LIMIT 1
)
"""
END_LINES = """
UPDATE agent_conversation SET line_end = (
    SELECT m.id FROM agent_message m WHERE m.conversation_id = agent_conversation.id ORDER BY m.seq DESC LIMIT 1
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0007_message_partial"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="has_versions",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.AddField(
            model_name="conversation",
            name="line_end",
            field=models.UUIDField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="active",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="message",
            name="last_child",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="agent.message",
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="parent",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="agent.message",
            ),
        ),
        migrations.RunSQL(LINK_EXISTING, migrations.RunSQL.noop),
        migrations.RunSQL(END_LINES, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("active", True)), fields=["conversation", "seq"], name="agent_msg_line"
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["conversation", "parent", "seq"], name="agent_msg_versions"),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=models.Q(("active", True)), fields=("conversation", "parent"), name="agent_message_one_line"
            ),
        ),
    ]
