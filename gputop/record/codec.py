"""Model dataclasses <-> compact JSON values, exactly (floats round-trip through ``repr``), so
verdicts recomputed from a recording equal the recorded ones.

A record is a list of its field values in the order of the class's field names; the names are
written once in the recording's header, and a reader maps them by name: a file written by a
gputop with more, fewer or reordered fields still decodes (a field the file lacks gets its
default, or None). The type of every field comes from the dataclass annotations, so nothing in
the file says which class to build: a file can only make the classes listed in ``CLASSES``.

Decoding is total over untrusted input: anything that does not fit raises ``CodecError``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from gputop.diagnose import Cause, Evidence, Finding, Saving
from gputop.model.gpu import DeviceInfo, GpuProcess, GpuSample, MigInfo, MigSample
from gputop.model.host import CgroupSample, HostSample, LockWait, ProcSample, Sharer, ThreadInfo
from gputop.model.stacks import Frame, ProcessStacks, SocketPeer, StacksSample, ThreadStack
from gputop.model.steps import AgentState, StepRecord

CLASSES: tuple[type, ...] = (
    DeviceInfo, MigInfo, GpuSample, GpuProcess, MigSample,
    HostSample, ProcSample, ThreadInfo, CgroupSample, LockWait, Sharer,
    StepRecord, AgentState,
    StacksSample, ProcessStacks, ThreadStack, Frame, SocketPeer,
    Finding, Evidence, Cause, Saving,
)  # fmt: skip
"""Everything a recording may contain (AgentsSample is written as a delta, see writer.py)."""


class CodecError(ValueError):
    """A value that does not decode into the class it should be."""


Kind = tuple  # ("any",) | ("scalar", t) | ("opt", k) | ("seq", k) | ("map", k) | ("rec", cls)


def _kind(hint: Any) -> Kind:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return ("opt", _kind(inner[0])) if len(inner) == 1 else ("any",)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return ("seq", _kind(args[0]))
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return ("map", _kind(args[1]) if len(args) == 2 else ("any",))
    if dataclasses.is_dataclass(hint):
        return ("rec", hint)
    if hint in _SCALARS:
        return ("scalar", hint)
    return ("any",)


_SCALARS: dict[Any, tuple[type, ...]] = {
    int: (int,),
    float: (float, int),
    str: (str,),
    bool: (bool,),
}
"""Checked on decode: a number where text belongs is a corrupt file, not a later crash."""
MAX_INT = 2**64
"""No count, size or nanosecond figure is larger; a larger int would overflow the first float
it meets (10**4000 reads as JSON)."""


class Schema:
    """Field names and kinds of every recorded class; encoders and decoders built once."""

    def __init__(self) -> None:
        self.fields: dict[str, tuple[str, ...]] = {}
        self._kinds: dict[type, tuple[Kind, ...]] = {}
        for cls in CLASSES:
            hints = typing.get_type_hints(cls)
            names = tuple(f.name for f in dataclasses.fields(cls))
            self.fields[cls.__name__] = names
            self._kinds[cls] = tuple(_kind(hints[n]) for n in names)
        self.frame_ids: dict[Frame, int] = {}
        self.new_frames: list[Frame] = []
        """Frames met since the last ``take_new_frames``: written once, then referenced by
        number (a stack repeats the same frames every second)."""

    def frame_id(self, frame: Frame) -> int:
        n = self.frame_ids.get(frame)
        if n is None:
            n = self.frame_ids[frame] = len(self.frame_ids)
            self.new_frames.append(frame)
        return n

    def take_new_frames(self) -> list[list[Any]]:
        out = [self.encode(f) for f in self.new_frames]
        self.new_frames = []
        return out

    def forget_frames(self) -> None:
        """A new segment of the file starts: it must not refer to frames defined before."""
        self.frame_ids.clear()
        self.new_frames = []

    def header(self) -> dict[str, list[str]]:
        return {name: list(fields) for name, fields in self.fields.items()}

    # ---- encode ----

    def encode(self, obj: Any) -> list[Any]:
        """A dataclass instance -> its field values, nested records as lists."""
        cls = type(obj)
        kinds = self._kinds[cls]
        names = self.fields[cls.__name__]
        return [_enc(getattr(obj, n), k, self) for n, k in zip(names, kinds, strict=True)]

    def changed_fields(self, old: Any, new: Any) -> dict[str, Any]:
        """The fields of ``new`` that differ from ``old`` (same class), encoded, by name."""
        cls = type(new)
        names, kinds = self.fields[cls.__name__], self._kinds[cls]
        return {
            n: _enc(getattr(new, n), k, self)
            for n, k in zip(names, kinds, strict=True)
            if getattr(new, n) != getattr(old, n)
        }

    # ---- decode ----

    def decoder(self, file_fields: Mapping[str, Any]) -> Decoder:
        """A decoder for a file whose header lists ``file_fields`` per class name."""
        return Decoder(self, file_fields)


def _enc(v: Any, kind: Kind, schema: Schema) -> Any:
    if v is None:
        return None
    tag = kind[0]
    if tag == "rec":
        return schema.frame_id(v) if kind[1] is Frame else schema.encode(v)
    if tag == "opt":
        return _enc(v, kind[1], schema)
    if tag == "seq":
        return [_enc(x, kind[1], schema) for x in v]
    if tag == "map":
        return {str(k): _enc(x, kind[1], schema) for k, x in v.items()}
    return _plain(v)


def _plain(v: Any) -> Any:
    """A free-form value (fingerprint entries, capture data) as JSON types."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def _frozen(v: Any) -> Any:
    """JSON arrays back as tuples (the model's sequences are tuples)."""
    if isinstance(v, list):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return {k: _frozen(x) for k, x in v.items()}
    return v


class Decoder:
    """Builds model objects from one file's records (its field order, by name)."""

    def __init__(self, schema: Schema, file_fields: Mapping[str, Any]) -> None:
        self._build: dict[type, Callable[[Any], Any]] = {}
        self.names: dict[type, list[str]] = {}
        self._ours = {
            cls: dict(zip(schema.fields[cls.__name__], schema._kinds[cls], strict=True))
            for cls in CLASSES
        }
        """The file's field order per class."""
        self.frames: list[Frame] = []
        for cls in CLASSES:
            names = file_fields.get(cls.__name__)
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise CodecError(f"the header has no field list for {cls.__name__}")
            self.names[cls] = names
            self._build[cls] = self._builder(cls, names, schema)

    def _builder(self, cls: type, names: list[str], schema: Schema) -> Callable[[Any], Any]:
        ours = dict(zip(schema.fields[cls.__name__], schema._kinds[cls], strict=True))
        plan = [(i, n, ours[n]) for i, n in enumerate(names) if n in ours]
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [n for n in required if n not in names]
        for n in missing:  # None only where the model allows it: a file without t is unusable
            if ours[n][0] not in ("opt", "any"):
                raise CodecError(f"the file's {cls.__name__} records have no {n}")
        width = len(names)

        def build(raw: Any) -> Any:
            if not isinstance(raw, list) or len(raw) != width:
                raise CodecError(f"a {cls.__name__} record has the wrong shape")
            kwargs = {n: self.value(raw[i], k) for i, n, k in plan}
            for n in missing:
                kwargs[n] = None
            try:
                return cls(**kwargs)
            except TypeError as e:
                raise CodecError(f"a {cls.__name__} record does not fit: {e}") from None

        return build

    def record(self, cls: type, raw: Any) -> Any:
        return self._build[cls](raw)

    def fields(self, cls: type, raw: dict[str, Any]) -> dict[str, Any]:
        """Some fields of a ``cls`` by name (a partial update); unknown names are skipped."""
        ours = self._ours[cls]
        out = {n: self.value(v, ours[n]) for n, v in raw.items() if n in ours}
        for n, v in out.items():
            if v is None and ours[n][0] not in ("opt", "any"):
                raise CodecError(f"a {cls.__name__} update sets {n} to nothing")
        return out

    def define_frames(self, raw: Any) -> None:
        if not isinstance(raw, list):
            raise CodecError("a frame table was expected")
        self.frames.extend(self._build[Frame](f) for f in raw)

    def value(self, raw: Any, kind: Kind) -> Any:
        tag = kind[0]
        if raw is None:
            if tag in ("opt", "any"):
                return None
            raise CodecError("null where the model has no None")
        if tag == "rec":
            if kind[1] is Frame:
                if type(raw) is not int or not 0 <= raw < len(self.frames):
                    raise CodecError("a stack frame refers to no frame defined before it")
                return self.frames[raw]
            return self._build[kind[1]](raw)
        if tag == "opt":
            return self.value(raw, kind[1])
        if tag == "seq":
            if not isinstance(raw, list):
                raise CodecError("a list was expected")
            return tuple(self.value(x, kind[1]) for x in raw)
        if tag == "map":
            if not isinstance(raw, dict):
                raise CodecError("a mapping was expected")
            return types.MappingProxyType({k: self.value(x, kind[1]) for k, x in raw.items()})
        if tag == "scalar":
            ok = _SCALARS[kind[1]]
            if not isinstance(raw, ok) or (kind[1] is not bool and isinstance(raw, bool)):
                raise CodecError(f"{kind[1].__name__} expected, found {type(raw).__name__}")
            if type(raw) is int and not -MAX_INT <= raw <= MAX_INT:
                raise CodecError("a number larger than any reading")
            return raw
        return _frozen(raw)
