"""Headless Chromium driven over its DevTools pipe (no websocket library, no network).

Opens a page, records every request it makes, measures it with script run from
outside the page, takes screenshots and prints it to PDF. Started as root needs
``--no-sandbox``; every run gets a fresh profile directory.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND")


def executable() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    def __init__(self, exe: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds() -> None:  # the pipe protocol: the browser reads fd 3 and writes fd 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
                                      "about:blank"], pass_fds=(3, 4), preexec_fn=fds,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.session: Optional[str] = None

    def __enter__(self) -> Chromium:
        target = self.call("Target.createTarget", url="about:blank", session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True, session=False)["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call("Browser.close", session=False)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)

    # -- protocol -------------------------------------------------------------

    def call(self, method: str, session: bool = True, **params) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        want = self._id
        while True:
            m = self._read()
            if m.get("id") == want:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def _read(self) -> dict[str, Any]:
        end = time.monotonic() + self.timeout
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_event(self, method: str) -> dict[str, Any]:
        for i, e in enumerate(self.events):
            if e["method"] == method:
                return self.events.pop(i)
        while True:
            m = self._read()
            if m.get("method") == method:
                return m
            if "method" in m:
                self.events.append(m)

    # -- what the tests use ------------------------------------------------------

    def open(self, path: Path, width: int, height: int = 1123, media: str = "screen") -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        self.call("Emulation.setEmulatedMedia", media=media)
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        got = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in got:
            raise RuntimeError(got["exceptionDetails"])
        return got["result"].get("value")

    def screenshot(self, out: Path, full: bool = True) -> None:
        kw: dict[str, Any] = {"format": "png"}
        if full:
            w, h = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            kw.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": w, "height": min(h, 16000),
                                                        "scale": 1})
        out.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **kw)["data"]))

    def pdf(self, out: Path) -> bytes:
        data = base64.b64decode(self.call("Page.printToPDF", preferCSSPageSize=True, printBackground=True)["data"])
        out.write_bytes(data)
        return data

    def requested(self) -> list[str]:
        """Every URL the page asked for since it was opened."""
        while True:  # drain what is already queued
            if not select.select([self._r], [], [], 0.2)[0] and b"\0" not in self._buf:
                break
            m = self._read()
            if "method" in m:
                self.events.append(m)
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]
