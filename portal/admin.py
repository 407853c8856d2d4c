from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from assistant.memory.service import forget_user
from portal.models import User


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ["email", "username", "is_active", "is_staff", "is_superuser", "last_login"]
    search_fields = ["email", "username", "first_name", "last_name"]
    ordering = ["email"]
    readonly_fields = ["uid", "last_login", "date_joined"]
    fieldsets = (*DjangoUserAdmin.fieldsets, (_("Identity"), {"fields": ["uid"]}))  # type: ignore[misc]
    actions = ["purge_memories"]

    @admin.action(description=_("Purge memories"), permissions=["change"])
    def purge_memories(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        users = list(queryset)
        deleted = sum(forget_user(str(user.uid)) for user in users)
        self.message_user(
            request,
            gettext("Deleted %(memories)d memories of %(users)d user(s).") % {"memories": deleted, "users": len(users)},
            level=messages.SUCCESS,
        )
