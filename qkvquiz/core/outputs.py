"""Writing output sets: what ``generate`` and ``grade`` write lands as one unit, or not at all.

A command's *set* is the top-level entries of its output folder that it owns (``generate``:
``key.json``, ``key.md``, ``key.pdf``, ``class.pdf``, ``keys/``, ``students/``; ``grade``:
``results.*``, ``item-analysis.*``, ``feedback/``). Anything else in the folder (a user's
``submissions/``) is never touched. A run:

1. **locks** the folder (``flock`` on the folder itself, so no lock file is left behind and the
   kernel releases it when the process dies, even by SIGKILL); a second run into the same
   folder is refused with :class:`SetBusy`. A command that works long before it writes takes
   the lock at its start with :func:`claim`, and its set uses that lock;
2. **recovers** a switch that a killed run left half-done (see below), and removes leftover
   staging folders;
3. **stages** the whole new set in a hidden child ``.qkvquiz-staging-*`` (mode 0700, so that
   nothing in it is readable by others while it is written), with no fsync per file;
4. makes it **durable once** (``syncfs`` of the file system on Linux, else one fsync per file),
   fixes the modes of private entries (0600 files, 0700 folders), and
5. **switches** it into place: a small journal (written atomically, fsynced) names the staging
   folder; every old owned entry is renamed into ``.qkvquiz-old-*``, then every new one in from
   the staging folder, the *anchor* (``key.json``, ``results.json``) out first and in last;
   the journal is removed (the commit point is the journal: once it exists, the switch only
   ever goes forward), then the old set is deleted.

The journal is obeyed only when this user's qkvquiz wrote it for this folder and this staging
folder: it carries a seal (:mod:`qkvquiz.core.seals`) over its fields, the folder's path and a random
identity written into the staging folder when it was made (0600 inside 0700: a staging folder
planted under the same name lacks it, even where a journal was copied). A journal planted in a
shared or unpacked course folder, or copied from another one, is ignored with a warning: nothing
it names is moved or deleted.

Renaming several entries cannot be one atomic step, so the journal makes it one logically:
a run killed (even by SIGKILL) at any point leaves either no journal, and the old set
complete beside a hidden staging folder that the next run deletes, or a journal, and the
next run (or :func:`settle`, called before a key is read) finishes the switch from it. The
switch itself is a few renames with SIGINT/SIGTERM/SIGHUP held back, so only SIGKILL or a
power cut can land inside it. Readers of the anchor see either the old file, the new one,
or (for the microseconds of a switch) none, never a mix.

Why a journal and not symlinks (``key.json -> .set/current/key.json``, one atomic symlink
swap): the folder must stay plain files that users copy, zip and upload, and submissions
or keys behind symlinks would be refused by the untrusted-input reader.

Why one module of about 700 lines: the lock, the staging folder, the journal and its
recovery are one protocol whose guarantees hold only together (what a killed run leaves is
what the next run's recovery reads); they are read side by side here, with the seals apart
(:mod:`qkvquiz.core.seals`).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .seals import is_sealed, seal

try:  # POSIX; elsewhere runs into one folder are not serialised
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

STAGING_PREFIX = ".qkvquiz-staging-"
OLD_PREFIX = ".qkvquiz-old-"
JOURNAL = ".qkvquiz-switch.json"
_JOURNAL_TMP = JOURNAL + ".tmp"
_JOURNAL_SEAL = "switch journal"
#: In every staging folder, from the moment it is made: its random identity, which the journal's seal covers.
STAGE_ID = ".qkvquiz-stage-id"
_log = logging.getLogger(__name__)
#: How long :func:`settle` waits for a run that is switching a set (a few renames) to finish.
SETTLE_TIMEOUT_S = 30.0


class OutputError(OSError):
    """An output could not be written; the message names the path (the final one, never a staging path)."""


class SetBusy(OutputError):
    """Another run is writing into the same folder."""


def _cannot(path: Path | str, exc: OSError) -> str:
    return f"cannot write {path}: {exc.strerror or exc}"


# --------------------------------------------------------------------------- signals


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for the duration; deliver the first one afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be changed from the main thread
        return
    caught: list[int] = []
    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) is None:  # absent, or installed outside Python
            continue
        previous[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


# --------------------------------------------------------------------------- one file


_PIECES_BATCH = 1 << 20  # characters of a document written at a time (write_pieces)

# Names that are not a file's own name in a path ("a/." is "a", "a/.." leaves it).
_NOT_NAMES = frozenset({"", ".", ".."})


def _encoded_batches(pieces: Iterable[str]) -> Iterator[bytes]:
    """``pieces`` joined into batches of about :data:`_PIECES_BATCH` characters, as UTF-8."""
    batch: list[str] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= _PIECES_BATCH:
            yield "".join(batch).encode("utf-8")
            batch, size = [], 0
    yield "".join(batch).encode("utf-8")


def _plain(name: str) -> bool:
    """Whether ``name`` is one plain name of a path (no separator that some system reads)."""
    return name not in _NOT_NAMES and "\\" not in name


def _create(path: str | Path, mode: int, chunks: Iterable[bytes], shown: str | Path) -> None:
    """``chunks`` written to a new (or emptied) file at ``path`` with ``mode`` (before the umask);
    an error is an OutputError naming ``shown``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), mode)
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
    except OSError as exc:
        raise OutputError(_cannot(shown, exc)) from exc


def _file_mode(private: bool) -> int:
    """0600 for what only the instructor may read; else 0666, which open() narrows by the umask."""
    return 0o600 if private else 0o666


def write_file(path: str | Path, data: str | bytes, *, private: bool = False) -> None:
    """A set of one file (``audit --out``): a temporary file beside ``path``, fsynced, renamed.

    Readers never see half a file; an interruption (an error, Ctrl-C, a SIGTERM that the CLI
    turns into an exit) removes the temporary file and leaves ``path`` as it was. ``private``
    files are readable by their owner only. Errors are :class:`OutputError` naming ``path``.
    """
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        # mkstemp makes 0600 files; a public file gets what a plain open() would give.
        if not private and hasattr(os, "fchmod"):
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            # Without fsync a crash soon after the rename can leave an empty file under the new name.
            os.fsync(fh.fileno())
        with signals_held():
            os.replace(tmp, path)
            tmp = None
    except OSError as exc:
        raise OutputError(_cannot(path, exc)) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


# --------------------------------------------------------------------------- durability


def _syncfs(fd: int) -> bool:
    """Flush the whole file system holding ``fd`` in one call (Linux); False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return False
    if syncfs(fd) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return True


def _fsync_tree(root: Path) -> None:
    """One fsync per file and folder below ``root``: the portable, slower way to make it durable."""
    flags = os.O_RDONLY if os.name == "posix" else os.O_RDWR  # Windows fsyncs only writable handles
    for folder, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(folder, name), flags)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return  # folders cannot be opened for fsync elsewhere
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- lock and recovery


def _lock(out: Path, *, wait: float = 0.0) -> int | None:
    """An open fd of ``out`` holding an exclusive flock (None without fcntl); SetBusy if held."""
    if fcntl is None:  # pragma: no cover
        return None
    fd = os.open(out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise SetBusy(f"another qkvquiz run is writing to {out}; wait until it has finished, "
                              "or choose another folder") from None
            time.sleep(0.05)
        except OSError:
            os.close(fd)
            raise


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name \
        and "\0" not in name


def _journal_parts(out: Path, journal: Mapping[str, object]) -> tuple[bytes, ...] | None:
    """What a journal's seal covers: its fields, the folder, and the staging folder's identity
    (None where the staging folder it names has none: no switch of ours to finish)."""
    fields = {name: journal.get(name) for name in ("stage", "old", "owned", "entries")}
    try:
        fd = os.open(out / str(fields["stage"]) / STAGE_ID, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            identity = fh.read(64)
    except OSError:
        return None
    return (json.dumps(fields, sort_keys=True).encode("utf-8"), os.fsencode(os.path.realpath(out)), identity)


def _sealed(out: Path, journal: dict) -> dict:
    """``journal`` with its seal (unsealed where this user has no state key: it will be ignored)."""
    parts = _journal_parts(out, journal)
    mark = None if parts is None else seal(_JOURNAL_SEAL, *parts)
    return journal if mark is None else {**journal, "seal": mark}


def _read_journal(out: Path) -> dict | None:
    """The switch journal in ``out`` when there is one that this user's qkvquiz wrote there;
    None when there is none. Any other (unreadable, malformed, unsealed, sealed for another folder
    or staging folder) is ignored with a warning, and left where it is."""
    path = out / JOURNAL
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return _ignored(path, f"unreadable: {exc}")
    # Only plain names inside the folder are followed, whatever the seal says.
    ok = (isinstance(doc, dict) and isinstance(doc.get("stage"), str) and doc["stage"].startswith(STAGING_PREFIX)
          and isinstance(doc.get("old"), str) and doc["old"].startswith(OLD_PREFIX)
          and all(_plain_name(n) for n in (doc["stage"], doc["old"]))
          and isinstance(doc.get("owned"), list) and isinstance(doc.get("entries"), list)
          and all(_plain_name(n) for n in doc["owned"]) and set(doc["entries"]) <= set(doc["owned"]))
    if not ok:
        return _ignored(path, "not a qkvquiz switch journal")
    parts = _journal_parts(out, doc)
    if parts is None or not is_sealed(doc.get("seal"), _JOURNAL_SEAL, *parts):
        return _ignored(path, "not written by this user's qkvquiz for this folder")
    return doc


def _ignored(path: Path, why: str) -> None:
    _log.warning("%s: ignored (%s); nothing it names was moved or deleted. If a qkvquiz run was "
                 "killed while writing here on another account or machine, run it again there, or "
                 "remove this file.", path, why)
    return None


def _roll_forward(out: Path, journal: dict) -> None:
    """Finish the switch a journal describes. Idempotent: a kill inside it is finished by the next call.

    The staging folder was complete and durable before the journal was written, so the
    switch only goes forward. An entry still in the staging folder has not been moved in
    yet, so what stands under its name in ``out`` is old; an owned entry that the new set
    lacks is old wherever it stands.
    """
    stage, old = out / journal["stage"], out / journal["old"]
    owned: list[str] = journal["owned"]  # anchor first
    entries: list[str] = journal["entries"]  # anchor last
    old.mkdir(mode=0o700, exist_ok=True)
    for name in owned:  # 1. every old entry out, the anchor first
        current = out / name
        if os.path.lexists(current) and (name not in entries or os.path.lexists(stage / name)):
            os.replace(current, old / name)
    for name in entries:  # 2. every new entry in, the anchor last
        if os.path.lexists(stage / name):
            os.replace(stage / name, out / name)
    _fsync_dir(out)
    (out / JOURNAL).unlink()
    _fsync_dir(out)
    _remove_leftovers(out)


def _remove_leftovers(out: Path) -> None:
    """Staging and old folders of runs that ended (the lock is held: no live run owns them)."""
    for entry in os.scandir(out):
        if entry.name.startswith((STAGING_PREFIX, OLD_PREFIX)) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif entry.name == _JOURNAL_TMP:
            os.unlink(entry.path)


def _recover_locked(out: Path) -> None:
    journal = _read_journal(out)
    try:
        if journal is not None:
            _roll_forward(out, journal)
        elif not os.path.lexists(out / JOURNAL):
            _remove_leftovers(out)
        # else: a journal we did not write; its staging and old folders may be another account's
        # half-done switch, so they are left as they are.
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(f"cannot finish the interrupted writing of {out}: {exc.strerror or exc}") from exc


# Folders this process holds by :func:`claim` (their real paths -> the locked fd): a write_set or a
# recovery into one of them uses that lock instead of taking (and waiting for) a second one.
_claimed: dict[str, int | None] = {}


@contextmanager
def claim(out: str | Path) -> Iterator[None]:
    """Hold the folder ``out`` (made if missing) for the whole of a run, before its work starts.

    A command that works long before it writes (``grade`` grades a class, then writes its set)
    takes the lock first, so that of two runs into one folder the later one is refused at
    once, not the earlier one after all its work; a half-done switch is finished here too.
    :func:`write_set` inside the block uses this lock. Raises :class:`SetBusy` when another run
    holds the folder, :class:`OutputError` when it cannot be made.
    """
    out = Path(out)
    made = [p for p in (out, *out.parents) if not os.path.lexists(p)]  # the folders this claim makes
    try:
        out.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(out)
        lock_fd = None if key in _claimed else _lock(out)  # held already by this process: nothing to take
    except SetBusy:
        raise
    except OSError as exc:
        raise OutputError(_cannot(out, exc)) from exc
    if key in _claimed:
        yield
        return
    _claimed[key] = lock_fd
    try:
        _recover_locked(out)
        yield
    finally:
        del _claimed[key]
        # A run that wrote nothing (bad input, say) leaves no folder behind; removed while the
        # lock is still held, so that no other run can take the empty folder in between.
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                break  # not empty: the run wrote its set there
        if lock_fd is not None:
            os.close(lock_fd)


@contextmanager
def _locked(out: Path, *, wait: float = 0.0) -> Iterator[int | None]:
    """The lock of ``out``: this process's own where it claimed the folder, else taken here."""
    key = os.path.realpath(out)
    if key in _claimed:
        yield _claimed[key]
        return
    fd = _lock(out, wait=wait)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def recover(folder: str | Path, *, wait: float = 0.0) -> None:
    """Bring ``folder`` to one complete set: finish a switch a killed run left half-done, and
    remove staging folders of runs that ended. Every :func:`write_set` does this first.

    Raises :class:`SetBusy` when a run still holds the folder after ``wait`` seconds.
    """
    folder = Path(folder)
    with _locked(folder, wait=wait):
        _recover_locked(folder)


def settle(folder: str | Path) -> None:
    """Finish a switch a killed run left half-done in ``folder``, so that a reader sees one set.

    Cheap when there is nothing to do (one stat). Where a journal is found, waits (up to
    :data:`SETTLE_TIMEOUT_S`) for the run holding the folder, then completes the switch. A
    folder the caller may not write is left alone: the read then fails or succeeds on its own.
    """
    folder = Path(folder)
    if not (folder / JOURNAL).exists():
        return
    try:
        recover(folder, wait=SETTLE_TIMEOUT_S)
    except OSError:
        pass  # busy too long, or a folder we may not write: the reader fails or succeeds on its own


# --------------------------------------------------------------------------- a set


class OutputSet:
    """A set being staged; made by :func:`write_set`, which switches it into place at the end."""

    def __init__(self, out: Path, owned: Mapping[str, bool], anchor: str) -> None:
        self.out = out
        self._owned = dict(owned)
        self._anchor = anchor
        self._made: set[Path] = set()
        # Folders of the set already checked and made (relative, as given) -> their top-level entry:
        # a class writes thousands of files into a few hundred folders, and parsing every path
        # again (pathlib) cost more than creating the file.
        self._folders: dict[str, str] = {}
        self._outside: set[str] = set()  # private entries that other writers wrote into (see path)
        self.stage = self._new_stage(out)
        self._stage_text = str(self.stage)

    @staticmethod
    def _new_stage(out: Path) -> Path:
        """A new staging folder (mode 0700) holding its random identity; made whole or not at all:
        a signal that comes meanwhile is held back until the folder is complete, or removed with it."""
        stage: Path | None = None
        try:
            with signals_held():
                stage = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out))
                _create(stage / STAGE_ID, _file_mode(True), [secrets.token_hex(16).encode("ascii")], stage / STAGE_ID)
        except BaseException as exc:
            if stage is not None:
                shutil.rmtree(stage, ignore_errors=True)
            if isinstance(exc, OSError) and not isinstance(exc, OutputError):
                raise OutputError(_cannot(out, exc)) from exc
            raise
        return stage

    # ---- paths

    def _top(self, rel: str) -> str:
        top = Path(rel).parts[0] if Path(rel).parts else ""
        if top not in self._owned or ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ValueError(f"{rel}: not an entry of this output set ({', '.join(self._owned)})")
        return top

    def private(self, rel: str) -> bool:
        """Whether ``rel`` holds answers (a private top-level entry, or anything below one)."""
        return self._owned[self._top(rel)]

    def final(self, rel: str) -> Path:
        """Where ``rel`` will be once the set is in place."""
        self._top(rel)
        return self.out / rel

    def path(self, rel: str, *, own_modes: bool = False) -> Path:
        """The staging path of ``rel``, its folders made: for writers that write files themselves
        (the PDF pool). Their modes are fixed when the set is committed, unless ``own_modes``:
        the writer creates its files as :meth:`write` does (0600 in a private entry)."""
        top = self._top(rel)
        if not own_modes:
            self._outside.add(top)
        return self._staged(rel)

    def _staged(self, rel: str) -> Path:
        target = self.stage / rel
        self._makedirs(target.parent)
        return target

    def shown(self, text: str) -> str:
        """``text`` (an error message) with staging paths replaced by final ones."""
        return text.replace(str(self.stage), str(self.out))

    def _makedirs(self, folder: Path) -> None:
        # Folders are made once per set; a private top-level folder (keys/, feedback/) is 0700.
        if folder in self._made or folder == self.stage:
            return
        self._makedirs(folder.parent)
        rel = folder.relative_to(self.stage).as_posix()
        try:
            folder.mkdir(mode=0o700 if self.private(rel) else 0o777, exist_ok=True)
        except OSError as exc:
            raise OutputError(_cannot(self.out / rel, exc)) from exc
        self._made.add(folder)

    def _checked_folder(self, folder: str) -> str | None:
        """The top-level entry of ``folder`` (relative, as :meth:`write` was given it), the folder
        made if new, where it or a parent was checked before; None where its path needs checking."""
        top = self._folders.get(folder)
        if top is None:
            parent, _, name = folder.rpartition("/")
            top = self._checked_folder(parent) if parent and _plain(name) else None
            if top is None:
                return None
            path = os.path.join(self._stage_text, folder)
            try:
                os.mkdir(path, 0o700 if self._owned[top] else 0o777)
            except FileExistsError as exc:
                if not os.path.isdir(path):  # a file in the way (an existing folder is fine, as exist_ok)
                    raise OutputError(_cannot(self.out / folder, exc)) from exc
            except OSError as exc:
                raise OutputError(_cannot(self.out / folder, exc)) from exc
            self._folders[folder] = top
        return top

    # ---- writing

    def write(self, rel: str, data: str | bytes) -> Path:
        """Stage one file of the set; returns where it will be. No fsync here: the set is made
        durable once, at the end."""
        return self._write(rel, [data.encode("utf-8") if isinstance(data, str) else data])

    def write_pieces(self, rel: str, pieces: Iterable[str]) -> Path:
        """Stage one file of the set from pieces of text, written as they come (a long document
        is never held whole); returns where it will be. An error from ``pieces`` is raised as it
        is, leaving the file short: the set is then discarded, as with any error in it."""
        return self._write(rel, _encoded_batches(pieces))

    def _write(self, rel: str, chunks: Iterable[bytes]) -> Path:
        target, top = self._target(rel)
        _create(target, _file_mode(self._owned[top]), chunks, self.out / rel)
        return self.out / rel

    def _target(self, rel: str) -> tuple[str | Path, str]:
        """Where ``rel`` is staged (its folders made), and its top-level entry; ValueError when
        ``rel`` is not in the set."""
        folder, _, name = rel.rpartition("/") if type(rel) is str else ("", "", "")  # noqa: E721
        plain = bool(folder) and _plain(name)
        top = self._checked_folder(folder) if plain else None
        if top is not None:
            # A plain name in a folder already checked and made: the checks below, passed.
            return os.path.join(self._stage_text, rel), top
        top = self._top(rel)
        target = self._staged(rel)
        while plain and folder and folder not in self._folders:  # it and its parents, checked and made
            self._folders[folder] = top
            folder = folder.rpartition("/")[0]
        return target, top

    # ---- the end

    def _fix_modes(self) -> None:
        """Private entries that other writers wrote into (PDF workers use the umask): files 0600,
        folders 0700. What :meth:`write` made is so already (and a class's feedback files, whose
        writers make them so, are not walked one by one again)."""
        for name, private in self._owned.items():
            top = self.stage / name
            if not private or name not in self._outside or not os.path.lexists(top):
                continue
            if top.is_dir() and not top.is_symlink():
                for folder, dirs, files in os.walk(top):
                    os.chmod(folder, 0o700)
                    for f in files:
                        os.chmod(os.path.join(folder, f), 0o600)
            else:
                os.chmod(top, 0o600)

    def _commit(self, lock_fd: int | None) -> None:
        entries = [n for n in self._owned if os.path.lexists(self.stage / n)]
        try:
            self._fix_modes()
            # One durability point for the whole set, instead of an fsync per file.
            if lock_fd is None or not _syncfs(lock_fd):
                _fsync_tree(self.stage)
        except OSError as exc:
            raise OutputError(_cannot(self.out, exc)) from exc
        anchor_last = [n for n in entries if n != self._anchor] + [n for n in entries if n == self._anchor]
        owned = [self._anchor] + [n for n in self._owned if n != self._anchor]
        journal = _sealed(self.out, {"stage": self.stage.name,
                                     "old": OLD_PREFIX + self.stage.name[len(STAGING_PREFIX):],
                                     "owned": owned, "entries": anchor_last})
        with signals_held():
            started = False
            try:
                # The journal appears whole (renamed into place) and durable before anything moves.
                tmp = self.out / _JOURNAL_TMP
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(json.dumps(journal))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.out / JOURNAL)
                _fsync_dir(self.out)
                started = True
                _roll_forward(self.out, journal)
            except BaseException as exc:
                if not started:  # nothing has moved: drop the journal, the old set stays
                    (self.out / _JOURNAL_TMP).unlink(missing_ok=True)
                    (self.out / JOURNAL).unlink(missing_ok=True)
                    if isinstance(exc, OSError):
                        raise OutputError(_cannot(self.out, exc)) from exc
                elif isinstance(exc, OSError):  # the journal stays: the next run finishes the switch
                    raise OutputError(f"writing {self.out} stopped midway ({exc.strerror or exc}); the next "
                                      "qkvquiz run into this folder (or reading its key) finishes it") from exc
                raise

    def _discard(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)


@contextmanager
def write_set(out: str | Path, owned: Mapping[str, bool], *, anchor: str) -> Iterator[OutputSet]:
    """Stage a set of files for ``out``; switch it into place when the block ends without error.

    ``owned`` maps each top-level entry of the set to whether it is private (0600 files, 0700
    folders, for anything that holds answers or expected values). Every owned entry that the
    new set lacks is removed at the switch: the folder then holds exactly the new set. An
    error, Ctrl-C or SIGTERM inside the block discards the staging folder and leaves the
    previous set exactly as it was. Raises :class:`SetBusy` when another run holds ``out``
    and :class:`OutputError` (naming the path) when it cannot be written.
    """
    out = Path(out)
    if anchor not in owned:
        raise ValueError(f"the anchor {anchor!r} is not an owned entry")
    with ExitStack() as stack:
        try:
            out.mkdir(parents=True, exist_ok=True)
            lock_fd = stack.enter_context(_locked(out))  # this run's own, where it claimed the folder
        except SetBusy:
            raise
        except OSError as exc:
            raise OutputError(_cannot(out, exc)) from exc
        _recover_locked(out)
        files = OutputSet(out, owned, anchor)
        try:
            yield files
        except BaseException:
            with signals_held():
                files._discard()
            raise
        try:
            files._commit(lock_fd)
        finally:
            # Empty after a switch, the whole new set after a failure before it. A switch that
            # stopped midway keeps its journal and staging folder: the next run finishes it.
            if not os.path.lexists(out / JOURNAL):
                with signals_held():
                    files._discard()


def append_line(path: str | Path, line: str) -> None:
    """Add one line to the end of a private log (made 0600 if new) and make it durable before
    returning: for a journal that is appended to, never rewritten (a review's decisions). A
    link in its place is not followed (OSError)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o600)
    try:
        data = (line.rstrip("\n") + "\n").encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def owned_present(out: str | Path, owned: Sequence[str] | Mapping[str, bool]) -> list[str]:
    """The owned entries that ``out`` holds now (to refuse replacing them without --force)."""
    out = Path(out)
    return [name for name in owned if os.path.lexists(out / name)]
