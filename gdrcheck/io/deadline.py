"""``--timeout``: one deadline for a whole run, kept by the parts that can wait.

Reading sysfs is quick; what can hang is a tool (``nvidia-smi``) or a library
call into the driver (NVML). The deadline caps each tool's own timeout, runs
NVML where a stuck call cannot hold the run, and stops collectors that have not
started when it runs out. What was not read is recorded, so the verdicts that
needed it are ``unknown`` and the exit status is 3. A last-resort watchdog ends
the process shortly after the deadline if something still blocks.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Callable, Optional, TypeVar

    T = TypeVar("T")

#: the deadline used when ``--timeout`` is not given (NHC allows 30 s, Slurm 60 s)
DEFAULT_SECONDS = 20.0
MAX_SECONDS = 1e7


class Deadline:
    """When the run must end; ``seconds`` 0 or None means no limit."""

    def __init__(self, seconds: Optional[float]) -> None:
        # 0 and infinity mean no limit; beyond about four months a timer cannot wait (time_t)
        self.seconds = seconds if seconds and 0 < seconds < MAX_SECONDS else None
        self.start = time.monotonic()
        self.end = self.start + self.seconds if self.seconds else None
        self.missed: list[str] = []

    def remaining(self) -> Optional[float]:
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def cap(self, timeout: float) -> float:
        left = self.remaining()
        return timeout if left is None else max(0.01, min(timeout, left))

    def miss(self, what: str) -> None:
        if what not in self.missed:
            self.missed.append(what)

    def begin(self, what: str, fn: Callable[[], T]) -> Callable[[], Optional[T]]:
        """Begin ``fn()`` in a daemon thread now; the returned waiter gives its value (re-raising its
        error), or None with ``what`` recorded when it has not answered by the deadline.

        Used to let the driver work (NVML calls release the GIL) while sysfs is read.
        """
        box: dict = {}

        def work() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = e

        import threading

        t = threading.Thread(target=work, name=f"gdrcheck-{what}", daemon=True)
        t.start()
        return self.adopt(what, t, box)

    def adopt(self, what: str, t: threading.Thread, box: dict) -> Callable[[], Optional[T]]:
        """The waiter for work already begun in thread ``t``, which leaves its value (or its error) in
        ``box`` under "value" ("error")."""

        def wait() -> Optional[T]:
            t.join(self.remaining())
            if t.is_alive():
                self.miss(what)
                return None
            if "error" in box:
                raise box["error"]
            return box.get("value")

        return wait

    def call(self, what: str, fn: Callable[[], T]) -> Optional[T]:
        """``fn()`` within the time left; None (and ``what`` recorded) when it did not answer in time.

        Without a limit it is a plain call. With one, it runs in a daemon thread:
        a call stuck in the driver cannot be interrupted, but it no longer holds the run.
        """
        if self.end is None:
            return fn()
        if self.expired():
            self.miss(what)
            return None
        return self.begin(what, fn)()


class TimedOut(BaseException):
    """Raised in the main thread when the watchdog has spoken: what it was doing stops, the blocks it is in
    unwind (removing their temporary directories), and the run ends with ``status`` saying nothing more."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


_spoken: list[int] = []  # the status the watchdog ended the run with, once it has spoken
_standing = [True]  # False once the run is ending on its own: the watchdog's signal then raises nothing


_armed: list[Watchdog] = []  # the run's watchdogs: stand_down disarms each, whatever path the run ended by


def stand_down() -> Optional[int]:
    """The run is ending: no TimedOut from here on, and no watchdog left to fire later (a run ended by an
    error never reached its own disarm; in a process that goes on, as under a test runner, it would end that
    process). The watchdog's status if it has spoken (it wins: its words are out), else None."""
    _standing[0] = False
    while _armed:
        _armed.pop().disarm()
    return _spoken[0] if _spoken else None


def _catch_swallowed() -> None:
    """A signal lands between any two bytecodes, also inside a weak reference's callback or a ``__del__`` (the
    import system's module locks have such callbacks); Python does not let an exception leave those: it prints
    "Exception ignored in ..." with a traceback and goes on. So a :class:`TimedOut` lost that way is said
    nowhere, and the watchdog's signal is sent again a moment later, where the main thread can stop."""
    if getattr(sys.unraisablehook, "_gdrcheck", False):
        return
    before = sys.unraisablehook

    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, TimedOut):
            before(unraisable)
            return
        import signal

        try:
            signal.setitimer(signal.ITIMER_REAL, 0.005)  # SIGALRM: Watchdog.SIGNAL, out of the callback
        except (ValueError, OSError, AttributeError):
            pass

    hook._gdrcheck = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


class Watchdog:
    """Ends the run ``grace`` seconds after the deadline if it is still going.

    ``last_words`` is called once (from the watchdog thread) to say what can be said; it returns the exit
    status (None: unknown's). Then the main thread is stopped (:class:`TimedOut`, by a signal, so a blocking call
    is interrupted too) and ends the run itself, removing its temporary directories once it has stopped
    writing into them. A main thread that has not ended ``stop_grace`` seconds later is stuck outside
    Python: the watchdog removes what is left and ends the process.
    """

    SIGNAL = "SIGALRM"  # gdrcheck sets no alarm of its own

    def __init__(self, deadline: Deadline, last_words: Callable[[], Optional[int]], grace: float = 2.0,
                 stop_grace: float = 5.0) -> None:
        self._timer: Optional[threading.Timer] = None
        self._lock = None  # only a run with a deadline has a timer to race with
        self._done = False
        self._writing = False
        self.seconds = deadline.seconds
        if deadline.end is None:
            return
        import threading

        self._lock = threading.Lock()
        del _spoken[:]
        self._stop_grace = stop_grace
        self._main = self._catch_stop(threading)
        delay = deadline.remaining() + grace  # type: ignore[operator]
        self._last_words = last_words
        self._timer = threading.Timer(delay, self._fire)
        self._timer.daemon = True
        _armed.append(self)
        self._timer.start()

    def _catch_stop(self, threading) -> Optional[int]:
        """The main thread's id once the signal that stops it raises TimedOut there; None where it cannot be
        (not called from the main thread)."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            return None
        _standing[0] = True

        def stop(signum, frame) -> None:
            if _standing[0] and _spoken:
                from gdrcheck.io.tempdirs import raise_or_hold

                raise_or_hold(TimedOut(_spoken[0]))

        try:
            signal.signal(getattr(signal, self.SIGNAL), stop)
        except (ValueError, OSError, AttributeError):
            return None
        _catch_swallowed()
        return threading.get_ident()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            writing = self._writing
        from gdrcheck.status import exit_status

        status = exit_status("unknown")
        try:
            if writing:  # part of the answer is out: one line on stderr, nothing more on stdout
                os.write(2, f"gdrcheck: the output was not written within {self.seconds:g} s\n".encode())
            else:
                said = self._last_words()
                status = exit_status("unknown") if said is None else said
                sys.stdout.flush()
                sys.stderr.flush()
        finally:
            _spoken.append(status)
            if self._main is not None and _standing[0]:
                import signal

                try:
                    signal.pthread_kill(self._main, getattr(signal, self.SIGNAL))
                    time.sleep(self._stop_grace)
                except (OSError, ValueError):
                    pass
            from gdrcheck.io.tempdirs import remove_all

            try:
                remove_all()
            finally:
                os._exit(status)

    def writing(self) -> bool:
        """The output begins: the deadline still holds, and the watchdog, if it fires, says only that the
        output was not written in time. False when it has already fired (the caller must not print)."""
        if self._lock is None:
            return True
        with self._lock:
            if self._done:
                return False
            self._writing = True
        return True

    def disarm(self) -> bool:
        """Stop the watchdog; False when it has already fired (the caller must not print)."""
        if self._lock is None:
            self._done = True
            return True
        with self._lock:
            if self._done:
                return False
            self._done = True
        if self._timer is not None:
            self._timer.cancel()
        return True
