from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.utils.translation import gettext_lazy as _

from portal.models import User


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ["email", "username", "is_active", "is_staff", "is_superuser", "last_login"]
    search_fields = ["email", "username", "first_name", "last_name"]
    ordering = ["email"]
    readonly_fields = ["uid", "last_login", "date_joined"]
    fieldsets = (*DjangoUserAdmin.fieldsets, (_("Identity"), {"fields": ["uid"]}))  # type: ignore[misc]
