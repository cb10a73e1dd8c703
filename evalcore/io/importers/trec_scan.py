"""The compiled tokenizer of TREC files: one pass over the bytes of a piece, fields to integer codes.

A piece is a run of whole lines (it ends after a ``\\n`` or at the end of the
file). Fields are runs of bytes that are not C ``isspace`` (space and bytes
9-13), as trec_eval splits them; lines end at ``\\n``; blank lines and lines
whose first field starts with ``#`` are skipped. Of each kept line the qid
and docno fields become codes in two ``KeyTable`` hash tables that outlive
the piece (codes in order of first appearance), and the value field (score
or grade) is copied into a compact token buffer, parsed afterwards by Arrow.
Nothing here reads files: ``trec.py`` feeds the pieces.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: the most fields of a line ``tokenize_piece`` keeps the spans of (TREC layouts have 4 or 6)
MAX_FIELDS = 8


class KeyTable:
    """Distinct byte strings (keys), each with a code, in an open-addressing hash table whose slot holds all a
    lookup of a short key reads: one cache line, not three.

    ``slots[i]`` = (hash, code | length << 40, first 8 key bytes, next 8; zero
    padded), code -1 where empty. With ``parts`` > 1 the table is that many
    equal regions, a key's region chosen by high bits of its hash, each kept
    at most half full: a piece's keys are then looked up region by region
    (``code_keys``), each region small enough to stay in cache,
    where one table of a million keys would cost a memory round trip per
    lookup. Key ``c`` is ``arena[offsets[c]:offsets[c + 1]]`` (longer keys are
    compared there) and ``first_line[c]`` the line it first appeared on.
    Codes are in order of first appearance with one region, in no set order
    with several.
    """

    def __init__(self, slots: int = 1 << 12, arena: int = 1 << 16, parts: int = 1):
        self.parts = parts
        self.slots = empty_slots(slots * parts)
        self.held = np.zeros(parts, dtype=np.int64)   # keys in each region
        self.offsets = np.zeros(slots * parts // 2 + 1, dtype=np.int64)
        self.first_line = np.zeros(slots * parts // 2, dtype=np.int64)
        self.arena = np.zeros(arena, dtype=np.uint8)
        self.count = 0

    def reserve(self, keys: int, key_bytes: int) -> None:
        """Room for ``keys`` more keys of ``key_bytes`` bytes in all: with one region, slots for all of them
        (``encode_keys``); with several, only the key store, the regions growing as they fill
        (``encode_in_order`` stops, ``grow``), so the table stays near twice the distinct keys."""
        if self.parts == 1:
            size = self.slots.shape[0]
            while 2 * (self.count + keys) > size:
                size *= 2
            if size > self.slots.shape[0]:
                self.slots = rehashed(self.slots, 1, size)
        if self.offsets.size < self.count + keys + 1:
            self.offsets = _resized(self.offsets, max(2 * self.offsets.size, self.count + keys + 1))
            self.first_line = _resized(self.first_line, self.offsets.size - 1)
        need = int(self.offsets[self.count]) + key_bytes
        if need > self.arena.size:
            self.arena = _resized(self.arena, max(2 * self.arena.size, need))

    def grow(self) -> None:
        """Every region doubled (its keys placed again)."""
        self.slots = rehashed(self.slots, self.parts, 2 * (self.slots.shape[0] // self.parts))

    def keys(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, bytes) of the keys, code order: the buffers of an Arrow binary array."""
        return self.offsets[:self.count + 1], self.arena[:self.offsets[self.count]]


def empty_slots(size: int) -> np.ndarray:
    """A slot table of ``size`` empty slots (code -1)."""
    slots = np.zeros((size, 4), dtype=np.int64)
    slots[:, 1] = -1
    return slots


def _resized(values: np.ndarray, size: int) -> np.ndarray:
    """``values`` copied into the start of a zeroed array of ``size`` entries."""
    out = np.zeros(size, dtype=values.dtype)
    out[:values.size] = values
    return out


#: the hash bits that choose a key's region (``KeyTable.parts``); the bits below choose its slot there
PART_SHIFT = 44


@njit(cache=True, nogil=True)
def rehashed(slots, parts, size):
    """The occupied ``slots`` (``parts`` equal regions) placed in regions of ``size`` slots (a power of two)."""
    out = np.zeros((parts * size, 4), dtype=np.int64)
    out[:, 1] = -1
    mask = size - 1
    for s in range(slots.shape[0]):
        if slots[s, 1] >= 0:
            h = slots[s, 0]
            base = ((h >> PART_SHIFT) & (parts - 1)) * size
            i = h & mask
            while out[base + i, 1] >= 0:
                i = (i + 1) & mask
            out[base + i, :] = slots[s, :]
    return out


@njit(cache=True, nogil=True, inline="always")
def is_space(b) -> bool:
    """C ``isspace`` in the "C" locale: space, \\t, \\n, \\v, \\f, \\r."""
    return b == 32 or (b >= 9 and b <= 13)


@njit(cache=True, nogil=True)
def word(buf, start, stop):
    """Bytes ``buf[start:stop]`` (at most 8) as one little-endian int64, zero padded."""
    w = 0
    for j in range(stop - start):
        w |= np.int64(buf[start + j]) << (8 * j)
    return w


#: the longest strings ``packed_keys`` orders (8 + 7 bytes; the last byte of the second word is the length)
PACKED_BYTES = 15


@njit(cache=True, nogil=True)
def packed_keys(offsets, data, high, low):
    """Strings ``data[offsets[k]:offsets[k + 1]]`` (at most PACKED_BYTES bytes) as two big-endian words whose
    (high, low) order is the strings' byte order: bytes 0-7 zero padded, then bytes 8-14 and the length.

    Zero padding ties a string with its extension by NUL bytes only; the length, compared last, puts the
    shorter (the prefix) first, as byte order does.
    """
    for k in range(high.size):
        a = offsets[k]
        n = offsets[k + 1] - a
        h = np.uint64(0)
        for j in range(8):
            h = h << np.uint64(8)
            if j < n:
                h |= np.uint64(data[a + j])
        w = np.uint64(0)
        for j in range(8, PACKED_BYTES):
            w = w << np.uint64(8)
            if j < n:
                w |= np.uint64(data[a + j])
        high[k] = h
        low[k] = (w << np.uint64(8)) | np.uint64(n)


@njit(cache=True, nogil=True)
def span_hash(buf, start, stop, w0, w1):
    """A 64-bit hash of ``buf[start:stop]`` (its first 16 bytes given as words ``w0``/``w1``), as int64."""
    h = np.uint64(stop - start) * np.uint64(0x9E3779B97F4A7C15)
    h = (h ^ np.uint64(w0)) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(31)) ^ np.uint64(w1)) * np.uint64(0x94D049BB133111EB)
    for i in range(start + 16, stop):   # keys longer than 16 bytes: the rest byte by byte (FNV-1a)
        h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
    # a full avalanche last: the products above carry a byte's change only upwards, and the table's slot
    # comes from the low bits (keys alike in their first bytes, DOC0000001, DOC0000002, ... crowded them)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return np.int64(h & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit(cache=True, nogil=True)
def key_code(buf, starts, ends, lines, k, slots, offsets, first_line, arena, count):
    """(code of key k, ``buf[starts[k]:ends[k]]``, keys held now) in a one-region table: its code, added as
    the next one when new. The caller makes sure there is room for one more key of this length."""
    start, stop = starts[k], ends[k]
    w0 = word(buf, start, min(stop, start + 8))
    w1 = word(buf, min(stop, start + 8), min(stop, start + 16))
    h = span_hash(buf, start, stop, w0, w1)
    return code_in_region(buf, starts, lines, k, h, w0, w1, stop - start, slots, 0, slots.shape[0] - 1, offsets,
                          first_line, arena, count)


@njit(cache=True, nogil=True)
def code_in_region(buf, starts, lines, k, h, w0, w1, n, slots, base, mask, offsets, first_line, arena, count,
                   can_add=True):
    """``key_code`` for key k of length ``n`` whose hash and first words are known, in the region
    ``slots[base:base + mask + 1]``. Its start and line are read only when needed (a new key, or one longer
    than a slot holds): the usual lookup touches its slot and nothing else. A new key when not ``can_add``
    (the region is full): (-1, count), nothing added."""
    i = h & mask
    while True:
        packed = slots[base + i, 1]
        if packed < 0:
            if not can_add:
                return -1, count
            slots[base + i, 0], slots[base + i, 1], slots[base + i, 2], slots[base + i, 3] = \
                h, count | (n << 40), w0, w1
            at, start = offsets[count], starts[k]
            for j in range(n):  # loops, not slice assignment: numba's checks for overlap cost more than the copy
                arena[at + j] = buf[start + j]
            offsets[count + 1] = at + n
            first_line[count] = lines[k]
            return count, count + 1
        if slots[base + i, 0] == h and (packed >> 40) == n and slots[base + i, 2] == w0 and slots[base + i, 3] == w1:
            code = packed & 0xFFFFFFFFFF
            if n <= 16:  # the slot held all of the key
                return code, count
            same = True
            at, start = offsets[code], starts[k]
            for j in range(16, n):
                if arena[at + j] != buf[start + j]:
                    same = False
                    break
            if same:
                return code, count
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def last_newline(buf):
    """The position of the last ``\\n`` in ``buf``, -1 if none: a piece's end (``bytes.rfind`` needs a copy)."""
    for i in range(buf.size - 1, -1, -1):
        if buf[i] == 10:
            return i
    return -1


@njit(cache=True, nogil=True)
def tokenize_piece(buf, fields, more_ignored, wanted, line, spans, lines):
    """Split ``buf`` (whole lines; ``line`` the number of its first) into the kept lines' wanted fields.

    Column k of ``spans`` (6 rows: each a contiguous array the coding passes
    take as it is) gets (start, end) of fields ``wanted[0]``, ``wanted[1]``
    and ``wanted[2]`` of the k-th kept line, ``lines[k]`` its number. Returns
    (kept lines, line number of the first line with a wrong field count or
    -1, the number of the line after the piece); tokenising stops at a wrong
    field count. The line count comes from here: ``bytes.count`` holds the GIL.
    """
    token_start = np.empty(MAX_FIELDS, dtype=np.int64)
    token_end = np.empty(MAX_FIELDS, dtype=np.int64)
    end = buf.size
    pos, row = 0, 0
    while pos < end:
        n = 0
        i = pos
        while True:
            while i < end and buf[i] != 10 and is_space(buf[i]):  # the whitespace before a field
                i += 1
            if i >= end or buf[i] == 10:
                break
            n += 1
            if n <= MAX_FIELDS:
                token_start[n - 1] = i
            # a field's bytes: every byte above 32 is in it (one comparison each); a lower one ends it only
            # when it is whitespace (other control bytes belong to the field, as C isspace says)
            while i < end:
                b = buf[i]
                if b > 32:
                    i += 1
                elif b == 10 or is_space(b):
                    break
                else:
                    i += 1
            if n <= MAX_FIELDS:
                token_end[n - 1] = i
        if n and buf[token_start[0]] != 35:  # not blank, not a '#' line
            if n < fields or (n > fields and not more_ignored):
                return row, line, line
            for f in range(3):
                spans[2 * f, row], spans[2 * f + 1, row] = token_start[wanted[f]], token_end[wanted[f]]
            lines[row] = line
            row += 1
        pos = i + 1
        line += 1
    return row, -1, line


#: lookups ahead whose slot is loaded early: the table is far larger than the caches, and independent
#: loads issued ahead overlap their misses instead of waiting for each in turn
AHEAD = 8


@njit(cache=True, nogil=True)
def encode_keys(buf, starts, ends, lines, codes, slots, offsets, first_line, arena, count):
    """``codes[k]`` = the code of key ``buf[starts[k]:ends[k]]`` (new keys added); returns (the keys held,
    a value to ignore: the prefetching loads feed it, so the compiler keeps them).

    A key equal to the previous one is not looked up again (a run lists a
    query's lines together). The caller reserved room for every key.
    """
    mask = slots.shape[0] - 1
    touched = 0
    last_start, last_stop, last = 0, -1, -1
    for k in range(starts.size):
        if k + AHEAD < starts.size:  # touch a later key's first slot (hash of its first 8 bytes only: cheap)
            a, z = starts[k + AHEAD], ends[k + AHEAD]
            w0 = word(buf, a, min(z, a + 8))
            w1 = word(buf, min(z, a + 8), min(z, a + 16))
            touched ^= slots[span_hash(buf, a, z, w0, w1) & mask, 1]
        a, z = starts[k], ends[k]
        same = z - a == last_stop - last_start
        if same:
            for j in range(z - a):
                if buf[a + j] != buf[last_start + j]:
                    same = False
                    break
        if not same:
            last, count = key_code(buf, starts, ends, lines, k, slots, offsets, first_line, arena, count)
            last_start, last_stop = a, z
        codes[k] = last
    return count, touched


@njit(cache=True, nogil=True)
def hash_keys(buf, starts, ends, parts, hashes, w0s, w1s, per_part):
    """Each key's hash and first two words (``span_hash``, ``word``), and how many keys fall in each region."""
    for k in range(starts.size):
        a, z = starts[k], ends[k]
        w0 = word(buf, a, min(z, a + 8))
        w1 = word(buf, min(z, a + 8), min(z, a + 16))
        h = span_hash(buf, a, z, w0, w1)
        hashes[k], w0s[k], w1s[k] = h, w0, w1
        per_part[(h >> PART_SHIFT) & (parts - 1)] += 1


def code_keys(table: KeyTable, buf, starts, ends, lines, codes) -> None:
    """``codes[k]`` = the code of key ``buf[starts[k]:ends[k]]`` in a table of several regions (new keys
    added): hashed, put in region order, then looked up a region at a time; a region that fills up stops
    the pass, the table doubles and the pass goes on where it stopped."""
    n = starts.size
    hashes, w0s, w1s = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    per_part = np.zeros(table.parts, dtype=np.int64)
    hash_keys(buf, starts, ends, table.parts, hashes, w0s, w1s, per_part)
    table.reserve(n, int((ends - starts).sum()))
    start, order, ph, p0, p1, plen = region_order(starts, ends, hashes, w0s, w1s, per_part, table.parts)
    at = 0
    while at >= 0:
        table.count, at = encode_in_order(buf, starts, lines, start, order, ph, p0, p1, plen, at, codes,
                                          table.slots, table.parts, table.held, table.offsets, table.first_line,
                                          table.arena, table.count)
        if at >= 0:
            table.grow()


@njit(cache=True, nogil=True)
def region_order(starts, ends, hashes, w0s, w1s, per_part, parts):
    """The keys in region order, file order within a region (a stable counting sort): (first position of
    each region, and per position the key, its hash, words and length), so that the lookups read them in
    sequence."""
    n = starts.size
    start = np.zeros(parts + 1, dtype=np.int64)
    for p in range(parts):
        start[p + 1] = start[p] + per_part[p]
    fill = start[:parts].copy()
    order, ph = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    p0, p1, plen = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for k in range(n):
        p = (hashes[k] >> PART_SHIFT) & (parts - 1)
        f = fill[p]
        order[f], ph[f], p0[f], p1[f], plen[f] = k, hashes[k], w0s[k], w1s[k], ends[k] - starts[k]
        fill[p] = f + 1
    return start, order, ph, p0, p1, plen


@njit(cache=True, nogil=True)
def encode_in_order(buf, starts, lines, start, order, ph, p0, p1, plen, j0, codes, slots, parts, held, offsets,
                    first_line, arena, count):
    """``codes[order[j]]`` = the code of each key from position ``j0`` on (``region_order``), region by
    region, so a region's slots stay in cache while its keys are looked up; new keys are added, each region
    kept at most half full. Returns (keys held, the position where a new key found its region full, or -1
    when every key has its code): the caller grows the table and goes on from there."""
    size = slots.shape[0] // parts
    mask = size - 1
    for p in range(parts):
        base = p * size
        for j in range(max(start[p], j0), start[p + 1]):
            k = order[j]
            if plen[j] <= 16:  # the usual lookup, inline: a short key already held (a call, even inlined, costs 6x)
                h, i, found = ph[j], ph[j] & mask, -1
                while True:
                    packed = slots[base + i, 1]
                    if packed < 0:
                        break
                    if slots[base + i, 0] == h and (packed >> 40) == plen[j] and slots[base + i, 2] == p0[j] \
                            and slots[base + i, 3] == p1[j]:
                        found = packed & 0xFFFFFFFFFF
                        break
                    i = (i + 1) & mask
                if found >= 0:
                    codes[k] = found
                    continue
            before = count
            code, count = code_in_region(buf, starts, lines, k, ph[j], p0[j], p1[j], plen[j], slots, p * size,
                                         size - 1, offsets, first_line, arena, count, 2 * (held[p] + 1) <= size)
            if code < 0:
                return count, j
            held[p] += count - before
            codes[k] = code
    return count, -1


@njit(cache=True, nogil=True)
def recode(codes, new_code):
    """``codes[k] = new_code[codes[k]]`` in place."""
    for k in range(codes.size):
        codes[k] = new_code[codes[k]]


@njit(cache=True, nogil=True)
def gather_tokens(buf, starts, ends, offsets, values):
    """Tokens ``buf[starts[k]:ends[k]]`` packed into ``values``, ``offsets`` (k + 1 entries) their bounds."""
    at = 0
    offsets[0] = 0
    for k in range(starts.size):
        for j in range(starts[k], ends[k]):
            values[at] = buf[j]
            at += 1
        offsets[k + 1] = at


@njit(cache=True, nogil=True)
def kept_lines(buf, line, fields, more_ignored, rows, row, out):
    """Line numbers of chosen kept lines: ``out[j]`` = the line of row ``rows[j]`` (``rows`` ascending).

    Counts kept lines as ``scan_piece`` does, from row ``row`` at line
    ``line`` (the piece's first); returns (next row, line after the piece).
    The error path only: it finds the lines that problems name.
    """
    j = np.searchsorted(rows, row)
    pos, end = 0, buf.size
    while pos < end:
        n = 0
        inside = False
        first = -1
        i = pos
        while i < end and buf[i] != 10:
            if is_space(buf[i]):
                inside = False
            elif not inside:
                n += 1
                if n == 1:
                    first = i
                inside = True
            i += 1
        if n >= fields and buf[first] != 35 and (n == fields or more_ignored):
            while j < rows.size and rows[j] == row:
                out[j] = line
                j += 1
            row += 1
        pos = i + 1
        line += 1
    return row, line
