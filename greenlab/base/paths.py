"""The folders greenlab uses, each from an environment variable or a default.

- ``GREENLAB_RESULTS_DIR``: the results log (else ``<repo>/results`` in a checkout, else
  ``greenlab_results/`` in the working folder on Colab, beside the notebook and visible in its file
  pane, else ``~/.greenlab/results``).
- ``GREENLAB_DATA_DIR``: a data folder (cited tables of the shipped names, reference runs in its
  ``reference_runs`` subfolder, cached datasets in its ``cache`` subfolder); unset, the tables
  are the package's own ``cited_tables``, and the reference runs are ``<repo>/data`` in a checkout,
  else the copy shipped inside the package (``greenlab/data``).
- ``GREENLAB_CACHE_DIR``: the dataset cache, if it should live elsewhere; unset, ``<repo>/data/cache``
  in a checkout, else the user's cache folder, ``$XDG_CACHE_HOME/greenlab`` or ``~/.cache/greenlab``
  (never inside an installed package, which may be read-only and is replaced on upgrade).
- ``GREENLAB_LESSONS_DIR``: where ``greenlab lab`` looks for lessons (else ``<repo>/lessons`` in a
  checkout, else the learner copies shipped inside the package, ``greenlab/lessons``).

Nothing here creates a folder except ``learner_copy``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def repo_root() -> Path:
    """The folder that holds the ``greenlab`` package (a checkout's root)."""
    return package_folder().parent


def package_folder() -> Path:
    """The folder of the installed ``greenlab`` package (wherever this module sits inside it)."""
    from importlib import resources

    return Path(str(resources.files("greenlab"))).resolve()


def in_checkout() -> bool:
    """True when greenlab runs from a source checkout (not an installed wheel)."""
    root = repo_root()
    return (root / "pyproject.toml").is_file() and (root / "greenlab").is_dir()


def results_dir() -> Path:
    """Where the results log lives: ``GREENLAB_RESULTS_DIR``, else ``<repo>/results`` in a
    checkout (git-ignored), else ``~/.greenlab/results``. Not created here."""
    env = os.environ.get("GREENLAB_RESULTS_DIR")
    if env:
        return Path(env).expanduser()
    if in_checkout():
        return repo_root() / "results"
    if on_colab():
        return Path.cwd() / "greenlab_results"
    return Path.home() / ".greenlab" / "results"


def on_colab(modules=None) -> bool:
    """True inside a Google Colab kernel (it has imported ``google.colab``)."""
    return "google.colab" in (sys.modules if modules is None else modules)


def data_dir() -> Path:
    """The data folder (reference runs): ``GREENLAB_DATA_DIR``, else ``<repo>/data`` in a checkout,
    else the package's own ``data`` folder (package data of a wheel). The cited tables are in
    ``tables_dir()``, the dataset cache in ``cache_dir()``."""
    env = os.environ.get("GREENLAB_DATA_DIR")
    if env:
        return Path(env).expanduser()
    if in_checkout():
        return repo_root() / "data"
    return package_folder() / "data"


def tables_dir() -> Path:
    """The cited tables (carbon intensity, GPU and CPU catalogues, region codes, hourly profiles):
    ``GREENLAB_DATA_DIR`` when set, else the package's own ``cited_tables`` folder (package data,
    so an installed wheel has them)."""
    env = os.environ.get("GREENLAB_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return package_folder() / "cited_tables"


def cache_dir() -> Path:
    """Dataset download cache: ``GREENLAB_CACHE_DIR``, else ``cache`` in ``GREENLAB_DATA_DIR``
    when that is set, else ``<repo>/data/cache`` in a checkout (git-ignored), else
    ``user_cache_dir()``. Not created here."""
    env = os.environ.get("GREENLAB_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if os.environ.get("GREENLAB_DATA_DIR") or in_checkout():
        return data_dir() / "cache"
    return user_cache_dir()


def user_cache_dir(environ=None) -> Path:
    """The user's own cache folder for greenlab: ``$XDG_CACHE_HOME/greenlab`` (an absolute path, as
    the XDG base-directory specification requires), else ``~/.cache/greenlab``."""
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg).expanduser() if xdg and Path(xdg).expanduser().is_absolute() else Path.home() / ".cache"
    return base / "greenlab"


def lessons_dir() -> Path:
    """The lessons folder: ``GREENLAB_LESSONS_DIR``, else ``<repo>/lessons`` in a checkout, else the
    learner copies shipped inside the package (``greenlab/lessons``, package data of a wheel)."""
    env = os.environ.get("GREENLAB_LESSONS_DIR")
    if env:
        return Path(env).expanduser()
    if in_checkout():
        return repo_root() / "lessons"
    return package_folder() / "lessons"


def learner_copy(dest=None, report=None) -> Path:
    """The learner's own copy of the lessons (default ``my-lessons/`` beside ``lessons/`` in a
    checkout, else in the working folder): lessons not yet there are copied in, nothing already
    there is overwritten (a lesson held under an earlier number, ``02_mixed_precision.ipynb`` for
    ``01_mixed_precision.ipynb``, counts as there); FileNotFoundError, saying where it looked, when there is no lesson to
    copy. Returns the folder. ``make lab`` and ``greenlab lab`` open it, so autosave never touches ``lessons/``.
    Each copy carries the local kernel's metadata (``kernel_metadata()``), so opening it does
    not mark it modified; ``report(path)`` is called for each lesson copied."""
    import shutil

    source = lessons_dir()
    if dest is None:  # beside lessons/ in a checkout; in the working folder outside one (not site-packages)
        beside = in_checkout() or os.environ.get("GREENLAB_LESSONS_DIR")
        dest = (source.parent if beside else Path.cwd()) / "my-lessons"
    dest = Path(dest).expanduser()
    if dest.resolve() == source.resolve():
        raise ValueError(f"dest must not be the shipped lessons folder {source}")
    shipped = sorted(source.glob("*.ipynb")) if source.is_dir() else []
    if not shipped:  # never report success with nothing copied
        raise FileNotFoundError(f"no lessons (*.ipynb) in {source}: set GREENLAB_LESSONS_DIR to the folder that "
                                "holds them (lessons/ in a checkout), or reinstall greenlab-course, whose "
                                "package ships them")
    dest.mkdir(parents=True, exist_ok=True)
    stamp = kernel_metadata()
    # a lesson is already there when the learner's folder holds it under any number: a copy made
    # before the course was renumbered keeps its name and the learner's work (README, "Lesson numbers")
    mine = {_slug(p.name) for p in dest.glob("*.ipynb")}
    for notebook in shipped:
        if not (dest / notebook.name).exists() and _slug(notebook.name) not in mine:
            shutil.copy2(notebook, dest / notebook.name)
            stamp_kernel_metadata(dest / notebook.name, stamp)
            if report is not None:
                report(dest / notebook.name)
    return dest


def _slug(name: str) -> str:
    """A lesson file's name without its number: ``01_mixed_precision.ipynb`` -> ``mixed_precision.ipynb``."""
    number, _, rest = name.partition("_")
    return rest if number.isdigit() and rest else name


def kernel_metadata() -> dict | None:
    """The notebook metadata a local ``python3`` kernel writes when it starts (``kernelspec`` and
    ``language_info``, Python's version included), or None where ipykernel or jupyter_client is
    missing. A copy that already carries it is not marked modified when its kernel starts."""
    try:
        from ipykernel.ipkernel import IPythonKernel
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec("python3")
    except Exception:  # noqa: BLE001 - no Jupyter here: copies stay as shipped
        return None
    return {"kernelspec": {"name": "python3", "display_name": spec.display_name, "language": spec.language},
            "language_info": dict(IPythonKernel.language_info)}


def stamp_kernel_metadata(path, metadata: dict | None) -> None:
    """Write ``metadata`` (``kernel_metadata()``) into the notebook at ``path``; a file that is
    not a notebook, or ``metadata`` None, is left as it is."""
    import json

    if not metadata:
        return
    path = Path(path)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(nb, dict) or not isinstance(nb.get("metadata"), dict):
        return
    nb["metadata"].update(metadata)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def output_folder(name: str, value) -> Path:
    """The folder a command writes into (``name``: its option, e.g. ``--out``), made when missing.
    Refused with a ValueError naming ``name`` and the path when it is empty, holds a NUL, is a file,
    lies under a file or cannot be made: checked before any work, so a long run never ends in a
    traceback at its last step."""
    text = _path_text(name, value, "a folder's path")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} {text!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{name} {text!r} cannot be made a folder ({exc.strerror or exc})") from None
    return path


def _path_text(name: str, value, what: str) -> str:
    """``value`` as a path's text, refused (naming ``name``) when it is no path, empty or holds a NUL."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value).strip():
        raise ValueError(f"{name} must be {what}, got {value!r}")
    text = os.fspath(value)
    if "\x00" in text:
        raise ValueError(f"{name} must be {what} without a NUL character, got {text!r}")
    return text


def output_file(name: str, value) -> Path:
    """The file a command writes (``name``: its option), its folder made when missing; refused like
    :func:`output_folder`, and when the path is an existing folder."""
    text = _path_text(name, value, "a file's path")
    path = Path(text).expanduser()
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise ValueError(f"{name} {text!r} is a folder; give the file's path")
    output_folder(name, path.parent)
    return path
