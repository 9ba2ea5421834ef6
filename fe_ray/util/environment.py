"""Process-environment helpers of FastEstimator's ``fe.util``: silencing or teeing console output, timing, the
banner, notebook detection and listing data files."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import ContextDecorator
from types import TracebackType
from typing import IO, Any


class Suppressor:
    """A context that silences everything written to stdout and stderr inside it, by Python and by C libraries
    alike (it redirects file descriptors 1 and 2, not only ``sys.stdout``).

    ``with fe.util.Suppressor(): noisy()`` prints nothing.

    Args:
        allow_pyprint: Let Python's own ``print``/``sys.stdout`` writes through (to the real stdout) and silence
            only output from native code.
        show_if_exception: Keep the silenced output, and print it to the real stdout if the block raises, so that a
            failure comes with its context.
    """

    def __init__(self, allow_pyprint: bool = False, show_if_exception: bool = False) -> None:
        self.allow_pyprint = allow_pyprint
        self.show_if_exception = show_if_exception
        self._py_streams: tuple[Any, Any] | None = None
        self._saved_fds: list[int] = []
        self._sink: IO[bytes] | None = None

    def __enter__(self) -> Suppressor:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()  # what was printed before the block must still come out
            except (AttributeError, ValueError):
                pass
        self._py_streams = (sys.stdout, sys.stderr)
        # A real file (not /dev/null) when the output may have to be shown later.
        self._sink = (tempfile.TemporaryFile() if self.show_if_exception else open(os.devnull, "wb"))  # noqa: SIM115
        self._saved_fds = [os.dup(1), os.dup(2)]
        os.dup2(self._sink.fileno(), 1)
        os.dup2(self._sink.fileno(), 2)
        sys.stdout = sys.stderr = self
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._sink is not None and self._py_streams is not None, "__exit__ without __enter__"
        os.dup2(self._saved_fds[0], 1)
        os.dup2(self._saved_fds[1], 2)
        sys.stdout, sys.stderr = self._py_streams
        try:
            # The end of an iteration is no error to show the hidden output for (FastEstimator's rule).
            if exc_type is not None and self.show_if_exception and \
                    not issubclass(exc_type, (StopIteration, StopAsyncIteration)):
                self._sink.seek(0)
                captured = self._sink.read()
                if captured:
                    os.write(self._saved_fds[0], captured)
        finally:
            for fd in self._saved_fds:
                os.close(fd)
            self._saved_fds = []
            self._sink.close()
            self._sink = None

    def write(self, text: str) -> int:
        """Receive a Python-level write while suppressed: pass it to the real stdout with ``allow_pyprint``, keep
        it with ``show_if_exception``, else drop it."""
        if self.allow_pyprint and self._saved_fds:
            os.write(self._saved_fds[0], text.encode("utf-8", "replace"))
        elif self._sink is not None and self.show_if_exception:
            os.write(1, text.encode("utf-8", "replace"))  # fd 1 is the sink here: keeps C and Python output in order
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered at the Python level."""

    def isatty(self) -> bool:
        return False


class LogSplicer:
    """A context that appends everything printed to ``sys.stdout`` inside it to ``log_path``, while still printing it.

    Args:
        log_path: The file to append to (created if missing).
    """

    def __init__(self, log_path: str | os.PathLike[str]) -> None:
        self.log_path = os.fspath(log_path)
        self.stdout: Any = None
        self.log_file: IO[str] | None = None

    def __enter__(self) -> LogSplicer:
        self.log_file = open(self.log_path, "a")  # noqa: SIM115 - closed in __exit__
        self.stdout = sys.stdout
        sys.stdout = self
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.stdout = self.stdout
        assert self.log_file is not None, "__exit__ without __enter__"
        self.log_file.close()

    def write(self, output: str) -> int:
        assert self.log_file is not None, "write outside the LogSplicer's block"
        self.log_file.write(output)
        return self.stdout.write(output)

    def flush(self) -> None:
        self.stdout.flush()
        if self.log_file is not None:
            self.log_file.flush()

    def getvalue(self) -> Any:
        """What the stream the splicer writes through holds, where it keeps its text (e.g. a ``StringIO``)."""
        return self.stdout.getvalue()


class Timer(ContextDecorator):
    """Time a block or a function and print ``"<name> took <seconds> seconds"``.

    ``with fe.util.Timer(): work()`` or ``@fe.util.Timer("T2")`` on a function. The last duration stays in
    ``interval`` (``start``/``end`` are ``time.perf_counter`` readings).

    FastEstimator prints with ``tf.print`` (to stderr); fe_ray prints to stdout with ``print``, so that timing a
    torch program does not load TensorFlow.

    Args:
        name: The label of the printed line.
    """

    def __init__(self, name: str = "Task") -> None:
        self.name = name
        self.start: float | None = None
        self.end: float | None = None
        self.interval: float | None = None

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end = time.perf_counter()
        assert self.start is not None, "__exit__ without __enter__"
        self.interval = self.end - self.start
        print(f"{self.name} took {self.interval} seconds", flush=True)


_BANNER = """\
 +------------------------------------------------+
 |   FastEstimator  (fe_ray)                      |
 |   data-parallel on Ray, for PyTorch and TF     |
 +------------------------------------------------+"""


def draw() -> None:
    """Print the library's banner (FastEstimator draws its name with pyfiglet; fe_ray prints a plain box, without
    that dependency)."""
    print(_BANNER)


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter notebook (or qtconsole) kernel.

    IPython is only consulted if it is already imported: a notebook kernel always has it loaded.
    """
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    return type(get_ipython()).__name__ == "ZMQInteractiveShell"


def list_files(root_dir: str | os.PathLike[str], file_extension: str | None = None,
               recursive_search: bool = True) -> list[str]:
    """The paths of the files under ``root_dir`` (joined to it), skipping hidden names (a leading ``.``).

    Args:
        root_dir: The folder to list.
        file_extension: Keep only files whose name ends with it (``".png"``), or None for every file.
        recursive_search: Also list the files in sub-folders.

    Raises:
        FileNotFoundError: If ``root_dir`` does not exist.
        ValueError: If ``root_dir`` is a file (FastEstimator raises AssertionError for a path that is no folder).
        TypeError: If ``file_extension`` is not a string.

    Sub-folders are visited in sorted order, so the listing is the same on every run.
    """
    # The same walk as the directory datasets, so both see the same files.
    from fe_ray.dataset.dir_dataset import _list_files

    root, found, _ = _list_files(root_dir, file_extension, recursive_search, owner="list_files")
    return [os.path.join(root, path) for paths in found.values() for path in paths]
