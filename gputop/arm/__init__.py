"""Captures that take themselves: triggers read from the session's state, rate limits, the
capture that fits each event (``armed.Armed``)."""
