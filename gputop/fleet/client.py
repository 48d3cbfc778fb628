"""Prometheus' HTTP API (``/api/v1/query``) with the standard library: a deadline on every
request, a bounded answer (a crafted or runaway response cannot fill memory), and every
failure one line (FleetError) that says what to do."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from gputop.errors import CannotDo

TIMEOUT_S = 10.0
MAX_BYTES = 16 << 20
"""An answer larger than this is refused: a fleet's instant vectors are a few hundred series."""


class FleetError(CannotDo):
    """Prometheus could not be asked, or its answer was not one."""

    when = "`gputop fleet` cannot reach Prometheus, or its answer is not an instant vector"


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels and its value."""

    labels: dict[str, str]
    value: float


class Prometheus:
    """The server at ``url`` (http or https), asked instant queries."""

    def __init__(self, url: str, timeout: float = TIMEOUT_S) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise FleetError(f"--prometheus {url!r}: not an http(s) URL (http://HOST:9090)")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def query(self, expr: str) -> list[Sample]:
        """The instant vector ``expr`` evaluates to now."""
        body = urllib.parse.urlencode({"query": expr}).encode()
        request = urllib.request.Request(f"{self.url}/api/v1/query", data=body, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as e:
            raise FleetError(f"{self.url} answered HTTP {e.code}: {_why(e)}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise FleetError(
                f"cannot reach Prometheus at {self.url} ({reason}): check the URL and that "
                "the server runs"
            ) from None
        if len(raw) > MAX_BYTES:
            raise FleetError(f"{self.url}'s answer is over {MAX_BYTES >> 20} MiB: refused")
        return parse(raw, self.url)


def parse(raw: bytes, where: str) -> list[Sample]:
    """An API answer's instant vector; anything else is one FleetError line."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise FleetError(f"{where} did not answer with JSON: is it a Prometheus server?") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        raise FleetError(f"{where} refused the query: {str(error)[:200] or 'no reason given'}")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise FleetError(f"{where} answered something other than an instant vector")
    out = []
    for item in data.get("result") or []:
        sample = _sample(item)
        if sample is not None:
            out.append(sample)
    return out


def _sample(item: object) -> Sample | None:
    """One result entry, or None when it is malformed or not a finite number."""
    if not isinstance(item, dict):
        return None
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
        return None
    try:
        number = float(value[1])
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    labels = {str(k): str(v) for k, v in metric.items()}
    return Sample(labels, number)


def _why(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read(65536)).get("error", e.reason))[:200]
    except (ValueError, AttributeError, OSError):
        return str(e.reason)[:200]
