"""A baby diary, as a real site's DRF app has it: the patterns tools made from its code must survive.

Children reached by slug; timers whose duration changes every second; feedings whose serializer
stops (deletes) the timer it is given; weights with tags (a many-to-many field a form edits as
"birth, hospital"); code snippets with a language among hundreds, as in DRF's own tutorial.
Most models have no ``__str__`` of their own, as many sites' models do not.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

LANGUAGES = [(f"lang{n:03d}", f"Language {n:03d}") for n in range(600)]
STYLES = [(f"style{n:02d}", f"Style {n:02d}") for n in range(48)]  # as many as Pygments has


class Tag(models.Model):
    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Child(models.Model):
    first_name = models.CharField(max_length=100)
    slug = models.SlugField(unique=True)
    birth_date = models.DateField()

    class Meta:
        ordering = ["first_name"]
        verbose_name_plural = "children"

    def __str__(self) -> str:
        return self.first_name


class Timer(models.Model):
    child = models.ForeignKey(Child, on_delete=models.CASCADE, related_name="timers")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100, blank=True)
    start = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-start"]


class Feeding(models.Model):
    METHODS = [("bottle", "Bottle"), ("left breast", "Left breast"), ("right breast", "Right breast")]

    child = models.ForeignKey(Child, on_delete=models.CASCADE, related_name="feedings")
    start = models.DateTimeField()
    end = models.DateTimeField()
    method = models.CharField(max_length=20, choices=METHODS)
    amount = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-start"]


class Weight(models.Model):
    child = models.ForeignKey(Child, on_delete=models.CASCADE, related_name="weights")
    weight = models.FloatField()
    date = models.DateField()
    notes = models.TextField(blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="+")

    class Meta:
        ordering = ["-date"]


class Snippet(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    title = models.CharField(max_length=100, blank=True, default="")
    code = models.TextField()
    language = models.CharField(choices=LANGUAGES, default="lang000", max_length=100)
    style = models.CharField(choices=STYLES, default="style00", max_length=100)
    picture = models.FileField(upload_to="snippets/", blank=True)

    class Meta:
        ordering = ["created"]
