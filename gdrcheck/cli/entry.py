"""The console script: ``gdrcheck --version`` answers before the command line machinery loads."""

from __future__ import annotations

import os
import sys

from gdrcheck.status import exit_status


def main(argv=None) -> None:
    if sys.stdout is None or sys.stderr is None or sys.stdin is None:
        _closed_streams()
    _never_unencodable()
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from gdrcheck import __version__

        sys.stdout.write(f"gdrcheck {__version__}\n")
        sys.exit(exit_status("pass"))
    from gdrcheck.cli.node_argv import read
    from gdrcheck.cli.options import DRIVER_COMMANDS

    reading = read(args)  # the options' table, without click: which command, which options
    if argv is None and reading.command in DRIVER_COMMANDS:  # the console script running a node command
        _no_cycle_collection()
        _begin_driver_early(reading)
        try:
            run_command_line(argv, reading)
        except SystemExit as e:
            _leave(e.code)
    else:
        run_command_line(argv, reading)


def _closed_streams() -> None:
    """A standard stream the caller closed (``>&-``, ``2>&-``, ``<&-``) becomes /dev/null: what would be
    written there goes nowhere, as when the reader of a pipe has gone, the run keeps its exit status, and no
    file gdrcheck opens later takes the stream's number."""
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        if getattr(sys, name) is not None:
            continue
        try:
            null = os.open(os.devnull, mode)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="replace", closefd=False))
        except OSError:
            pass


def _never_unencodable() -> None:
    """Under a locale whose encoding cannot hold a character gdrcheck prints (a Latin-1 terminal, a tree's
    box drawing, a CJK device name), that character is shown as '?', never an error."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            enc = (getattr(stream, "encoding", "") or "").lower().replace("-", "").replace("_", "")
            if enc not in ("utf8", "utf8sig"):
                try:
                    stream.reconfigure(errors="replace")
                except (ValueError, OSError):
                    pass


def _no_cycle_collection() -> None:
    """A node command builds its facts, pairs and document once and ends: what it frees, reference counting
    frees. The cycle collector would only walk the growing heap again and again (some 50 ms of `pairs` on a
    64-GPU fabric) to find garbage the process's end releases anyway."""
    import gc

    gc.disable()


def _leave(code) -> None:
    """End a node command now that its answer is out: stdout and stderr flushed, then the process ends
    without tearing the interpreter down. Freeing every module and object costs some 20 ms after the answer
    is written, and nothing such a command holds needs it: its files are closed and its temporary
    directories removed before this, and NVML is shut down by the thread that asked it."""
    from gdrcheck.io.output import stdout_closed

    if code is None:
        status = exit_status("pass")
    elif isinstance(code, int):
        status = code
    else:  # what sys.exit("text") does: the text on stderr, and Python's status for it (the contract's fail)
        sys.stderr.write(f"{code}\n")
        status = exit_status("fail")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            if stream is sys.stdout:
                stdout_closed()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _begin_driver_early(reading) -> None:
    """A live command that asks the driver: NVML's questions begin now, so the driver's waits pass while
    click and gdrcheck load. A line with --from, or one click answers itself or refuses (--help, an unknown
    option), leaves it to the command."""
    from gdrcheck.cli.options import DRIVER_COMMANDS

    if reading.command not in DRIVER_COMMANDS or not reading.plain or "from_path" in reading.given:
        return
    from gdrcheck.collectors.nvml import begin_early

    begin_early()


def _usage_status(reading, message: str = "") -> int:
    """The status of bad usage, as the engine the line names reads it (under --format nagios UNKNOWN, so a
    broken invocation does not page as CRITICAL). NPD and Nagios read stdout: they get one line saying why too."""
    if reading.engine is not None:
        from gdrcheck.render.adapters import usage_line

        sys.stdout.write(usage_line(reading.engine, message))
        return exit_status("usage", reading.engine)
    return exit_status("usage")


class Terminated(BaseException):
    """SIGTERM: a scheduler, an engine's timeout or an operator ended the run."""


def _terminate(signum, frame) -> None:
    from gdrcheck.io.tempdirs import raise_or_hold

    raise_or_hold(Terminated())  # during a removal of temporary directories: once it is done


def _end_on_sigterm() -> None:
    """SIGTERM ends the run as Ctrl-C does: what it unpacked or copied is removed, a probe's worker is
    killed, one line says so, and the status is the shell's for that signal. A SIGTERM the caller set to be
    ignored stays ignored."""
    import signal

    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _terminate)
    except (ValueError, OSError):  # not the main thread, or no such signal here
        pass


def run_command_line(argv=None, reading=None) -> None:
    """The command line with one-line errors, never a traceback. A plain node command line runs without
    click (:mod:`gdrcheck.cli.node_argv`'s ``reading`` of it); click reads everything else, and only then loads."""
    from gdrcheck.cli.node_argv import read
    from gdrcheck.io.deadline import TimedOut, stand_down

    _end_on_sigterm()
    if reading is None:
        reading = read(sys.argv[1:] if argv is None else list(argv))
    try:
        code = _run_to_status(argv, reading)
    except TimedOut as e:  # the --timeout's watchdog has said what there is to say
        code = e.status
    spoke = stand_down()
    sys.exit(code if spoke is None else spoke)


def _run_to_status(argv, reading) -> int:
    try:
        return _status(_run(argv, reading))
    except KeyboardInterrupt:
        sys.stderr.write("gdrcheck: interrupted\n")
        return exit_status("interrupted")
    except Terminated:
        sys.stderr.write("gdrcheck: terminated\n")
        return exit_status("terminated")
    except Exception as e:  # noqa: BLE001 - the contract promises no traceback
        return _error_status(e, reading)


def _run(argv, reading):
    from gdrcheck.cli import node_argv

    plain = node_argv.parse(None, reading)
    if plain is not None:
        from gdrcheck.cli import node_commands

        command, kwargs = plain
        return getattr(node_commands, command)(**kwargs)
    from gdrcheck.cli.commands import cli

    args = sys.argv[1:] if argv is None else list(argv)
    if args in ([], ["fleet"]):  # a bare group prints its help, exit 2: click 8.2 does so, 8.1 (Python 3.9) exits 0
        cli.main(args=[*args, "--help"], prog_name="gdrcheck", standalone_mode=False)
        return exit_status("usage")
    return cli.main(args=argv, prog_name="gdrcheck", standalone_mode=False)


def _status(rv) -> int:
    return rv if isinstance(rv, int) else exit_status("pass")


def _error_status(e: Exception, reading) -> int:
    """The one line an error gets on stderr (and stdout for the engines that read it), and the exit status.
    click is looked at only where it was loaded: a plain node command line never loads it."""
    from gdrcheck.errors import InputError

    click = sys.modules.get("click")
    no_args = getattr(click, "exceptions", None) and getattr(click.exceptions, "NoArgsIsHelpError", None)
    if no_args is not None and isinstance(e, no_args):  # a bare `gdrcheck` or `gdrcheck fleet`: its help
        sys.stdout.write(e.format_message().rstrip("\n") + "\n")
        return exit_status("usage")
    if click is not None and isinstance(e, click.ClickException):
        msg = " ".join(e.format_message().split())  # one line: click lists a choice's values one a line
        ctx = getattr(e, "ctx", None)
        if isinstance(e, click.UsageError) and ctx is not None:
            msg = f"{msg} (try '{ctx.command_path} --help')"
        sys.stderr.write(f"gdrcheck: error: {msg}\n")
        if isinstance(e, click.UsageError) or e.exit_code == exit_status("usage"):
            return _usage_status(reading, _one_line(msg))
        return e.exit_code
    if click is not None and isinstance(e, click.exceptions.Exit):
        return e.exit_code
    if click is not None and isinstance(e, click.exceptions.Abort):
        sys.stderr.write("gdrcheck: interrupted\n")
        return exit_status("interrupted")
    if isinstance(e, InputError):
        sys.stderr.write(f"gdrcheck: error: {_one_line(str(e))}\n")
        return _usage_status(reading, _one_line(str(e)))
    if isinstance(e, BrokenPipeError):  # the reader of stdout went away: nothing to say (rules, explain)
        from gdrcheck.io.output import stdout_closed

        stdout_closed()
        return exit_status("pass")
    if isinstance(e, RecursionError):
        sys.stderr.write("gdrcheck: error: input nests too deeply\n")
        return exit_status("usage")
    if isinstance(e, MemoryError):  # the input asked for more memory than the run may have
        msg = "input too large for the memory available"
        sys.stderr.write(f"gdrcheck: error: {msg}\n")
        return _usage_status(reading, msg)
    if os.environ.get("GDRCHECK_DEBUG"):
        raise e
    sys.stderr.write(f"gdrcheck: internal error: {e.__class__.__name__}: {_one_line(str(e))} "
                     "(GDRCHECK_DEBUG=1 shows where)\n")
    return exit_status("unknown")


def _one_line(text: str) -> str:
    """An error on one line as every text output shows an input's strings: no control characters."""
    from gdrcheck.collectors.clip import clip_name

    return clip_name(" ".join(text.split())[:500], 500)
