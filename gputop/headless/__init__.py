"""`gputop diagnose` and `gputop record`: the session without a screen. ``loop`` reads every
source into the session and notes the verdict over time; ``document`` makes the versioned
JSON (docs/diagnose.md), ``text`` the terminal's form of it, ``feedback`` what is said while it
runs."""

from gputop.headless.document import SCHEMA_VERSION, document
from gputop.headless.feedback import Feedback
from gputop.headless.loop import Diagnosis, diagnose
from gputop.headless.text import render

__all__ = ["SCHEMA_VERSION", "Diagnosis", "Feedback", "diagnose", "document", "render"]
