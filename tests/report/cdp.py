"""A headless Chromium driven over the DevTools protocol through a pipe (stdlib only): open a page, hover, click, shoot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


class Browser:
    """One headless Chromium with one page, spoken to with ``--remote-debugging-pipe`` (fds 3 and 4)."""

    def __init__(self, width: int = 1400, height: int = 1600) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="lens-chromium-")

        def fds() -> None:  # in the child: the protocol's pipe ends at fds 3 and 4, kept across exec
            reader, writer = os.dup(to_child_r), os.dup(from_child_w)  # above 4: neither is overwritten
            os.dup2(reader, 3, inheritable=True)
            os.dup2(writer, 4, inheritable=True)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--user-data-dir={self._profile}", "--no-first-run", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None if os.environ.get("LENS_CDP_DEBUG") else subprocess.DEVNULL, preexec_fn=fds,
            close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, *, session: bool = False, timeout: float = 60, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer; events that arrive meanwhile are kept in ``events``."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read(timeout)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def open(self, url: str, ready: str = "true", timeout: float = 60) -> None:
        """Navigate to ``url`` and wait until the JavaScript expression ``ready`` is true."""
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + timeout
        while not self.eval(f"document.readyState === 'complete' && ({ready})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"page not ready: {ready}")
            time.sleep(0.1)

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def mouse(self, kind: str, x: float, y: float) -> None:
        """A real mouse event at viewport coordinates: ``move`` or ``click``."""
        if kind == "move":
            self.call("Input.dispatchMouseEvent", session=True, type="mouseMoved", x=x, y=y)
            return
        for event in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=event, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: str | os.PathLike[str], full: bool = False,
                   clip: tuple[float, float, float, float, float] | None = None) -> bytes:
        """A PNG of the viewport (the whole page, or ``clip``: x, y, width, height, scale), written to ``path``."""
        extra = {} if clip is None else {"clip": dict(zip(("x", "y", "width", "height", "scale"), clip))}
        data = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png",
                                          captureBeyondViewport=full or clip is not None, **extra)["data"])
        with open(path, "wb") as out:
            out.write(data)
        return data

    def console(self) -> list[str]:
        """Console messages, uncaught exceptions and log entries the page produced so far."""
        out = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                out.append(f"{params['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                            for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(params["exceptionDetails"])[:500])
            elif method == "Log.entryAdded":
                out.append(f"log {params['entry']['level']}: {params['entry']['text']}")
        return out

    def close(self) -> None:
        """End Chromium and remove its profile."""
        try:
            self.call("Browser.close", timeout=10)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
