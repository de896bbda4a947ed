"""Starting Debian's Chromium headless for the harness's pages, and stopping it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ..errors import SluiceError

#: Where Debian's package puts it; PATH is searched first.
CANDIDATES = ("chromium", "chromium-browser", "/usr/bin/chromium")


def executable() -> str:
    """The Chromium binary, or one line saying how to get it."""
    env = os.environ.get("SLUICE_CHROMIUM")
    if env:
        return env
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise SluiceError(
        "Chromium not found: install Debian's package (apt-get install chromium; `make setup` "
        "does) or set SLUICE_CHROMIUM to the binary"
    )


def flags(user_data_dir: Path, fake_video: Path | None,
          event_log: Path | None = None) -> list[str]:  # fmt: skip
    """Headless Chromium for one page: no sandbox (it runs as root here), loopback ICE
    candidates allowed and not hidden behind mDNS names, media without a user gesture, a fake
    camera (with ``fake_video``, that y4m file; else Chromium's test pattern). With
    ``event_log`` (an existing directory), Chromium writes libwebrtc's RTC event log of every
    peer connection there (``event_log_<date>_<time>_<renderer>_<pc>.log``, every 5 s; what
    is pending when the connection closes is lost)."""
    out = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--mute-audio",
        "--disable-dev-shm-usage",
        f"--user-data-dir={user_data_dir}",
        "--allow-loopback-in-peer-connection",
        "--disable-features=WebRtcHideLocalIpsWithMdns",
        "--autoplay-policy=no-user-gesture-required",
        # Headless pages are hidden: keep timers and rendering at full rate.
        "--disable-background-timer-throttling",
        "--disable-renderer-backgrounding",
        "--disable-backgrounding-occluded-windows",
    ]
    # A page with a media permission gets loopback candidates (the receiver asks for the
    # fake camera once for that).
    out += ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
    if fake_video is not None:
        out.append(f"--use-file-for-fake-video-capture={fake_video}")
    if event_log is not None:
        out.append(f"--webrtc-event-logging={event_log}")
    return out


class Browser:
    """One headless Chromium process showing one page, with its own profile directory."""

    def __init__(self, url: str, fake_video: Path | None, log_path: Path,
                 event_log: Path | None = None) -> None:  # fmt: skip
        self.profile = Path(tempfile.mkdtemp(prefix="sluice-chromium-"))
        self.log = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        cmd = [executable(), *flags(self.profile, fake_video, event_log), url]
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as e:
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)
            raise SluiceError(f"cannot start Chromium ({cmd[0]}): {e.strerror or e}") from None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Stops the browser and everything it started (its process group)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
