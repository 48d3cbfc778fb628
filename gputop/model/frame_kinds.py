"""What kind of work a stack is doing, from the libraries its frames are in: text, images,
numeric arrays, file reads, network reads, serialisation, logging, or the job's own Python.

A slice's levers follow the kind of work that consumes it (a fast tokenizer for text, a
smaller decode for images), and a lever for a kind no frame shows is never offered
(docs/facts/bounds.md, "What consumes a slice"). The kind is read from the innermost frame
that belongs to a known library: a dataset's ``__getitem__`` that calls ``PIL.Image.open``
is image work, one that calls ``re.findall`` is text. C functions have no Python frame
(a compiled pattern's ``findall``, ``str.lower``, ``unicodedata.normalize``), so a stack whose
innermost frames are the job's own is "its own Python": no library kind is claimed. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gputop.model.stack_stats import LIBRARIES, in_stdlib, package
from gputop.model.stacks import Frame

TEXT = "text"
IMAGE = "image"
AUDIO = "audio"
NUMERIC = "numeric"
READ = "read"
NETWORK = "network"
SERIALISE = "serialise"
COLLATE = "collate"
LOGGING = "logging"
OWN = "own"
"""The job's own Python (or a C call it made that has no frame of its own)."""

KIND_NAMES: dict[str, str] = {
    TEXT: "text normalising and tokenising",
    IMAGE: "image decoding and augmentation",
    AUDIO: "audio decoding and features",
    NUMERIC: "numpy/pandas work",
    READ: "file reads and decompression",
    NETWORK: "network reads",
    SERIALISE: "serialisation (pickle, JSON, torch.save)",
    COLLATE: "collating samples into a batch",
    LOGGING: "logging and metrics writers",
    OWN: "the job's own Python",
}
"""How a cause line says each kind ("workers spend 71% in ...: text tokenised in Python")."""

_BY_FILE: tuple[tuple[str, str], ...] = (
    # the innermost match wins, so a library's own helpers (numpy inside PIL) count as the
    # library the job called only when no inner frame is known: order inside one frame does
    # not matter, prefixes are whole path parts
    ("re/", TEXT), ("re.py", TEXT), ("sre_", TEXT), ("tokenizers/", TEXT), ("sentencepiece/", TEXT),
    ("tiktoken/", TEXT), ("nltk/", TEXT), ("spacy/", TEXT), ("ftfy/", TEXT),
    ("transformers/tokenization_", TEXT), ("string.py", TEXT), ("textwrap.py", TEXT),
    ("html/", TEXT), ("regex/", TEXT), ("jieba/", TEXT),
    ("PIL/", IMAGE), ("cv2/", IMAGE), ("torchvision/transforms/", IMAGE),
    ("torchvision/io/", IMAGE), ("torchvision/datasets/folder.py", IMAGE),
    ("albumentations/", IMAGE), ("imageio/", IMAGE), ("skimage/", IMAGE),
    ("simplejpeg/", IMAGE), ("turbojpeg", IMAGE), ("timm/data/", IMAGE),
    ("torchaudio/", AUDIO), ("librosa/", AUDIO), ("soundfile.py", AUDIO), ("audioread/", AUDIO),
    ("numpy/", NUMERIC), ("pandas/", NUMERIC), ("scipy/", NUMERIC), ("polars/", NUMERIC),
    ("gzip.py", READ), ("lzma.py", READ), ("bz2.py", READ), ("_compression.py", READ),
    ("zipfile", READ), ("tarfile.py", READ), ("zstandard/", READ), ("shutil.py", READ),
    ("pathlib", READ), ("codecs.py", READ), ("_pyio.py", READ), ("glob.py", READ),
    ("h5py/", READ), ("webdataset/", READ), ("fsspec/", READ), ("pyarrow/", READ),
    ("lmdb/", READ), ("streaming/", READ), ("datasets/", READ), ("tables/", READ),
    ("socket.py", NETWORK), ("ssl.py", NETWORK), ("http/", NETWORK), ("urllib/", NETWORK),
    ("urllib3/", NETWORK), ("requests/", NETWORK), ("botocore/", NETWORK), ("boto3/", NETWORK),
    ("s3fs/", NETWORK), ("gcsfs/", NETWORK), ("aiohttp/", NETWORK), ("grpc/", NETWORK),
    ("httpx/", NETWORK), ("httpcore/", NETWORK), ("google/cloud/", NETWORK),
    ("torch/serialization.py", SERIALISE), ("pickle.py", SERIALISE), ("copyreg.py", SERIALISE),
    ("json/", SERIALISE), ("msgpack/", SERIALISE), ("safetensors/", SERIALISE),
    ("torch/distributed/checkpoint/", SERIALISE), ("orjson", SERIALISE), ("yaml/", SERIALISE),
    ("torch/utils/data/_utils/collate.py", COLLATE),
    ("logging/", LOGGING), ("wandb/", LOGGING), ("tensorboard/", LOGGING),
    ("torch/utils/tensorboard/", LOGGING), ("mlflow/", LOGGING), ("tensorboardX/", LOGGING),
)  # fmt: skip
"""File prefixes (py-spy's package-relative short file names) -> the kind of work there."""

_NOT_WORK: tuple[str, ...] = (
    "torch/utils/data/_utils/worker.py", "torch/utils/data/_utils/fetch.py",
    "torch/utils/data/dataloader.py", "torch/utils/data/dataset.py", "threading.py",
    "multiprocessing/", "queue.py", "selectors.py", "gputop", "torch/_tensor.py",
)  # fmt: skip
"""Frames that carry work to where it is done (the worker loop, the fetcher, a Subset's
``__getitem__``): they name no kind and are not the job's own frame either."""


def _matches(file: str, prefix: str) -> bool:
    """Short file names are package-relative (``PIL/Image.py``), so a library is a prefix: a
    job's own ``mypkg/datasets/x.py`` is not the ``datasets`` library."""
    return file.startswith(prefix)


_KNOWN: dict[str, str | None] = {}
"""Each file's kind, once: a window holds thousands of stacks over a few hundred files."""
_KNOWN_MAX = 4096


def kind_of_frame(f: Frame) -> str | None:
    """The kind of work a frame's library does, None when the frame names none."""
    if f.file in _KNOWN:
        return _KNOWN[f.file]
    if len(_KNOWN) >= _KNOWN_MAX:
        _KNOWN.clear()
    kind = _KNOWN[f.file] = next((k for prefix, k in _BY_FILE if _matches(f.file, prefix)), None)
    return kind


def _plumbing(f: Frame) -> bool:
    return f.file.startswith("<") or any(_matches(f.file, p) for p in _NOT_WORK)


def kind_of(frames: Sequence[Frame]) -> tuple[str, Frame | None]:
    """(kind, the frame that shows it) for a stack, innermost first: the innermost frame of a
    known library, else what the innermost frame's source line calls (a C function has no
    frame of its own: ``WORD.findall(text.lower())`` is text), else the job's own Python at
    its innermost own frame (None: only plumbing)."""
    for f in frames:
        kind = kind_of_frame(f)
        if kind is not None:
            return kind, f
    own = next((f for f in frames if not _plumbing(f)), None)
    called = kind_of_code(frames[0].code) if frames and frames[0].code else None
    return (called, frames[0]) if called is not None else (OWN, own)


def wants_code(f: Frame) -> bool:
    """A thread's innermost frame whose source line may say what C call it is in: the job's
    own code (not the standard library, a known library or the plumbing)."""
    return not (in_stdlib(f) or package(f) in LIBRARIES or kind_of_frame(f) or _plumbing(f))


_BY_CODE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        (r"\b(re|regex|unicodedata|html|string)\.\w+\(|\.(lower|upper|casefold|"
         r"findall|finditer|sub|subn|translate|normalize|isalpha|isalnum|isdigit|"
         r"tokenize|encode_batch)\(|\btokeni[sz]", TEXT),
        (r"\b(Image|ImageOps|ImageFilter|cv2|torchvision|transforms|v2|albumentations|"
         r"imageio|simplejpeg|turbojpeg)\.\w+\(|\.(convert|resize|crop|rotate|"
         r"filter|decode_jpeg)\(", IMAGE),
        (r"\b(torchaudio|librosa|soundfile|sf)\.\w+\(", AUDIO),
        (r"\b(np|numpy|pd|pandas|scipy)\.\w+|\.(to_numpy|values|iloc|loc)\b", NUMERIC),
        (r"\b(json|pickle|msgpack|yaml|orjson|marshal)\.\w+\(|\btorch\.(load|save)\(",
         SERIALISE),
        (r"\b(requests|urllib|httpx|boto3|s3|urlopen)\b|\.(recv|get_object|download_\w*)\(",
         NETWORK),
        (r"\bopen\(|\.(read|readline|readlines|read_bytes|read_text|readinto)\(|"
         r"\b(gzip|lzma|bz2|zlib|zstd|tarfile|zipfile|h5py|os\.listdir|os\.scandir|glob)\b",
         READ),
    )
)  # fmt: skip
"""What a source line calls -> the kind of work (the first that matches: a line that opens
and parses JSON is serialisation)."""


def kind_of_code(code: str) -> str | None:
    """The kind of work a line of the job's own code calls into, None when it names none."""
    return next((kind for pattern, kind in _BY_CODE if pattern.search(code)), None)
