import os
import threading
import time

from django.apps import AppConfig


def _exit_with_parent(parent_pid: int) -> None:
    """Stop this server when the test process that started it is gone (e.g. pytest killed with
    SIGKILL), so no orphan keeps a port or a temp dir busy."""
    while True:
        time.sleep(1)
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass


class TestHooksConfig(AppConfig):
    name = "testhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        parent = os.environ.get("AUTHSERVER_PARENT_PID")
        if parent and parent.isdigit():
            threading.Thread(target=_exit_with_parent, args=(int(parent),), daemon=True).start()
