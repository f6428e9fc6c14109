from django.conf import settings
from django.db import models


class Profile(models.Model):
    """Claims that django.contrib.auth.User has no field for."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_profile")
    name = models.CharField(max_length=255, blank=True)
    email_verified = models.BooleanField(default=True)
    picture = models.CharField(max_length=500, blank=True)
