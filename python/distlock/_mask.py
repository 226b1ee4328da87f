"""The one place where the Python package hides passwords.

Whatever the package shows of a server URI goes through here: the text of
every distlock exception (``str(e)``, ``e.args``, ``e.detail``; the library's
detail quotes a bad URI as written), ``repr(client)`` and ``client.nodes``.
Two layers:

1. Patterns. In any ``scheme://...`` of a text, the password of the userinfo
   (``user:PASSWORD@``, up to the URI's last ``@``, so a raw ``@`` or ``/``
   in a password is still covered) and the value of every query parameter
   whose name contains "pass" (``password=``, ``sentinel_password=``) become
   ``***``, for any scheme: redis, rediss, unix, redis-sentinel,
   redis-cluster...
2. Known secrets. Where the configuration is at hand (``Client()``), its
   passwords (the ``password`` keyword, and those of the server list as
   written, %-decoded and in the comma pieces a malformed list is cut into)
   are replaced wherever they still appear.
"""
import re
from typing import Iterable, List, Optional, Tuple
from urllib.parse import unquote

__all__ = ["mask_text", "mask_servers", "secrets_of", "MASK"]

MASK = "***"

_URI = re.compile(r"[A-Za-z0-9+.\-]*://")
_NEXT_URI = re.compile(r",[A-Za-z0-9+.\-]*://")
_TEXT_END = re.compile(r"[\s'\"`<>]")


def _bodies(s: str, free_text: bool) -> Iterable[Tuple[int, int]]:
    """(start, end) of the part after "scheme://" of every URI in s."""
    pos = 0
    while True:
        m = _URI.search(s, pos)
        if m is None:
            return
        b = m.end()
        n = _NEXT_URI.search(s, b)
        e = n.start() if n else len(s)
        if free_text:
            t = _TEXT_END.search(s, b, e)
            if t is not None:
                e = t.start()
        yield b, e
        pos = e if e > b else b


def _mask_body(body: str, found: Optional[List[str]]) -> str:
    """One URI's part after "scheme://", its secrets masked (and appended to
    ``found``)."""
    out: List[str] = []
    pos, n = 0, len(body)
    at = body.rfind("@")
    if at >= 0:
        colon = body.find(":", 0, at)
        if 0 <= colon < at - 1:
            if found is not None:
                found.append(body[colon + 1:at])
            out.append(body[:colon + 1] + MASK)
            pos = at
    # Query parameters: a '?' or '&' anywhere after the userinfo.
    while pos < n:
        k = pos
        while k < n and body[k] not in "?&":
            k += 1
        out.append(body[pos:k + 1])
        if k >= n:
            break
        name = eq = k + 1
        while eq < n and body[eq] not in "=&#":
            eq += 1
        if eq < n and body[eq] == "=" and "pass" in body[name:eq].lower():
            v = ve = eq + 1
            while ve < n and body[ve] not in "&#":
                ve += 1
            out.append(body[name:v] + MASK)
            if found is not None and ve > v:
                found.append(body[v:ve])
            pos = ve
        else:
            pos = k + 1
    return "".join(out)


def _walk(s: str, free_text: bool, found: Optional[List[str]] = None) -> str:
    parts = []
    copied = 0
    for b, e in _bodies(s, free_text):
        parts.append(s[copied:b])
        parts.append(_mask_body(s[b:e], found))
        copied = e
    parts.append(s[copied:])
    return "".join(parts)


def secrets_of(servers: Optional[str], *passwords: Optional[str]) -> Tuple[str, ...]:
    """The given passwords (as given), and every password of a server list
    (as written, %-decoded, and the comma pieces a malformed list is cut
    into); longest first."""
    found: List[str] = []
    if servers:
        _walk(servers, free_text=False, found=found)
    out = set(p for p in passwords if p)
    for p in found:
        out.add(p)
        out.add(unquote(p, errors="surrogateescape"))
        if "," in p:
            out.update(p.split(","))
    return tuple(sorted((p for p in out if p), key=len, reverse=True))


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for sec in secrets:
        if sec:
            text = text.replace(sec, MASK)
    return text


def mask_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` (an error message...) with the password of every URI in it,
    and every string of ``secrets``, replaced by ``***``. In free text a URI
    ends at white space and quotes too."""
    return _scrub(_walk(text, True), secrets)


def mask_servers(servers: str, secrets: Iterable[str] = ()) -> str:
    """The same for a server list (a URI ends only where ",scheme://" starts)."""
    return _scrub(_walk(servers, False), secrets)
