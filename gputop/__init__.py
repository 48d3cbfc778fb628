"""gputop: a live terminal monitor that attaches to a training job and explains why it is slow."""

__version__ = "0.1.0"

DISTRIBUTION = "gputop-why"
"""The name gputop is installed by (``pipx install gputop-why``): ``gputop`` on the package
index is another project (a GPU monitor, 0.3.0 when we checked), so ours needs its own. The
command stays ``gputop``; ``gputop-why`` is the same command under the distribution's name, so
``pipx run gputop-why`` and ``uvx gputop-why`` work and a clash with the other project's
``gputop`` command has a way out."""


def version_line() -> str:
    """What ``gputop --version`` says: the command's version and the name to install it by."""
    return f"gputop {__version__} (distribution {DISTRIBUTION})"
