import factory
from django.contrib.auth import get_user_model

from agent.models import Conversation


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
