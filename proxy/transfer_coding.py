"""Transfer codings of an upstream answer other than ``chunked`` (``Transfer-Encoding: gzip, chunked``), undone as
the body arrives.

A transfer coding belongs to the one connection it came over (RFC 9112 section 6.1) and its header is not relayed,
so the relay must pass on what the coding stands for: the decoded bytes. ``chunked`` itself is the parser's; what
is left are gzip and deflate, decoded here a bounded piece at a time (a few compressed bytes can stand for
gigabytes). Any other coding, or ``chunked`` before another one, is refused: the body could not be relayed as it is
meant.
"""

import asyncio
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator

import httpx

#: zlib's window bits for each transfer coding toolmend decodes (RFC 9110 section 8.4.1).
CODINGS = {b"gzip": 31, b"x-gzip": 31, b"deflate": 15}
#: Most decoded bytes made of one piece of input at a time.
DECODED_PIECE = 64 * 1024
#: Decoded bytes after which the relay gives the event loop a turn: a client that reads as fast as the decoding goes
#: never makes ``send`` wait, and a few kilobytes on the wire can decode to gigabytes (a bomb).
YIELD_EVERY = 1024 * 1024


def listed(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """Every coding ``Transfer-Encoding`` names, in order, lower-case."""
    return [token.strip().lower() for name, value in headers if name.lower() == b"transfer-encoding" for token in value.split(b",")]


def transfer_codings(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """The codings to undo, in the order they were applied: ``Transfer-Encoding`` without a final ``chunked`` (and
    without ``identity``). Raises ``httpx.RemoteProtocolError`` for a coding toolmend cannot undo."""
    codings = [token for token in listed(headers) if token and token != b"identity"]
    if codings and codings[-1] == b"chunked":
        codings.pop()
    for coding in codings:
        if coding not in CODINGS:
            raise httpx.RemoteProtocolError(f"the upstream sent its answer in a transfer coding toolmend cannot decode "
                                            f"({coding.decode('ascii', 'replace')[:40]!r})")
    return codings


class _Undo:
    """One coding, undone; a gzip body may hold several members one after the other."""

    def __init__(self, coding: bytes) -> None:
        self.coding, self.wbits = coding, CODINGS[coding]
        self.inflater = zlib.decompressobj(self.wbits)
        self.ended = True  # nothing begun: an empty body is whole

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data or not self.ended:
            self.ended = False
            try:
                out = self.inflater.decompress(data, DECODED_PIECE)
            except zlib.error as exc:
                raise httpx.DecodingError(f"the upstream's {self.coding.decode()} transfer coding is corrupt ({exc})") from None
            if out:
                yield out
            if self.inflater.eof:
                data, self.ended = self.inflater.unused_data, True
                self.inflater = zlib.decompressobj(self.wbits)
            else:
                data = self.inflater.unconsumed_tail
                if not data and len(out) < DECODED_PIECE:
                    return  # all taken, nothing held back: wait for more input


class Decoded(httpx.AsyncByteStream):
    """An answer's body with its transfer codings undone as it arrives; closing it closes the answer's own stream."""

    def __init__(self, stream: httpx.AsyncByteStream, codings: list[bytes]) -> None:
        self.stream = stream
        self.undo = [_Undo(coding) for coding in reversed(codings)]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        since = 0  # decoded bytes since the event loop last had a turn
        async for chunk in self.stream:
            pieces: Iterable[bytes] = (chunk,)
            for undo in self.undo:
                pieces = _fed(undo, pieces)
            for piece in pieces:
                yield piece
                since += len(piece)
                if since >= YIELD_EVERY:
                    since = 0
                    await asyncio.sleep(0)
        for undo in self.undo:
            if not undo.ended:
                raise httpx.DecodingError(f"the upstream's answer ended in the middle of its {undo.coding.decode()} transfer coding")

    async def aclose(self) -> None:
        await self.stream.aclose()


def _fed(undo: _Undo, pieces: Iterable[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield from undo.feed(piece)
