"""tito: the TinyTorch command line.

Kept light on purpose: only argparse and tito's small helpers load at start, so
`tito --help` is instant; each command imports what it needs when it runs.
"""
from __future__ import annotations

import argparse
import sys

from tito.errors import TitoError, os_error_message


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tito",
        description="TinyTorch course tool: build your own PyTorch, one module at a time.",
        epilog="Start with `tito status`, then `tito module start 01`.",
    )
    sub = p.add_subparsers(dest="command", metavar="command")

    sub.add_parser("status", help="table of the twenty modules: available, exported, last test").set_defaults(
        run=_status)

    e = sub.add_parser("export", help="write a module's exported notebook cells into the tinytorch package")
    e.set_defaults(run=_export)
    e.add_argument("module", nargs="?", help="module number or name, e.g. 01 or tensor")
    e.add_argument("--all", action="store_true", help="every available module")
    e.add_argument("--solutions", action="store_true",
                   help="build from the reference solutions into build/solutions (your files are untouched)")

    t = sub.add_parser("test", help="export a module, then run its tests: `tito test module 01`")
    t.set_defaults(run=_test)
    t.add_argument("target", nargs="*", help="`module NN`, `NN`, or a name like `tensor`")
    t.add_argument("--all", action="store_true", help="every available module, in order")
    t.add_argument("--solutions", action="store_true",
                   help="test the reference solutions (built into build/solutions) instead of your notebook")
    t.add_argument("-v", "--verbose", action="store_true", help="show pytest's tracebacks for each failure")
    t.add_argument("-k", metavar="PATTERN", help="only tests whose names match PATTERN (as in pytest)")
    t.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failing test (as in pytest)")

    m = sub.add_parser("module", help="start or reset a module's notebook")
    m.set_defaults(run=_say("say `tito module start NN`, `tito module reset NN` or `tito module restore NN`."))
    msub = m.add_subparsers(dest="action", metavar="action")
    ms = msub.add_parser("start", help="print the notebook's path (and optionally open Jupyter)")
    ms.set_defaults(run=_module_start)
    ms.add_argument("module")
    ms.add_argument("--launch", action="store_true", help="start Jupyter Lab on the notebook (it prints the URL)")
    mr = msub.add_parser("reset", help="back up your notebook, then restore the released one and its stubs")
    mr.set_defaults(run=_module_reset)
    mr.add_argument("module")
    mr.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    mo = msub.add_parser("restore", help="list your notebook backups, or restore one")
    mo.set_defaults(run=_module_restore)
    mo.add_argument("module")
    mo.add_argument("backup", nargs="?", help="the backup's file name (from the list)")
    mo.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    r = sub.add_parser("release", help="(instructors) regenerate student notebooks and stub package files, "
                                        "or write a student copy of the course (--student-repo DIR)")
    r.set_defaults(run=_release)
    r.add_argument("--check", action="store_true", help="only check that committed files are up to date")
    r.add_argument("--student-repo", metavar="DIR",
                   help="write a copy of the course for students to DIR: no solutions, hidden tests or "
                        "instructor files")
    r.add_argument("--force", action="store_true",
                   help="with --student-repo: replace an earlier student copy in DIR (its .git is kept)")

    g = sub.add_parser("grade", help="(instructors) autograde submissions of a module, sandboxed; writes grades.csv",
                       description="tito grade setup: check that grading works here (nbgrader, the sandbox). "
                                   "tito grade MODULE SUBMISSIONS: grade every student folder in SUBMISSIONS.")
    g.set_defaults(run=_grade)
    g.add_argument("module", help="the module to grade, or `setup`")
    g.add_argument("submissions", nargs="?", help="folder with one subfolder per student holding the module's .ipynb")
    g.add_argument("--course-dir", help="nbgrader course folder to use (default: build/grading)")
    g.add_argument("--timeout", type=int, default=120,
                   help="seconds each cell may run; the first cell past it ends the notebook's run (default 120)")
    g.add_argument("--budget", type=int, default=900,
                   help="seconds for one whole submission, notebook and tests (default 900)")
    g.add_argument("--jobs", "-j", type=int, default=1, help="grade this many submissions at once (default 1)")
    g.add_argument("--resume", action="store_true",
                   help="skip submissions already graded in grades.csv (same notebook, same module)")
    g.add_argument("--assignment", help="the assignment's folder name in nbgrader's submitted/ layout "
                                        "(default: the module's, e.g. 04_losses)")
    g.add_argument("--deadline", help="mark submissions whose nbgrader timestamp.txt is later than this "
                                      "(e.g. 2026-12-01T17:00, UTC unless it says otherwise) as late")
    g.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade without the sandbox (student code runs with your rights: trusted code only)")

    b = sub.add_parser("bench", help="benchmark the reference build against PyTorch CPU (ratios per workload)")
    b.set_defaults(run=_bench)
    b.add_argument("--quick", action="store_true", help="a few rounds and small sizes: seconds, not minutes")
    b.add_argument("--threads", type=int, default=1, help="threads for both frameworks (default 1)")
    b.add_argument("--json", metavar="FILE", help="also write the results and the environment record to FILE")
    b.add_argument("--mine", action="store_true", help="also run the workloads on your own tinytorch/")
    b.add_argument("--only", nargs="+", metavar="WORKLOAD", help="run only these workloads")

    gr = sub.add_parser("gpu-report", help="time module 17's kernels on this machine's NVIDIA GPU (says so when "
                                           "there is none)")
    gr.set_defaults(run=_gpu_report)
    gr.add_argument("--mine", action="store_true", help="your own tinytorch/ instead of the reference build")
    gr.add_argument("--simulator", action="store_true",
                    help="run under numba's CUDA simulator at tiny sizes (checks the report; times mean nothing)")

    sub.add_parser("doctor", help="check your environment and say what to fix").set_defaults(run=_doctor)
    v = sub.add_parser("verify", help="(maintainers, CI) check the whole course: solutions pass, stubs fail, "
                                      "release is current, notebooks run, tito's own tests")
    v.set_defaults(run=_verify)
    v.add_argument("modules", nargs="*", help="check only these modules (skips the course-wide checks)")
    v.add_argument("--no-mutants", action="store_true", help="skip the mutant checks (quicker, while writing)")

    ml = sub.add_parser("milestone", help="run landmark results (perceptron, XOR, LeNet, a transformer, ...) "
                                          "with your own tinytorch: `tito milestone list`")
    ml.set_defaults(run=_say("say `tito milestone list` or `tito milestone run NAME` (NAME or `all`)."))
    mlsub = ml.add_subparsers(dest="action", metavar="action")
    mlsub.add_parser("list", help="every milestone: its target, the modules it needs, whether you can run it"
                     ).set_defaults(run=_milestone_list)
    mlr = mlsub.add_parser("run", help="train one milestone (or `all`), print its result against its target, "
                                       "save its plot under build/milestones/")
    mlr.set_defaults(run=_milestone_run)
    mlr.add_argument("name", help="a milestone's name (see `tito milestone list`), or `all`")
    mlr.add_argument("--solutions", action="store_true",
                     help="run on the reference solutions (built into build/solutions) instead of your package")

    bk = sub.add_parser("book", help="build the course website (Jupyter Book, offline) into build/book/html")
    bk.set_defaults(run=_book)
    bksub = bk.add_subparsers(dest="action", metavar="action")
    bkb = bksub.add_parser("build", help="one chapter per module from its student notebook with the reference's "
                                         "outputs, the milestones, this command reference; prints index.html")
    bkb.add_argument("--modules", nargs="+", metavar="NN", help="build only these modules' chapters (quicker)")
    bkb.add_argument("--jobs", "-j", type=int, default=2,
                     help="solution notebooks executed at once for their outputs (default 2)")
    bkb.add_argument("--no-milestones", action="store_true",
                     help="do not run the milestones for their plots; show the results already there")
    bkb.add_argument("--check", action="store_true",
                     help="then check the site: no solution text, nothing from the network, links, chromium")

    mu = sub.add_parser("mutants", help="(authors) check that a module's typical-mistake mutants are caught "
                                        "by its tests and its graded check cells")
    mu.set_defaults(run=_mutants)
    mu.add_argument("module")
    mu.add_argument("names", nargs="*", help="only these mutants (by name)")
    mu.add_argument("--tests", action="store_true",
                    help="only the tests half (caught, and filed first under the function it breaks)")
    mu.add_argument("--checks", action="store_true", help="only the graded-check-cells half")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.run(args, parser)
    except TitoError as exc:
        print(f"tito: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # e.g. `tito status | head`
        return 0
    except OSError as exc:  # a full disk, an unwritable .tito/: one line, not a traceback
        print(f"tito: {os_error_message(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tito: interrupted.", file=sys.stderr)
        return 130


# Each subcommand's handler: (args, parser) -> exit code. Each imports what it needs when
# it runs, so that `tito --help` loads nothing but argparse.

def _status(args, parser) -> int:
    from tito import commands

    return commands.status()


def _export(args, parser) -> int:
    from tito import commands

    return commands.export(args.module, all_modules=args.all, solutions=args.solutions)


def _test(args, parser) -> int:
    from tito import commands

    target = list(args.target)
    if target and target[0] == "module":
        target = target[1:]
    if len(target) > 1:
        raise TitoError(f"test one module at a time (got {' '.join(target)}), or use --all.")
    pytest_args = (("-k", args.k) if args.k else ()) + (("-x",) if args.exitfirst else ())
    return commands.test(target[0] if target else None, all_modules=args.all, solutions=args.solutions,
                         verbose=args.verbose, pytest_args=pytest_args)


def _module_start(args, parser) -> int:
    from tito import commands

    return commands.module_start(args.module, launch=args.launch)


def _module_reset(args, parser) -> int:
    from tito import commands

    return commands.module_reset(args.module, yes=args.yes)


def _module_restore(args, parser) -> int:
    from tito import commands

    return commands.module_restore(args.module, args.backup, yes=args.yes)


def _say(message):
    """A handler for a command given without its action: say which actions there are."""
    def handler(args, parser) -> int:
        raise TitoError(message)
    return handler


def _milestone_list(args, parser) -> int:
    from tito import milestones

    return milestones.list_command()


def _milestone_run(args, parser) -> int:
    from tito import milestones

    return milestones.run_command(args.name, solutions=args.solutions)


def _book(args, parser) -> int:
    from tito.book import book_command

    return book_command(args.action, getattr(args, "modules", None), getattr(args, "jobs", 2),
                        getattr(args, "no_milestones", False), getattr(args, "check", False))


def _release(args, parser) -> int:
    from tito.release import release, student_release

    if args.student_repo:
        if args.check:
            raise TitoError("--check and --student-repo do not go together: check the checkout with "
                            "`tito release --check`, then write the copy.")
        from pathlib import Path

        return student_release(Path(args.student_repo), force=args.force)
    if args.force:
        raise TitoError("--force only goes with --student-repo DIR.")
    return release(check=args.check)


def _require_solutions(args) -> None:
    """The instructors' and authors' commands need the course's solutions."""
    from tito.course import find_root, require_solutions

    require_solutions(find_root(), f"`tito {args.command}`")


def _grade(args, parser) -> int:
    _require_solutions(args)
    from pathlib import Path

    from tito.grade import grade, setup

    if args.module == "setup":
        return setup()
    if args.submissions is None:
        parser.error("tito grade MODULE SUBMISSIONS: say which folder holds the submissions")
    return grade(args.module, Path(args.submissions), Path(args.course_dir) if args.course_dir else None,
                 args.timeout, jobs=args.jobs, unsafe_no_sandbox=args.unsafe_no_sandbox, budget=args.budget,
                 resume=args.resume, assignment=args.assignment, deadline=args.deadline)


def _bench(args, parser) -> int:
    from pathlib import Path

    from tito.bench import bench

    return bench(quick=args.quick, threads=args.threads, json_path=Path(args.json) if args.json else None,
                 mine=args.mine, only=args.only)


def _gpu_report(args, parser) -> int:
    from tito.gpu_report import gpu_report

    return gpu_report(mine=args.mine, simulator=args.simulator)


def _doctor(args, parser) -> int:
    from tito.doctor import doctor

    return doctor()


def _verify(args, parser) -> int:
    _require_solutions(args)
    from tito.verify import verify

    return verify(args.modules or None, with_mutants=not args.no_mutants)


def _mutants(args, parser) -> int:
    _require_solutions(args)
    from tito.verify import mutants_command

    halves = tuple(h for h in ("tests", "checks") if getattr(args, h)) or ("tests", "checks")
    return mutants_command(args.module, args.names, halves)


if __name__ == "__main__":
    sys.exit(main())
