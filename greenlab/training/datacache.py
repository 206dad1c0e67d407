"""The dataset cache: where torchvision's files live, whether they are intact, and fetching them.

One folder, ``greenlab.session.config.cache_dir()`` (``GREENLAB_CACHE_DIR``, else ``data/cache`` in the
checkout, else the user's ``$XDG_CACHE_HOME/greenlab`` or ``~/.cache/greenlab``), holds every dataset in torchvision's own layout, so all lessons (and torchvision
itself) share one copy. Files are checked against the MD5 checksums that torchvision publishes
with each dataset class. ``ensure``/``fetch`` download only what is missing or corrupt: each file
goes to a ``.part`` file, is checked, then renamed (an interrupted download leaves nothing
half-written), under a file lock so that processes sharing one cache do not clobber each other.

When ``greenlab.training.data.load`` may download (``policy()``):

- ``GREENLAB_DOWNLOAD=0``: never; ``GREENLAB_DOWNLOAD=1``: required (a failed download is an error);
- unset: never under CI (a ``CI`` variable: no network use at all); otherwise tried, in quick
  mode as in full mode (a self-paced learner gets the real data), with a fallback to the
  generated stand-in and one line saying why the download failed. A host that could not be
  reached is not tried again for ``DEAD_HOST_S`` seconds, so an offline lesson pays once.

The command line, ``greenlab data fetch | status | path``, is ``greenlab.cli.data``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import socket
import tarfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from greenlab.training.catalogue import TORCHVISION, canonical  # greenlab name -> torchvision class name
from greenlab.base.validation import ArgumentTypeError, flag
from greenlab.base.filelock import locked
from greenlab.session import config

NAMES = tuple(TORCHVISION)
TIMEOUT_S = 10.0  # connect (and per-read) timeout of one download attempt, seconds
DEAD_HOST_S = 300.0  # a host that could not be reached is skipped for this long, seconds
STATES = ("verified", "unverified", "missing", "corrupt")


class FetchError(RuntimeError):
    """A dataset could not be downloaded or verified; the message says which file and why."""


@dataclass(frozen=True)
class Status:
    """What the cache holds for one dataset.

    ``state``: "verified" (every file matches torchvision's checksum), "unverified" (the files
    are there but the archives their checksums cover are not, so they were not checked),
    "missing" or "corrupt". ``size_bytes``: bytes on disk for this dataset.
    """

    name: str
    folder: Path
    state: str
    detail: str
    size_bytes: int = 0

    @property
    def usable(self) -> bool:
        """True when torchvision can load the files (verified or unverified)."""
        return self.state in ("verified", "unverified")

    def line(self) -> str:
        size = f", {self.size_bytes / 1e6:.1f} MB" if self.size_bytes else ""
        return f"{self.name:<14} {self.state:<10} {self.folder}{size}: {self.detail}"


def policy(download=None) -> tuple[str, str]:
    """("never" | "try" | "require", why) for ``greenlab.training.data.load``.

    ``download``: True tries, False never; None reads ``GREENLAB_DOWNLOAD`` (1 requires, 0
    forbids) and, when that is unset, ``CI`` (never under CI, else try, in quick mode too).
    """
    if download is True:
        return "try", "download=True"
    if download is False:
        return "never", "download=False"
    if download is not None:
        raise ValueError(f"download must be True, False or None (the environment decides), got {download!r}")
    raw = os.environ.get("GREENLAB_DOWNLOAD")
    if raw is not None and raw.strip():
        value = raw.strip().lower()
        if value in ("1", "true", "yes", "on"):
            return "require", f"GREENLAB_DOWNLOAD={raw} requires downloads"
        if value in ("0", "false", "no", "off"):
            return "never", f"GREENLAB_DOWNLOAD={raw} forbids downloads"
        raise ValueError(f"GREENLAB_DOWNLOAD must be 1 (require downloads) or 0 (forbid them), or unset; "
                         f"got {raw!r}")
    ci = os.environ.get("CI")
    if ci is not None and ci.strip().lower() not in ("", "0", "false", "no", "off"):
        return "never", "CI is set, and CI never downloads (GREENLAB_DOWNLOAD=1 to override)"
    return "try", "downloads are on (GREENLAB_DOWNLOAD=0 forbids them)"


def status(name: str, root=None) -> Status:
    """Check the cached files of ``name`` against their checksums (no network, changes nothing)."""
    key, root = check_name(name), cache_root(root)
    return _check(key, root, repair=False)


def ensure(name: str, root=None, network: bool = True, timeout_s: float = TIMEOUT_S,
           progress: bool = True) -> Status:
    """Make ``name`` usable in ``root``: files extracted again from verified archives (no
    network), and, when ``network``, missing or corrupt files downloaded and checked. Returns
    the final ``Status`` (not usable when ``network`` is False and files are missing); raises
    ``FetchError`` when a download was tried and failed."""
    key, root = check_name(name), cache_root(root)
    check_timeout(timeout_s)
    network, progress = flag("network", network), flag("progress", progress)
    found = _check(key, root, repair=False)
    if found.usable:  # files staged without their archives are used as they are
        return found
    if not network and not found.size_bytes:  # nothing to repair: leave the disk untouched
        return found
    root.mkdir(parents=True, exist_ok=True)

    with locked(root / f".{key}", timeout_s=3600.0):  # another process may be fetching it now
        found = _check(key, root, repair=True)
        if found.usable or not network:
            return found
        _download_missing(key, root, timeout_s, progress)
        found = _check(key, root, repair=True)
    if not found.usable:
        raise FetchError(f"{key} in {found.folder} is still {found.state} after downloading: {found.detail}")
    return found


def fetch(name: str, root=None, timeout_s: float = TIMEOUT_S, progress: bool = True) -> Status:
    """Download ``name`` into ``root`` (default the cache) unless it is there and verified
    (every host is tried, even one that failed a moment ago)."""
    _dead_hosts.clear()
    return ensure(name, root, network=True, timeout_s=timeout_s, progress=progress)


def folder(name: str, root=None) -> Path:
    """The folder holding ``name``'s files, in torchvision's layout under ``root``."""
    key, root = check_name(name), cache_root(root)
    if key == "cifar10":
        return root / _tv_class(key).base_folder
    return root / TORCHVISION[key] / "raw"  # the MNIST-like layout, known without importing torchvision


def check_name(name) -> str:
    """The canonical name of dataset ``name`` (one of ``NAMES`` or an alias); ValueError otherwise."""
    key = canonical(name) if isinstance(name, str) else None
    if key not in TORCHVISION:
        raise ValueError(f"dataset name must be one of {', '.join(NAMES)}, got {name!r}")
    return key


def cache_root(root=None) -> Path:
    """The cache folder: ``root`` (a folder path) when given, else
    ``greenlab.session.config.cache_dir()``."""
    if root is not None:
        if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):  # "" was the working folder
            raise ArgumentTypeError(f"root must be a folder path (str or pathlib.Path) or None, "
                                    f"got {root!r} ({type(root).__name__})")
        return Path(root).expanduser()

    return config.cache_dir()


def check_timeout(timeout_s) -> None:
    """ValueError unless ``timeout_s`` is a number of seconds in (0, 600]."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 600:
        raise ValueError(f"timeout_s must be a number of seconds in (0, 600], got {timeout_s!r}")


# --- checking files ----------------------------------------------------------------------------

def _check(key: str, root: Path, repair: bool) -> Status:
    """Status of ``key`` under ``root``; with ``repair``, files that differ from a verified
    archive are extracted again (no network)."""
    where = folder(key, root)
    if key == "cifar10":
        return _check_cifar(key, _tv_class(key), root, where, repair)
    if not where.is_dir() or not any(where.iterdir()):  # nothing there: no need for torchvision's file list
        return _verdict(key, where, ["every file"], [], [], 0)
    return _check_mnist(key, _tv_class(key), where, repair)


def _check_mnist(key, cls, where: Path, repair: bool) -> Status:
    missing, corrupt, unverified, size = [], [], [], 0
    for filename, md5 in cls.resources:
        archive, target = where / filename, where / filename[: -len(".gz")]
        size += sum(p.stat().st_size for p in (archive, target) if p.is_file())
        if archive.is_file():
            if _md5(archive) != md5:
                corrupt.append(f"{archive.name} fails its MD5 checksum")
            elif not target.is_file() or _md5(target) != _gunzip_md5(archive):
                if repair:
                    _extract_gz(archive, target)
                else:
                    corrupt.append(f"{target.name} differs from its verified archive (re-extracted on the next load)")
        elif target.is_file():
            unverified.append(target.name)
        else:
            missing.append(filename)
    return _verdict(key, where, missing, corrupt, unverified, size)


def _check_cifar(key, cls, root: Path, where: Path, repair: bool) -> Status:
    archive = root / cls.filename
    entries = list(cls.train_list) + list(cls.test_list) + [[cls.meta["filename"], cls.meta["md5"]]]

    def scan():
        missing, corrupt = [], []
        for filename, md5 in entries:
            path = where / filename
            if not path.is_file():
                missing.append(filename)
            elif _md5(path) != md5:
                corrupt.append(f"{filename} fails its MD5 checksum")
        return missing, corrupt

    missing, corrupt = scan()
    if (missing or corrupt) and repair and archive.is_file() and _md5(archive) == cls.tgz_md5:
        _extract_tar(archive, root, cls.base_folder)
        missing, corrupt = scan()
    if archive.is_file() and _md5(archive) != cls.tgz_md5:
        corrupt.append(f"{archive.name} fails its MD5 checksum")
    size = sum(p.stat().st_size for p in where.glob("*") if p.is_file()) if where.is_dir() else 0
    size += archive.stat().st_size if archive.is_file() else 0
    return _verdict(key, where, missing, corrupt, [], size)


def _verdict(key, where, missing, corrupt, unverified, size) -> Status:
    if corrupt:
        return Status(key, where, "corrupt", "; ".join(corrupt), size)
    if missing:
        what = "not in the cache" if not size else f"{len(missing)} file(s) missing: {', '.join(missing)}"
        return Status(key, where, "missing", what, size)
    if unverified:
        return Status(key, where, "unverified", "files present but their archives are not, so their "
                      "checksums could not be checked", size)
    return Status(key, where, "verified", "every file matches torchvision's MD5 checksum", size)


# --- downloading -----------------------------------------------------------------------------

def _download_missing(key: str, root: Path, timeout_s: float, progress: bool) -> None:
    """Download the archives of ``key`` that are missing or fail their checksum, and extract them."""
    cls = _tv_class(key)
    dead_hosts = _DeadHosts()  # host -> why it failed, so one offline host fails once
    if key == "cifar10":
        archive = root / cls.filename
        if not (archive.is_file() and _md5(archive) == cls.tgz_md5):
            _download([cls.url], archive, cls.tgz_md5, timeout_s, progress, dead_hosts)
        _extract_tar(archive, root, cls.base_folder)
        return
    where = folder(key, root)
    where.mkdir(parents=True, exist_ok=True)
    for filename, md5 in cls.resources:
        archive = where / filename
        if not (archive.is_file() and _md5(archive) == md5):
            _download([m + filename for m in cls.mirrors], archive, md5, timeout_s, progress, dead_hosts)
        _extract_gz(archive, where / filename[: -len(".gz")])


def _download(urls, dest: Path, md5: str, timeout_s: float, progress: bool, dead_hosts: dict) -> None:
    errors = []
    for url in urls:
        host = urlparse(url).netloc or url
        if host in dead_hosts:
            errors.append(f"{url}: {dead_hosts[host]}")
            continue
        try:
            _resolve(url, timeout_s)
            _get(url, dest, md5, timeout_s, progress)
            return
        except FetchError as exc:  # the file arrived but is wrong: try the next mirror
            errors.append(f"{url}: {exc}")
        except (OSError, urllib.error.URLError) as exc:
            why = _reason(exc)
            dead_hosts[host] = why
            errors.append(f"{url}: {why}")
    raise FetchError(f"{dest.name} could not be downloaded ({'; '.join(errors)})")


def _resolve(url: str, timeout_s: float) -> None:
    """Look the host up within ``timeout_s`` (name lookups ignore socket timeouts, so this runs
    in a thread); raises OSError naming the host when it cannot be resolved in time."""
    parsed = urlparse(url)
    result: list = []

    def lookup():
        try:
            result.append(socket.getaddrinfo(parsed.hostname, parsed.port or 443, type=socket.SOCK_STREAM))
        except OSError as exc:
            result.append(exc)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not result:
        raise OSError(f"looking up {parsed.hostname} took longer than {timeout_s:g} s")
    if isinstance(result[0], OSError):
        raise OSError(f"cannot resolve {parsed.hostname} ({result[0]})")


def _get(url: str, dest: Path, md5: str, timeout_s: float, progress: bool) -> None:
    """Stream ``url`` into ``dest`` via ``dest.part``; renamed only when the MD5 matches."""
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.md5()
    done = False
    request = urllib.request.Request(url, headers={"User-Agent": "greenlab"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response, open(part, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            bar = _Progress(dest.name, total, enabled=progress)
            try:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
            finally:
                bar.close()
        if digest.hexdigest() != md5:
            raise FetchError(f"checksum mismatch: MD5 {digest.hexdigest()}, expected {md5}")
        os.replace(part, dest)
        done = True
    finally:
        if not done:
            part.unlink(missing_ok=True)


class _Progress:
    """A download progress bar: tqdm when installed, else a printed line every 10%."""

    def __init__(self, label: str, total: int, enabled: bool = True):
        self.label, self.total, self.count, self.shown, self.bar = label, total, 0, -1, None
        self.enabled = enabled
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total or None, unit="B", unit_scale=True, desc=label)
        except Exception:  # noqa: BLE001 - tqdm is optional; fall back to print
            self.bar = None

    def update(self, n: int) -> None:
        self.count += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        if self.total:
            tenth = int(10 * self.count / self.total)
            if tenth > self.shown:
                self.shown = tenth
                print(f"  {self.label}: {self.count / 1e6:.1f} of {self.total / 1e6:.1f} MB", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "reason", None)
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if inner is not None:
        return f"{type(inner).__name__}: {inner}" if not isinstance(inner, str) else inner
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out ({exc})"
    return str(exc) or type(exc).__name__


# --- extracting ---------------------------------------------------------------------------------

def _extract_gz(archive: Path, target: Path) -> None:
    part = target.with_name(target.name + ".part")
    try:
        with gzip.open(archive, "rb") as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _extract_tar(archive: Path, root: Path, base_folder: str) -> None:
    """Extract into a temporary folder, then swap it in for ``root/base_folder``."""
    tmp = root / f".{base_folder}.part-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:  # Python without extraction filters: refuse paths that leave the folder
                for member in tar.getmembers():
                    if member.name.startswith(("/", "..")) or "/../" in member.name:
                        raise FetchError(f"{archive.name} holds an unsafe path {member.name!r}")
                tar.extractall(tmp)
        shutil.rmtree(root / base_folder, ignore_errors=True)
        os.replace(tmp / base_folder, root / base_folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- helpers ---------------------------------------------------------------------------------

def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _gunzip_md5(path: Path) -> str:
    digest = hashlib.md5()
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except (OSError, EOFError):
        return ""
    return digest.hexdigest()


def _tv_class(key: str):
    import torchvision.datasets as tvd

    return getattr(tvd, TORCHVISION[key])


_dead_hosts: dict = {}  # host -> (time.monotonic() when it failed, why), shared by this process


class _DeadHosts:
    """Hosts that could not be reached lately (``DEAD_HOST_S``), as a dict ``host -> why``:
    remembered across calls, so a lesson offline waits for one failed lookup, not one a load."""

    def __contains__(self, host) -> bool:
        found = _dead_hosts.get(host)
        if found is None:
            return False
        if time.monotonic() - found[0] > DEAD_HOST_S:
            del _dead_hosts[host]
            return False
        return True

    def __getitem__(self, host) -> str:
        return _dead_hosts[host][1]

    def __setitem__(self, host, why) -> None:
        _dead_hosts[host] = (time.monotonic(), f"{why} (not tried again for {DEAD_HOST_S:g} s)")
