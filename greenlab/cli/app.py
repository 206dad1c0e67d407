"""The ``greenlab`` command: ``doctor``, ``measure``, ``run``, ``data``, ``leaderboard`` and ``lab``."""

from __future__ import annotations

import argparse
import sys

from greenlab.cli.doctor import doctor_main
from greenlab.cli.measure import measure_main
from greenlab.cli.run import add_run_arguments, run_main
from greenlab.cli.data import add_data_arguments, data_main
from greenlab.course.leaderboard import show_main
from greenlab.course.verify import verify_main
from greenlab.base.paths import learner_copy
from greenlab.base import optional, processes


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    return int(args.handler(args) or 0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="greenlab", description=__doc__)
    sub = p.add_subparsers(dest="command")

    d = sub.add_parser("doctor", help="what this machine can measure, and how")
    d.add_argument("--json", action="store_true", help="print JSON for scripts")
    d.set_defaults(handler=_doctor)

    m = sub.add_parser("measure", help="run a command and report its energy (energy's `time`)")
    m.add_argument("--region", default="WORLD", help="grid region code for CO2e (default WORLD)")
    m.add_argument("--pue", type=float, default=None, help="power usage effectiveness (default 1.0)")
    m.add_argument("--json", action="store_true", help="print JSON instead of a table")
    m.add_argument("--attribution", choices=("process", "machine"), default="process",
                   help="without a CPU energy counter, whose CPU time the estimate counts: the command "
                        "and its children (process, default) or every program on the machine (machine)")
    m.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    m.set_defaults(handler=_measure)

    r = sub.add_parser("run", help="train headless and print a results table")
    _add_run_arguments(r)
    r.set_defaults(handler=_run)

    data = sub.add_parser("data", help="stage datasets before a class: fetch, status, path")
    _add_data_arguments(data)
    data.set_defaults(handler=_data)

    board = sub.add_parser("leaderboard", help="the capstone's leaderboard, e.g. a class board in a shared folder")
    board_sub = board.add_subparsers(dest="action", required=True)
    show = board_sub.add_parser("show", help="print the ranking (one per kind of energy measurement)")
    show.add_argument("--dir", default=None, help="the board's folder or JSON file (default: "
                                                 "$GREENLAB_LEADERBOARD_DIR, else the results folder)")
    show.add_argument("--metric", default="joules_to_target",
                      choices=("joules_to_target", "joules", "seconds", "co2e_g"), help="what ranks (lowest first)")
    show.add_argument("--limit", type=int, default=None, help="rows per kind of measurement (default: all)")
    show.set_defaults(handler=_leaderboard)
    check = board_sub.add_parser("verify", help="re-run every submitted recipe in the class harness and accept "
                                                "the rows the re-runs reproduce (greenlab.course.verify)")
    check.add_argument("--dir", default=None, help="the class folder (default: $GREENLAB_LEADERBOARD_DIR)")
    check.set_defaults(handler=_leaderboard_verify)

    lab = sub.add_parser("lab", help="start JupyterLab on your own copy of the lessons (my-lessons/; "
                                     "localhost, token auth); extra arguments go to JupyterLab")
    lab.add_argument("--dir", default=None, help="where your copy lives (default: my-lessons/ beside lessons/)")
    lab.add_argument("--copy-only", action="store_true",
                     help="copy the lessons not yet in your copy, then stop (what make lab does first)")
    lab.add_argument("lab_args", nargs=argparse.REMAINDER,
                     help="JupyterLab options after --, e.g. greenlab lab -- --port=8890")
    lab.set_defaults(handler=_lab)
    return p


def _doctor(args) -> int:
    return doctor_main(args)


def _measure(args) -> int:
    return measure_main(args)


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)


def _run(args) -> int:
    return run_main(args)


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)


def _data(args) -> int:
    return data_main(args)


def _leaderboard(args) -> int:
    return show_main(args)


def _leaderboard_verify(args) -> int:
    return verify_main(args)


def _lab(args) -> int:

    extra = [a for a in args.lab_args if a != "--"]
    try:
        folder = learner_copy(args.dir, report=lambda path: print(f"greenlab: copied {path.name} to {path.parent}/"))
    except FileNotFoundError as exc:
        print(f"greenlab lab: {exc}", file=sys.stderr)
        return 1
    print(f"greenlab: your lessons are in {folder} (yours to edit; lessons/ stays as shipped)")
    if args.copy_only:
        return 0

    why = optional.missing("jupyterlab")
    if why:  # a lean install: the lessons are copied, JupyterLab comes with the lab extra
        print(f"greenlab lab: {why}; {optional.install_hint('jupyterlab')}, or open {folder} in another "
              "Jupyter front end", file=sys.stderr)
        return 1
    # JupyterLab ends with this command, however it ends (a SIGTERM is passed on, a SIGKILL is its parent-death signal)
    return processes.run_in_foreground(lab_command(folder, extra), env=lab_environment())


def lab_environment(environ=None) -> dict:
    """The environment JupyterLab (and so every kernel) starts with: this one, plus
    ``OMP_WAIT_POLICY=PASSIVE`` unless it is set (``make lab`` and ``make test`` do the same;
    see ``greenlab.session.threads``)."""
    import os

    env = dict(os.environ if environ is None else environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def lab_command(folder, extra=(), euid=None) -> list:
    """The JupyterLab command line for ``folder``: localhost only; ``--allow-root`` when run as root."""
    import os

    euid = os.geteuid() if euid is None and hasattr(os, "geteuid") else euid
    cmd = [sys.executable, "-m", "jupyterlab", str(folder), "--ServerApp.ip=127.0.0.1"]
    if euid == 0:
        cmd.append("--allow-root")
    return cmd + list(extra)


if __name__ == "__main__":
    sys.exit(main())
