from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from agent.models import AIRequest, Conversation, Endpoint, Turn, UserSettings


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def saved(self, create, extracted, **kwargs):
        if create:
            self.save()


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    user = factory.SubFactory(UserFactory)
    title = factory.Sequence(lambda n: f"chat {n}")


class EndpointFactory(factory.django.DjangoModelFactory):
    """A model endpoint; nothing listens at its default address (a test that calls it passes its server's)."""

    class Meta:
        model = Endpoint

    name = factory.Sequence(lambda n: f"endpoint {n}")
    base_url = "http://127.0.0.1:9/v1"
    model = "m"


class UserSettingsFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = UserSettings

    user = factory.SubFactory(UserFactory)


class AIRequestFactory(factory.django.DjangoModelFactory):
    """One journalled model call of the chat, a success unless told otherwise."""

    class Meta:
        model = AIRequest

    user = factory.SubFactory(UserFactory)
    source = "agent"
    task = "agent.chat"
    status = AIRequest.Status.SUCCESS


class TurnFactory(factory.django.DjangoModelFactory):
    """A queued turn of a chat's owner, with its deadline five minutes ahead."""

    class Meta:
        model = Turn

    conversation = factory.SubFactory(ConversationFactory)
    user = factory.LazyAttribute(lambda turn: turn.conversation.user)
    language = "en"
    text = "hi"
    deadline_at = factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=5))
