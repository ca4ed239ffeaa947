"""The task message both app worlds give the student: how to reach the apps, who the supervisor is, the task.

appworld_lite and the real AppWorld adapter share it word for word, so what a student learns on one
carries over to the other."""

from __future__ import annotations

from collections.abc import Mapping

HOW_TO = """My apps are reachable from Python in the working directory: `from apis import apis` gives them, and \
apis.<app>.<api>(**arguments) returns plain Python data or raises an error when the call fails. Find out what \
exists with apis.api_docs.show_app_descriptions(), apis.api_docs.show_api_descriptions(app_name=...) and \
apis.api_docs.show_api_doc(app_name=..., api_name=...). Each app needs its own login: \
apis.<app>.login(username=<my email>, password=...) with the password from \
apis.supervisor.show_account_passwords(); pass the access_token it returns to that app's other APIs. Lists come \
in pages (page_index from 0). When the task is done, call apis.supervisor.complete_task(answer=...) with the \
answer, or apis.supervisor.complete_task() if the task asks no question."""


def task_message(supervisor: Mapping[str, str], task: str) -> str:
    """The first user message: the general how-to, who I am, then the task itself."""
    me = (f"My name is {supervisor['first_name']} {supervisor['last_name']}. My email is {supervisor['email']} "
          f"and my phone number is {supervisor['phone_number']}.")
    return f"{HOW_TO}\n\n{me}\n\nTask: {task}"
