"""``python -m gputop``."""

from gputop.cli import main

raise SystemExit(main())
