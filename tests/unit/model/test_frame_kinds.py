"""The kind of work a stack does, from the library its innermost known frame is in
(``model/frame_kinds.py``)."""

from __future__ import annotations

import pytest

from gputop.model.frame_kinds import IMAGE, NETWORK, OWN, READ, SERIALISE, TEXT, kind_of
from gputop.model.stacks import Frame


def frames(*pairs: tuple[str, str]) -> tuple[Frame, ...]:
    return tuple(Frame(name, file, 1) for file, name in pairs)


@pytest.mark.parametrize(("leaf", "kind"), [
    (("re/__init__.py", "sub"), TEXT),
    (("re.py", "findall"), TEXT),  # Python 3.10's module
    (("tokenizers/implementations/base_tokenizer.py", "BaseTokenizer.encode"), TEXT),
    (("PIL/JpegImagePlugin.py", "JpegImageFile.load_read"), IMAGE),
    (("torchvision/transforms/functional.py", "resize"), IMAGE),
    (("gzip.py", "GzipFile.read"), READ),
    (("urllib3/response.py", "HTTPResponse.read"), NETWORK),
    (("pickle.py", "_Unpickler.load"), SERIALISE),
])  # fmt: skip
def test_a_librarys_frame_names_its_kind(leaf, kind):
    got, shown = kind_of(frames(leaf, ("data.py", "Set.__getitem__")))
    assert (got, shown.file) == (kind, leaf[0])


def test_the_innermost_known_library_wins():
    # numpy converting a PIL image inside the job's transform: the image library is further
    # out, numpy is what runs
    got, _ = kind_of(frames(("numpy/core/numeric.py", "asarray"),
                            ("PIL/Image.py", "Image.__array_interface__"),
                            ("data.py", "Set.__getitem__")))  # fmt: skip
    assert got == "numeric"


def test_the_jobs_own_package_is_not_a_library_of_the_same_name():
    got, shown = kind_of(
        frames(
            ("mypkg/datasets/rows.py", "parse"),
            ("torch/utils/data/_utils/fetch.py", "_MapDatasetFetcher.fetch"),
        )
    )
    assert got == OWN and shown is not None and shown.name == "parse"


def test_only_plumbing_shows_no_frame_of_its_own():
    got, shown = kind_of(frames(("torch/utils/data/_utils/worker.py", "_worker_loop")))
    assert (got, shown) == (OWN, None)


@pytest.mark.parametrize(("code", "kind"), [
    ("ids = [self.vocab.get(t, 1) for t in WORD.findall(self.texts[i].lower())]", TEXT),
    ('text = unicodedata.normalize("NFKC", raw)', TEXT),
    ('img = Image.open(path).convert("RGB")', IMAGE),
    ("rec = json.loads(line)", SERIALISE),
    ('with open(path, "rb") as f:', READ),
    ("x = np.frombuffer(buf, dtype=np.uint8)", "numeric"),
])  # fmt: skip
def test_a_c_call_is_read_from_the_line_that_makes_it(code, kind):
    leaf = Frame("Set.__getitem__", "data.py", 41, code)
    got, shown = kind_of((leaf, *frames(("torch/utils/data/_utils/fetch.py", "fetch"))))
    assert (got, shown) == (kind, leaf)


def test_a_line_that_calls_nothing_known_is_the_jobs_own_python():
    leaf = Frame("Set.__getitem__", "data.py", 41, "total += x * y")
    assert kind_of((leaf,)) == (OWN, leaf)
