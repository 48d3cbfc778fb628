"""gputop: a live terminal monitor that attaches to a training job and explains why it is slow."""

__version__ = "0.1.0"
