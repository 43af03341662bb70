"""A child's output, captured with bounded memory (`soda.system.proc.run`): the
first and last `limit` characters survive, and the middle is counted and cut."""

from __future__ import annotations

import codecs
import threading


class Capture:
    """Decodes a byte stream as it arrives, keeping the first `limit` characters and
    the last `limit` of the rest: memory stays bounded while the final text keeps
    a head and a tail and knows exactly how much it cut."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 0)
        self.total = 0
        self._head = ""
        self._rest: list[str] = []
        self._rest_len = 0
        self._lock = threading.Lock()

    def drain(self, stream: object) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        read = stream.read1  # type: ignore[attr-defined]
        while chunk := read(65536):
            self._add(decoder.decode(chunk))
        self._add(decoder.decode(b"", final=True))
        stream.close()  # type: ignore[attr-defined]

    def _add(self, text: str) -> None:
        with self._lock:
            self.total += len(text)
            room = self.limit - len(self._head)
            if room > 0:
                self._head += text[:room]
                text = text[room:]
            if text:
                self._rest.append(text)
                self._rest_len += len(text)
            if self._rest_len > 2 * self.limit + 65536:
                kept = "".join(self._rest)[-self.limit :] if self.limit else ""
                self._rest, self._rest_len = [kept], len(kept)

    def text(self) -> str:
        with self._lock:
            whole = self._head + "".join(self._rest)
            total = self.total
        if total <= self.limit:
            return whole
        head_len = self.limit // 2
        tail_len = self.limit - head_len
        tail = whole[-tail_len:] if tail_len else ""
        cut = total - head_len - tail_len
        return f"{whole[:head_len]}\n[... {cut} characters cut ...]\n{tail}"
