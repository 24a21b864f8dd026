"""Reading a log's text: its encoding sniffed (byte-order marks, UTF-16 without one), undecodable bytes replaced,
and texts standing in for files while one part of a file is read (one run of several, a notebook's outputs)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from rlbatch.errors import UserError


BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
        (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def sniff_encoding(head: bytes) -> str:
    """The text encoding of a file from its first bytes: a byte-order mark (UTF-8, UTF-16, UTF-32), or UTF-16
    without one (every other byte NUL in ASCII text); else UTF-8. Latin-1 and other 8-bit text reads as UTF-8 with
    the undecodable bytes replaced (U+FFFD): numbers and names in logs are ASCII, so nothing readable is lost."""
    for bom, enc in BOMS:
        if head.startswith(bom):
            return enc
    sample = head[:1024]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
            return "utf-16-le"
        if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
            return "utf-16-be"
    return "utf-8"


#: texts standing in for files while a part of a file is read (one run of several, a notebook's outputs):
#: str(path) -> text; set only through :func:`virtual_text`
_VIRTUAL: dict[str, str] = {}


@contextlib.contextmanager
def virtual_text(path: str | Path, text: str):
    """While inside, :func:`read_text` and :func:`open_text` of ``path`` give ``text`` instead of the file's
    contents, so a format reader reads one run of a file that holds several, or the text unpacked from a container
    (a notebook's outputs), with messages still naming the file."""
    key = str(Path(path))
    prev = _VIRTUAL.get(key)
    _VIRTUAL[key] = text
    try:
        yield
    finally:
        if prev is None:
            _VIRTUAL.pop(key, None)
        else:
            _VIRTUAL[key] = prev


def virtual(path: str | Path) -> str | None:
    """The text standing in for ``path`` (:func:`virtual_text`), or None."""
    return _VIRTUAL.get(str(Path(path))) if _VIRTUAL else None


def open_text(path: str | Path):
    """Open a log for reading as text in its sniffed encoding (:func:`sniff_encoding`), undecodable bytes
    replaced, line ends kept as written. Raises :class:`UserError` naming the file when it cannot be opened."""
    v = virtual(path)
    if v is not None:
        return io.StringIO(v, newline="")
    try:
        with open(path, "rb") as fh:
            enc = sniff_encoding(fh.read(4096))
        return open(path, "r", encoding=enc, errors="replace", newline="")
    except OSError as err:
        raise UserError(f"cannot read ({err.strerror})", path=str(path)) from None


def read_text(path: str | Path) -> str:
    """The text of a log, decoded as :func:`open_text` does; NUL characters dropped. Raises :class:`UserError`
    naming the file when it cannot be read."""
    with open_text(path) as fh:
        try:
            text = fh.read()
        except OSError as err:
            raise UserError(f"cannot read ({err.strerror})", path=str(path)) from None
    return text.replace("\x00", "") if "\x00" in text else text
