"""Captures named by URI (s3://, s3a://, gs://, hdfs://, ...), read through pyarrow.fs.

Why: on a cluster the captures sit in an object store or HDFS, not on a disk every executor mounts;
the driver lists the URI and each task opens the same URI. pyarrow (already a dependency) speaks S3
and GCS natively and HDFS through libhdfs; credentials come from the usual places (AWS_* variables,
~/.aws, instance roles; GOOGLE_APPLICATION_CREDENTIALS; the Hadoop configuration).

Names keep the scheme the user wrote (`s3a://bucket/x.pcap` stays so in the `capture` column); only
the file system lookup maps Hadoop's aliases (s3a, s3n → s3). `file:` names are local paths.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from wirelog.inputs.errors import CaptureError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# `?` is also a glob character: only a tail of key=value options is the URI's query
_QUERY = re.compile(r"\?([A-Za-z_]+=[^/?&]*(?:&[A-Za-z_]+=[^/?&]*)*)\Z")
_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
READ_BUFFER = 1 << 20  # one request per MiB: object stores charge latency per request
# Google's client retries an unreachable store or a missing credential for 15 minutes by default: a
# command line gives up sooner (a `retry_limit_seconds` in the URI wins).
GCS_RETRY_SECONDS = 30


@dataclass(frozen=True, slots=True)
class RemoteFile:
    uri: str
    size: int


def is_uri(name: str) -> bool:
    """Whether `name` is a URI for pyarrow (any scheme but file)."""
    m = _URI.match(name)
    return m is not None and m.group(1).lower() != "file"


def local_path(name: str) -> str:
    """`file:///x` and `file:/x` as the local path `/x`; other names unchanged."""
    for prefix in ("file://", "file:"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def without_query(uri: str) -> str:
    """The URI without its `?key=value` options (for file names made from it)."""
    return _split_query(uri)[0]


def _split_query(uri: str) -> tuple[str, str]:
    """(URI without its options, `?options` or '')."""
    m = _QUERY.search(uri)
    return (uri[: m.start()], m.group(0)) if m else (uri, "")


def _pyarrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.fs, imported on first use: a run without URIs does not pay ~45 ms for them."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    return pa, pafs


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@dataclass(frozen=True, slots=True)
class _Location:
    """A URI split into what pyarrow needs (file system, path) and what rebuilds names (prefix, query)."""

    fs: pafs.FileSystem
    path: str
    prefix: str  # the URI up to the path: `s3a://` for s3a://bucket/key, `hdfs://nn:8020` for hdfs
    query: str  # `?...` options given with the URI, carried to every name listed under it

    def name(self, path: str) -> str:
        return f"{self.prefix}{path}{self.query}"


def _locate(uri: str) -> _Location:
    pa, pafs = _pyarrow()
    head, query = _split_query(uri)
    scheme, _, rest = head.partition("://")
    system = _ALIASES.get(scheme.lower(), scheme.lower())
    options = query
    if system == "gs" and "retry_limit_seconds=" not in query:
        options = f"{query}&" if query else "?"
        options += f"retry_limit_seconds={GCS_RETRY_SECONDS}"
    target = f"{system}://{rest}{options}"
    try:
        fs, path = pafs.FileSystem.from_uri(target)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CaptureError(f"{uri}: cannot reach its file system: {first_line(e)}") from e
    path = path.rstrip("/") or path
    stripped = head.rstrip("/")
    if path in ("", "/"):
        prefix = stripped
    elif stripped.endswith(path):
        prefix = stripped[: -len(path)]
    else:  # pyarrow normalised the path (e.g. percent-escapes): names fall back to scheme + path
        prefix = f"{scheme}://"
    return _Location(fs, path, prefix, query)


def _info(loc: _Location, uri: str, what: pafs.FileSelector | str) -> Any:
    pa, _ = _pyarrow()
    try:
        return loc.fs.get_file_info(what)
    except FileNotFoundError as e:
        raise CaptureError(f"{uri}: no such file or directory") from e
    except (pa.ArrowException, OSError) as e:
        raise CaptureError(f"{uri}: cannot list: {first_line(e)}") from e


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system of `uri` and the path in it (an output directory, for instance)."""
    loc = _locate(uri)
    return loc.fs, loc.path


def open_stream(uri: str) -> BinaryIO:
    """A forward-only binary stream of the object's bytes (no decompression: sources.py does that)."""
    pa, _ = _pyarrow()
    loc = _locate(uri)
    try:
        return loc.fs.open_input_stream(loc.path, compression=None, buffer_size=READ_BUFFER)
    except FileNotFoundError as e:
        raise CaptureError(f"{uri}: no such file") from e
    except (pa.ArrowException, OSError) as e:
        raise CaptureError(f"{uri}: cannot open: {first_line(e)}") from e


def _hidden(relative: str) -> bool:
    """Spark skips files and directories whose names start with `.` or `_` (e.g. `_SUCCESS`)."""
    return any(part.startswith((".", "_")) for part in relative.split("/"))


def _files_under(loc: _Location, uri: str, directory: str) -> list[RemoteFile]:
    _, pafs = _pyarrow()
    infos = _info(loc, uri, pafs.FileSelector(directory, recursive=True))
    base = directory.rstrip("/") + "/"
    return [
        RemoteFile(loc.name(i.path), i.size)
        for i in sorted(infos, key=lambda i: i.path)
        if i.type == pafs.FileType.File and not _hidden(i.path[len(base) :])
    ]


def _char_class(m: re.Match[str]) -> str:
    """A glob `[...]`/`[!...]` (as re.escape left it) as a regex class, ranges kept."""
    members = re.sub(r"\\(.)", r"\1", m[2]).replace("\\", "\\\\")
    if not m[1] and members.startswith("^"):
        members = "\\" + members
    return "[" + ("^/" if m[1] else "") + members + "]"  # like a path segment, a class never matches `/`


def _pattern(glob_path: str) -> re.Pattern[str]:
    """A glob over `/`-separated paths as a regex: `*`, `?`, `[...]` stay within a segment, `**`
    spans segments (as glob.glob(recursive=True): any number inside a pattern, at least one at its end,
    where zero would name the directory itself); names starting with a dot only where the pattern's
    segment starts with one."""
    out = []
    parts = glob_path.split("/")
    for i, part in enumerate(parts):
        sep = "/" if i else ""
        if part == "**" and i:
            out.append("(?:/(?!\\.)[^/]+)+" if i == len(parts) - 1 else "(?:/(?!\\.)[^/]+)*")
            continue
        piece = re.sub(r"\\\[(!?)(.+?)\\\]", _char_class, re.escape(part))  # classes first: `[*]` is a star
        piece = re.sub(r"\\\*", "[^/]*", piece).replace(r"\?", "[^/]")
        # like glob.glob: a name starting with a dot is matched only by a segment that starts with one
        out.append(sep + ("" if part.startswith(".") else "(?!\\.)") + piece)
    return re.compile("".join(out) + r"\Z")


def expand(uri: str, directories: bool) -> list[RemoteFile]:
    """The files `uri` names: one file, a glob, or (when `directories`) every file under a directory.

    Raises CaptureError when nothing is found or the store cannot be reached.
    """
    _, pafs = _pyarrow()
    head, query = _split_query(uri)
    if not glob.has_magic(head):
        loc = _locate(uri)
        info = _info(loc, uri, loc.path)
        if info.type == pafs.FileType.File:
            return [RemoteFile(uri, info.size)]
        if info.type == pafs.FileType.Directory:
            if not directories:
                raise CaptureError(f"{uri}: is a directory, not a capture file")
            files = _files_under(loc, uri, loc.path)
            if not files:
                raise CaptureError(f"{uri}: directory holds no capture files")
            return files
        raise CaptureError(f"{uri}: no such file or directory")
    scheme_end = head.index("://") + 3
    magic_at = min(head.find(c, scheme_end) for c in "*?[" if c in head[scheme_end:])
    slash = head.rfind("/", scheme_end, magic_at)
    if slash < 0:
        raise CaptureError(f"{uri}: put the pattern after the bucket or host, e.g. s3://bucket/*.pcap")
    loc = _locate(head[:slash] + query)
    matcher = _pattern(loc.path.rstrip("/") + head[slash:])
    found: list[RemoteFile] = []
    for i in sorted(_info(loc, uri, pafs.FileSelector(loc.path, recursive=True)), key=lambda i: i.path):
        if not matcher.match(i.path):
            continue
        if i.type == pafs.FileType.File:
            found.append(RemoteFile(loc.name(i.path), i.size))
        elif directories and i.type == pafs.FileType.Directory:
            found += _files_under(loc, uri, i.path)
    if not found:
        raise CaptureError(f"{uri}: no file matches this pattern")
    return list({f.uri: f for f in found}.values())
