# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The report's compiled reader of plain OTLP/JSON trace files: one pass over the bytes, no JSON tree.

It reads the fields the store keeps (ids, name, kind, times, status, chosen span and resource
attributes) and writes them as CSV text for DuckDB's CSV reader; the store's SQL makes the
columns from that text with the same expressions as its SQL reader (``lens_report.engine``).
It takes only what it is sure to read as that reader does: any line it does not (invalid JSON,
an id that is not hex, an escaped or non-ASCII text it would keep, a line without spans, a
number that is not an integer where it keeps text, a key written twice, invalid UTF-8 or a lone
surrogate in any string) stops it with a reason,
and the store reads that whole file with the SQL reader instead. Without this module (no
compiler at install) the SQL reader reads every file: the same rows, more CPU.
"""

from libc.stdio cimport FILE, fopen, fclose, fwrite, fflush, fseek, setvbuf, SEEK_SET, _IOFBF
from posix.unistd cimport ftruncate
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcmp, memcpy, strlen
from libc.stdint cimport uint64_t, int64_t

cdef extern from "sys/types.h":
    ctypedef long ssize_t

cdef extern from "stdio.h" nogil:
    ssize_t getline(char **lineptr, size_t *n, FILE *stream)
    int fileno(FILE *stream)

__all__ = ["CsvSink", "SpanScanner", "MORE", "DONE", "FALLBACK"]

MORE = 0
"""``SpanScanner.read`` stopped at its span limit: call it again for the rest of the file."""
DONE = 1
"""``SpanScanner.read`` reached the end of the file."""
FALLBACK = -1
"""``SpanScanner.read`` met a line it does not read as the SQL reader does (``reason`` says which)."""

cdef enum:
    MORE_C = 0
    DONE_C = 1
    FALLBACK_C = -1

cdef enum:
    MAX_KEYS = 32      # distinct attribute keys asked for (span and resource each)
    MAX_DEPTH = 64     # nesting skipped past before a line is left to the SQL reader
    FLUSH_AT = 1 << 20
    READ_BUFFER = 1 << 20  # stdio's own is 4 KiB: 400,000 read() calls for a 1.6 GB run

# what a value read is
cdef enum Kind:
    K_ABSENT = 0
    K_STRING = 1       # plain ASCII text without escapes: kept as is
    K_INT = 2          # an integer number: kept as its text
    K_TRUE = 3
    K_FALSE = 4
    K_NULL = 5
    K_OTHER = 6        # anything the reader does not keep (object, array, fraction, escaped or non-ASCII text)

cdef struct Slice:
    const char *p
    Py_ssize_t n
    int kind

cdef struct Parser:
    const char *s
    const char *end
    const char *why    # set when the line is left to the SQL reader

cdef struct Out:
    char *buf
    size_t len
    size_t cap
    size_t flushed     # bytes written to f before buf
    FILE *f
    int failed

# ---- bytes ----------------------------------------------------------------------------------------

cdef inline void ws(Parser *p) noexcept nogil:
    cdef char c
    while p.s < p.end:
        c = p.s[0]
        if c == c' ' or c == b'\t' or c == b'\n' or c == b'\r':
            p.s += 1
        else:
            return

cdef inline bint fail(Parser *p, const char *why) noexcept nogil:
    if p.why == NULL:
        p.why = why
    return False

cdef inline bint expect(Parser *p, char c) noexcept nogil:
    ws(p)
    if p.s < p.end and p.s[0] == c:
        p.s += 1
        return True
    return fail(p, "invalid JSON")

cdef inline int hexval(char c) noexcept nogil:
    if c'0' <= c <= c'9':
        return c - c'0'
    if c'a' <= c <= c'f':
        return c - c'a' + 10
    if c'A' <= c <= c'F':
        return c - c'A' + 10
    return -1

# the bytes a string's scan stops at: the closing quote, a backslash, control characters, non-ASCII
cdef unsigned char STOP[256]
for _byte in range(256):
    STOP[_byte] = _byte < 0x20 or _byte >= 0x80 or _byte == 0x22 or _byte == 0x5C


cdef inline int hex4(const char *q) noexcept nogil:
    """The value of four hex digits at q, or -1."""
    cdef int i, v, d
    v = 0
    for i in range(4):
        d = hexval(q[i])
        if d < 0:
            return -1
        v = (v << 4) | d
    return v


cdef inline Py_ssize_t utf8_length(const unsigned char *q, const unsigned char *end) noexcept nogil:
    """The length of the well-formed UTF-8 sequence at q (lead byte >= 0x80), or 0: no overlong
    forms, no surrogates, nothing past U+10FFFF (what DuckDB's JSON reader refuses, the line is its)."""
    cdef unsigned char c = q[0]
    cdef unsigned char low = 0x80, high = 0xBF
    cdef Py_ssize_t n, i
    if 0xC2 <= c <= 0xDF:
        n = 2
    elif 0xE0 <= c <= 0xEF:
        n = 3
        if c == 0xE0:
            low = 0xA0
        elif c == 0xED:
            high = 0x9F
    elif 0xF0 <= c <= 0xF4:
        n = 4
        if c == 0xF0:
            low = 0x90
        elif c == 0xF4:
            high = 0x8F
    else:
        return 0
    if end - q < n or not (low <= q[1] <= high):
        return 0
    for i in range(2, n):
        if not (0x80 <= q[i] <= 0xBF):
            return 0
    return n


cdef bint read_string(Parser *p, Slice *out) noexcept nogil:
    """A JSON string at p.s (after whitespace): its bytes between the quotes; K_OTHER when escaped
    or not ASCII. Invalid UTF-8 and lone surrogate escapes fail the line, even in a string skipped."""
    cdef const char *q
    cdef unsigned char c
    cdef int kind = K_STRING
    cdef int unit
    cdef Py_ssize_t n
    ws(p)
    if p.s >= p.end or p.s[0] != c'"':
        return fail(p, "invalid JSON")
    q = p.s + 1
    while q < p.end:
        while q < p.end and not STOP[<unsigned char>q[0]]:
            q += 1
        if q >= p.end:
            break
        c = <unsigned char>q[0]
        if c == c'"':
            out.p = p.s + 1
            out.n = q - (p.s + 1)
            out.kind = kind
            p.s = q + 1
            return True
        if c < 0x20:
            return fail(p, "invalid JSON")
        if c >= 0x80:
            kind = K_OTHER
            n = utf8_length(<const unsigned char *>q, <const unsigned char *>p.end)
            if n == 0:
                return fail(p, "invalid UTF-8")
            q += n
            continue
        # a backslash
        kind = K_OTHER
        q += 1
        if q >= p.end:
            break
        c = <unsigned char>q[0]
        if c == c'u':
            if p.end - q < 5:
                break
            unit = hex4(q + 1)
            if unit < 0:
                return fail(p, "invalid JSON")
            q += 4
            if 0xDC00 <= unit <= 0xDFFF:
                return fail(p, "a lone surrogate escape")
            if 0xD800 <= unit <= 0xDBFF:  # a high surrogate: a low one must follow
                if p.end - q < 7 or q[1] != c'\\' or q[2] != c'u':
                    return fail(p, "a lone surrogate escape")
                unit = hex4(q + 3)
                if not (0xDC00 <= unit <= 0xDFFF):
                    return fail(p, "a lone surrogate escape")
                q += 6
        elif not (c == c'"' or c == c'\\' or c == c'/' or c == c'b' or c == c'f' or c == c'n' or c == c'r' or c == c't'):
            return fail(p, "invalid JSON")
        q += 1
    return fail(p, "invalid JSON")


cdef bint read_number(Parser *p, Slice *out) noexcept nogil:
    """A JSON number: K_INT for an integer without fraction or exponent, else K_OTHER."""
    cdef const char *q = p.s
    cdef int kind = K_INT
    if q < p.end and q[0] == c'-':
        q += 1
    if q >= p.end or not (c'0' <= q[0] <= c'9'):
        return fail(p, "invalid JSON")
    if q[0] == c'0':
        q += 1
        if p.s[0] == c'-':
            kind = K_OTHER  # -0: the engine may write it as 0
    else:
        while q < p.end and c'0' <= q[0] <= c'9':
            q += 1
    if q < p.end and q[0] == c'.':
        kind = K_OTHER
        q += 1
        if q >= p.end or not (c'0' <= q[0] <= c'9'):
            return fail(p, "invalid JSON")
        while q < p.end and c'0' <= q[0] <= c'9':
            q += 1
    if q < p.end and (q[0] == c'e' or q[0] == c'E'):
        kind = K_OTHER
        q += 1
        if q < p.end and (q[0] == c'+' or q[0] == c'-'):
            q += 1
        if q >= p.end or not (c'0' <= q[0] <= c'9'):
            return fail(p, "invalid JSON")
        while q < p.end and c'0' <= q[0] <= c'9':
            q += 1
    if q - p.s > 19:
        kind = K_OTHER  # past 19 digits (or -18) the engine may read a double and write it otherwise
    out.p = p.s
    out.n = q - p.s
    out.kind = kind
    p.s = q
    return True

cdef inline bint literal(Parser *p, const char *word, Py_ssize_t n) noexcept nogil:
    if p.end - p.s >= n and memcmp(p.s, word, n) == 0:
        p.s += n
        return True
    return fail(p, "invalid JSON")

# ---- objects --------------------------------------------------------------------------------------
# An object is read member by member: open() then, per member, member() (its key, and the parser
# after the colon) and next() (past the comma; False at the closing brace).

cdef inline int opens(Parser *p, char open, char close) noexcept nogil:
    """1: an object (``{``/``}``) or array (``[``/``]``) with members follows; 0: an empty one
    (consumed); -1: not one."""
    ws(p)
    if p.s >= p.end or p.s[0] != open:
        fail(p, "not the OTLP structure")
        return -1
    p.s += 1
    ws(p)
    if p.s < p.end and p.s[0] == close:
        p.s += 1
        return 0
    return 1

cdef inline int open_object(Parser *p) noexcept nogil:
    return opens(p, c'{', c'}')

cdef inline int open_array(Parser *p) noexcept nogil:
    return opens(p, c'[', c']')

cdef inline bint member(Parser *p, Slice *key) noexcept nogil:
    if not read_string(p, key):
        return False
    if key.kind != K_STRING:
        return fail(p, "an escaped or non-ASCII key")
    return expect(p, c':')

cdef inline int next_member(Parser *p, char close) noexcept nogil:
    """1: another member or item follows; 0: the closing bracket (consumed); -1: invalid."""
    ws(p)
    if p.s < p.end:
        if p.s[0] == c',':
            p.s += 1
            return 1
        if p.s[0] == close:
            p.s += 1
            return 0
    fail(p, "invalid JSON")
    return -1

cdef bint skip_value(Parser *p, int depth) noexcept nogil:
    """Past any JSON value."""
    cdef Slice s
    cdef char c, close
    cdef int more
    if depth > MAX_DEPTH:
        return fail(p, "JSON nested too deep")
    ws(p)
    if p.s >= p.end:
        return fail(p, "invalid JSON")
    c = p.s[0]
    if c == c'"':
        return read_string(p, &s)
    if c == c'{' or c == c'[':
        close = c'}' if c == c'{' else c']'
        more = opens(p, c, close)
        while more == 1:
            if c == c'{' and (not read_string(p, &s) or not expect(p, c':')):
                return False
            if not skip_value(p, depth + 1):
                return False
            more = next_member(p, close)
        return more == 0
    if c == c't':
        return literal(p, "true", 4)
    if c == c'f':
        return literal(p, "false", 5)
    if c == c'n':
        return literal(p, "null", 4)
    return read_number(p, &s)

cdef bint read_scalar(Parser *p, Slice *out) noexcept nogil:
    """Any value: strings, integers and literals by kind, anything else skipped as K_OTHER."""
    cdef char c
    ws(p)
    if p.s >= p.end:
        return fail(p, "invalid JSON")
    c = p.s[0]
    out.p = p.s
    out.n = 0
    if c == c'"':
        return read_string(p, out)
    if c == c't':
        out.kind = K_TRUE
        return literal(p, "true", 4)
    if c == c'f':
        out.kind = K_FALSE
        return literal(p, "false", 5)
    if c == c'n':
        out.kind = K_NULL
        return literal(p, "null", 4)
    if c == c'-' or (c'0' <= c <= c'9'):
        return read_number(p, out)
    out.kind = K_OTHER
    return skip_value(p, 1)

cdef inline bint key_is(Slice *k, const char *name, Py_ssize_t n) noexcept nogil:
    return k.n == n and memcmp(k.p, name, n) == 0

cdef int wanted_member(Parser *p, int *state, const char *name, Py_ssize_t n, bint *seen) noexcept nogil:
    """Skip an object's members up to the one named ``name``: 1 when the parser is at its value
    (read it, then call again), 0 at the object's end, -1 when the line fails (a key written
    twice too). ``state`` starts as :func:`open_object` returned (1 or 0) and is kept between calls."""
    cdef Slice key
    while True:
        if state[0] == 2:  # past a member's value: a comma or the end
            state[0] = next_member(p, c'}')
            if state[0] < 0:
                return -1
        if state[0] == 0:
            return 0
        if not member(p, &key):
            return -1
        state[0] = 2
        if key_is(&key, name, n):
            if seen[0]:
                fail(p, "a key written twice")
                return -1
            seen[0] = True
            return 1
        if not skip_value(p, 1):
            return -1

cdef inline bint is_null(Parser *p) noexcept nogil:
    ws(p)
    if p.end - p.s >= 4 and memcmp(p.s, "null", 4) == 0:
        p.s += 4
        return True
    return False

# ---- output ---------------------------------------------------------------------------------------

cdef bint out_reserve(Out *o, size_t n) noexcept nogil:
    cdef char *grown
    cdef size_t cap
    if o.len + n <= o.cap:
        return True
    cap = o.cap * 2 if o.cap else 1 << 16
    while cap < o.len + n:
        cap *= 2
    grown = <char *>realloc(o.buf, cap)
    if grown == NULL:
        o.failed = 1
        return False
    o.buf = grown
    o.cap = cap
    return True

cdef inline void out_bytes(Out *o, const char *b, size_t n) noexcept nogil:
    if out_reserve(o, n):
        memcpy(o.buf + o.len, b, n)
        o.len += n

cdef inline void out_char(Out *o, char c) noexcept nogil:
    if out_reserve(o, 1):
        o.buf[o.len] = c
        o.len += 1

cdef char PAIRS[200]
for _byte in range(100):
    PAIRS[2 * _byte] = 0x30 + _byte // 10
    PAIRS[2 * _byte + 1] = 0x30 + _byte % 10


cdef void out_uint(Out *o, uint64_t v) noexcept nogil:
    """``v`` in decimal (two digits a division)."""
    cdef char digits[24]
    cdef int n = 0
    cdef int pair
    if v == 0:
        out_char(o, c'0')
        return
    while v >= 100:
        pair = <int>(v % 100) * 2
        v //= 100
        digits[n] = PAIRS[pair + 1]
        digits[n + 1] = PAIRS[pair]
        n += 2
    if v >= 10:
        digits[n] = PAIRS[v * 2 + 1]
        digits[n + 1] = PAIRS[v * 2]
        n += 2
    else:
        digits[n] = <char>(c'0' + v)
        n += 1
    if out_reserve(o, n):
        while n:
            n -= 1
            o.buf[o.len] = digits[n]
            o.len += 1

cdef inline void out_text(Out *o, Slice *s) noexcept nogil:
    """A kept text as a quoted CSV field (it holds no quote: an escaped text is never kept); nothing for NULL."""
    if s.kind == K_STRING or s.kind == K_INT:
        out_char(o, c'"')
        out_bytes(o, s.p, s.n)
        out_char(o, c'"')
    elif s.kind == K_TRUE:
        out_bytes(o, "\"true\"", 6)
    elif s.kind == K_FALSE:
        out_bytes(o, "\"false\"", 7)

cdef bint out_flush(Out *o) noexcept nogil:
    if o.len and fwrite(o.buf, 1, o.len, o.f) != o.len:
        o.failed = 1
    o.flushed += o.len
    o.len = 0
    return not o.failed

# ---- the span fields ------------------------------------------------------------------------------

cdef struct Keys:
    int count                    # distinct keys
    const char *name[MAX_KEYS]
    Py_ssize_t size[MAX_KEYS]
    int fields                   # (key, field) pairs written, in order
    int key_of[MAX_KEYS * 3]
    int field_of[MAX_KEYS * 3]   # 0 stringValue, 1 intValue, 2 boolValue

cdef struct Attr:
    bint seen
    Slice value[3]

cdef bint read_value_object(Parser *p, Attr *into) noexcept nogil:
    """An attribute's ``value``: its stringValue, intValue and boolValue (NULL for the rest)."""
    cdef Slice key
    cdef int more, slot
    into.value[0].kind = into.value[1].kind = into.value[2].kind = K_ABSENT
    if is_null(p):
        return True
    more = open_object(p)
    if more < 0:
        return False
    while more == 1:
        if not member(p, &key):
            return False
        slot = -1
        if key_is(&key, "stringValue", 11):
            slot = 0
        elif key_is(&key, "intValue", 8):
            slot = 1
        elif key_is(&key, "boolValue", 9):
            slot = 2
        if slot < 0:
            if not skip_value(p, 1):
                return False
        else:
            if into.value[slot].kind != K_ABSENT:
                return fail(p, "a key written twice")
            if not read_scalar(p, &into.value[slot]):
                return False
        more = next_member(p, c'}')
    return more == 0

cdef bint read_attributes(Parser *p, Keys *keys, Attr *found) noexcept nogil:
    """An OTLP attribute list: the first entry of each asked-for key (as the SQL reader's first match)."""
    cdef Slice member_key, name
    cdef Attr entry
    cdef int more, inner, i
    cdef bint has_value
    if is_null(p):
        return True
    more = open_array(p)
    if more < 0:
        return False
    while more == 1:
        inner = open_object(p)
        if inner < 0:
            return False
        has_value = False
        name.kind = K_ABSENT
        entry.value[0].kind = entry.value[1].kind = entry.value[2].kind = K_ABSENT
        while inner == 1:
            if not member(p, &member_key):
                return False
            if key_is(&member_key, "key", 3):
                if name.kind != K_ABSENT:
                    return fail(p, "a key written twice")
                if not read_scalar(p, &name):
                    return False
                if name.kind != K_STRING and name.kind != K_NULL:
                    return fail(p, "an attribute key that is not plain text")
            elif key_is(&member_key, "value", 5):
                if has_value:
                    return fail(p, "a key written twice")
                has_value = True
                if not read_value_object(p, &entry):
                    return False
            elif not skip_value(p, 1):
                return False
            inner = next_member(p, c'}')
        if inner < 0:
            return False
        if name.kind == K_STRING:
            for i in range(keys.count):
                if keys.size[i] == name.n and memcmp(keys.name[i], name.p, name.n) == 0:
                    if not found[i].seen:
                        found[i].seen = True
                        found[i].value[0] = entry.value[0]
                        found[i].value[1] = entry.value[1]
                        found[i].value[2] = entry.value[2]
                    break
        more = next_member(p, c']')
    return more == 0


# ---- spans ----------------------------------------------------------------------------------------

cdef enum:
    # a span's own fields, read as text: the order of FIELD_NAME, then the status code
    F_TRACE, F_SPAN, F_PARENT, F_NAME, F_KIND, F_START, F_END, F_STATUS, F_COUNT

cdef struct SpanText:
    Slice field[F_COUNT]

cdef const char *FIELD_NAME[F_STATUS]
FIELD_NAME[:] = [b"traceId", b"spanId", b"parentSpanId", b"name", b"kind", b"startTimeUnixNano", b"endTimeUnixNano"]
cdef Py_ssize_t FIELD_SIZE[F_STATUS]
FIELD_SIZE[:] = [strlen(FIELD_NAME[i]) for i in range(F_STATUS)]


cdef inline bint read_field(Parser *p, Slice *into) noexcept nogil:
    if into.kind != K_ABSENT:
        return fail(p, "a key written twice")
    return read_scalar(p, into)

cdef bint read_span(Parser *p, Keys *keys, Attr *found, SpanText *t) noexcept nogil:
    cdef Slice key
    cdef int more, state, code, i, slot
    cdef bint attributes = False, status = False, seen_code = False, ok
    for i in range(F_COUNT):
        t.field[i].kind = K_ABSENT
    more = open_object(p)
    if more < 0:
        return False
    while more == 1:
        if not member(p, &key):
            return False
        slot = -1
        for i in range(F_STATUS):
            if key_is(&key, FIELD_NAME[i], FIELD_SIZE[i]):
                slot = i
                break
        if slot >= 0:
            ok = read_field(p, &t.field[slot])
        elif key_is(&key, "attributes", 10):
            if attributes:
                return fail(p, "a key written twice")
            attributes = True
            ok = read_attributes(p, keys, found)
        elif key_is(&key, "status", 6):
            if status:
                return fail(p, "a key written twice")
            status = True
            if is_null(p):
                ok = True
            else:
                state = open_object(p)
                if state < 0:
                    return False
                code = wanted_member(p, &state, "code", 4, &seen_code)
                while code == 1:
                    if not read_scalar(p, &t.field[F_STATUS]):
                        return False
                    code = wanted_member(p, &state, "code", 4, &seen_code)
                ok = code == 0
        else:
            ok = skip_value(p, 1)
        if not ok:
            return False
        more = next_member(p, c'}')
    return more == 0

cdef bint hex_id(Slice *s, Py_ssize_t digits, uint64_t *hi, uint64_t *lo) noexcept nogil:
    """A 16- or 32-digit hex id (any case) as integers; False for anything else (base64 ids are the SQL reader's)."""
    cdef Py_ssize_t i
    cdef int v
    cdef uint64_t a = 0, b = 0
    if s.kind != K_STRING or s.n != digits:
        return False
    for i in range(digits):
        v = hexval(s.p[i])
        if v < 0:
            return False
        if digits == 32 and i < 16:
            a = (a << 4) | <uint64_t>v
        else:
            b = (b << 4) | <uint64_t>v
    hi[0] = a
    lo[0] = b
    return True

cdef int unix_nanos(Slice *s, int64_t *value) noexcept nogil:
    """1: the non-negative int64 a time's text holds; 0: absent or null; -1: anything else."""
    cdef Py_ssize_t i
    cdef uint64_t v = 0
    if s.kind == K_ABSENT or s.kind == K_NULL:
        return 0
    if (s.kind != K_STRING and s.kind != K_INT) or s.n < 1 or s.n > 19:
        return -1
    for i in range(s.n):
        if not (c'0' <= s.p[i] <= c'9'):
            return -1
        v = v * 10 + <uint64_t>(s.p[i] - c'0')
    if v > <uint64_t>0x7FFFFFFFFFFFFFFF:
        return -1
    value[0] = <int64_t>v
    return 1

cdef inline bint kept(Slice *s) noexcept nogil:
    return s.kind != K_OTHER

cdef void write_fields(Out *o, Keys *keys, Attr *found) noexcept nogil:
    cdef int i, k
    for i in range(keys.fields):
        out_char(o, c',')
        k = keys.key_of[i]
        if found[k].seen:
            out_text(o, &found[k].value[keys.field_of[i]])

cdef bint fields_kept(Keys *keys, Attr *found) noexcept nogil:
    cdef int i, k
    for i in range(keys.fields):
        k = keys.key_of[i]
        if found[k].seen and not kept(&found[k].value[keys.field_of[i]]):
            return False
    return True

cdef inline void clear(Keys *keys, Attr *found) noexcept nogil:
    cdef int i
    for i in range(keys.count):
        found[i].seen = False


cdef class CsvSink:
    """Two CSV files the scanners write to, spans and resources, for one INSERT at a time.

    :meth:`flush` before the engine reads them, :meth:`reset` after; :meth:`mark` and
    :meth:`rewind` take back what a file wrote before it turned out to be the SQL reader's.
    """

    cdef Out spans_out
    cdef Out res_out
    cdef public long long spans
    """Spans written since the last :meth:`reset`."""
    cdef readonly str spans_path
    cdef readonly str resources_path

    def __cinit__(self, spans_path, resources_path):
        self.spans_out.buf = self.res_out.buf = NULL
        self.spans_out.len = self.spans_out.cap = self.res_out.len = self.res_out.cap = 0
        self.spans_out.failed = self.res_out.failed = 0
        self.spans_out.flushed = self.res_out.flushed = 0
        self.spans = 0
        self.spans_path = str(spans_path)
        self.resources_path = str(resources_path)
        self.spans_out.f = fopen(self.spans_path.encode(), "wb")
        self.res_out.f = fopen(self.resources_path.encode(), "wb")
        if self.spans_out.f == NULL or self.res_out.f == NULL:
            self.close()
            raise OSError(f"cannot write {self.spans_path!r} or {self.resources_path!r}")

    def flush(self):
        """Write what is buffered, so the files hold every row written since :meth:`reset`."""
        self._check()
        out_flush(&self.spans_out)
        out_flush(&self.res_out)
        if fflush(self.spans_out.f) != 0 or fflush(self.res_out.f) != 0:
            self.spans_out.failed = 1
        self._raise_failed()

    def mark(self):
        """Where the files end now (for :meth:`rewind`)."""
        return (self.spans_out.flushed + self.spans_out.len, self.res_out.flushed + self.res_out.len, self.spans)

    def rewind(self, mark):
        """Take back everything written after ``mark`` (from :meth:`mark`, since the last :meth:`reset`)."""
        cdef size_t spans_at, res_at
        spans_at, res_at, spans = mark
        self._check()
        if spans_at >= self.spans_out.flushed and res_at >= self.res_out.flushed:
            self.spans_out.len = spans_at - self.spans_out.flushed
            self.res_out.len = res_at - self.res_out.flushed
        else:
            self.flush()
            self._truncate(&self.spans_out, spans_at)
            self._truncate(&self.res_out, res_at)
        self.spans = spans

    def reset(self):
        """Empty both files (after the engine read them)."""
        self._check()
        self.spans_out.len = self.res_out.len = 0
        self._truncate(&self.spans_out, 0)
        self._truncate(&self.res_out, 0)
        self.spans = 0

    cdef _truncate(self, Out *o, size_t size):
        fflush(o.f)
        if ftruncate(fileno(o.f), size) != 0 or fseek(o.f, size, SEEK_SET) != 0:
            o.failed = 1
        o.flushed = size
        self._raise_failed()

    cdef _check(self):
        if self.spans_out.f == NULL:
            raise ValueError("the sink is closed")

    cdef _raise_failed(self):
        if self.spans_out.failed or self.res_out.failed:
            raise OSError(f"cannot write {self.spans_path!r} or {self.resources_path!r} (disk full?)")

    def close(self):
        """Close both files (idempotent); they stay on disk."""
        if self.spans_out.f != NULL:
            fclose(self.spans_out.f)
            self.spans_out.f = NULL
        if self.res_out.f != NULL:
            fclose(self.res_out.f)
            self.res_out.f = NULL
        free(self.spans_out.buf)
        free(self.res_out.buf)
        self.spans_out.buf = self.res_out.buf = NULL

    def __dealloc__(self):
        self.close()


cdef class SpanScanner:
    """Reads one plain OTLP/JSON trace file into a :class:`CsvSink`, a part at a time (see :meth:`read`).

    ``span_fields`` and ``resource_fields``: the (attribute key, field) pairs written after a
    span's own fields and after a resource's file and number, field 0 for ``stringValue``, 1 for
    ``intValue``, 2 for ``boolValue``; each is the first attribute of that key, as the SQL
    reader reads it. Lines are numbered as DuckDB's ``read_ndjson_objects`` numbers them:
    blank lines are not counted.
    """

    cdef FILE *f
    cdef char *stdio_buf  # the file's read buffer (freed after fclose)
    cdef char *buf
    cdef size_t buf_cap
    cdef int file_index
    cdef long long max_line
    cdef long long line_no
    cdef long long res_no
    cdef Keys span_keys
    cdef Keys res_keys
    cdef Attr span_found[MAX_KEYS]
    cdef Attr res_found[MAX_KEYS]
    cdef list _names
    cdef const char *_why
    cdef public str reason
    """Why the last :meth:`read` returned ``FALLBACK``, with the line number ("line 3: invalid JSON")."""
    cdef public long long spans
    """The spans read from the file so far."""

    def __cinit__(self, path, int file_index, long long max_line, span_fields, resource_fields):
        self.f = NULL
        self.stdio_buf = NULL
        self.buf = NULL
        self.buf_cap = 0
        self._names = []
        self.reason = None
        self.spans = 0
        self.file_index = file_index
        self.max_line = max_line
        self._keys(&self.span_keys, span_fields)
        self._keys(&self.res_keys, resource_fields)
        encoded = path.encode() if isinstance(path, str) else bytes(path)
        self.f = fopen(encoded, "rb")
        if self.f == NULL:
            raise OSError(f"cannot open {path!r}")
        self.stdio_buf = <char *>malloc(READ_BUFFER)
        if self.stdio_buf != NULL:  # else stdio's own
            setvbuf(self.f, self.stdio_buf, _IOFBF, READ_BUFFER)

    cdef _keys(self, Keys *keys, fields):
        keys.count = 0
        keys.fields = 0
        names = []
        for key, field in fields:
            if field not in (0, 1, 2):
                raise ValueError(f"field {field!r} of {key!r}: 0 (stringValue), 1 (intValue) or 2 (boolValue)")
            encoded = key.encode()
            if encoded not in names:
                if len(names) == MAX_KEYS:
                    raise ValueError(f"at most {MAX_KEYS} distinct keys")
                names.append(encoded)
            if keys.fields == MAX_KEYS * 3:
                raise ValueError(f"at most {MAX_KEYS * 3} fields")
            keys.key_of[keys.fields] = names.index(encoded)
            keys.field_of[keys.fields] = field
            keys.fields += 1
        for i, encoded in enumerate(names):
            keys.name[i] = <const char *>encoded
            keys.size[i] = len(encoded)
        keys.count = len(names)
        self._names.append(names)  # the pointers above point into these

    def read(self, CsvSink sink, long long max_spans):
        """Write the next lines' spans and resources to ``sink``, stopping after the line that takes
        ``sink.spans`` to ``max_spans`` or more.

        Returns ``MORE``, ``DONE`` or ``FALLBACK`` (then :attr:`reason` says why, and the file
        is the SQL reader's: take back what it wrote with the sink's ``rewind``).
        """
        cdef int status
        if self.f == NULL:
            raise ValueError("the scanner is closed")
        sink._check()
        self.reason = None
        with nogil:
            status = self._read(&sink.spans_out, &sink.res_out, &sink.spans, max_spans)
        sink._raise_failed()
        if status == FALLBACK_C:
            why = (<bytes>self._why).decode() if self._why != NULL else "not the OTLP structure"
            self.reason = f"line {self.line_no}: {why}"
        return status

    cdef int _read(self, Out *spans, Out *res, long long *written, long long max_spans) noexcept nogil:
        cdef ssize_t n
        cdef Py_ssize_t i
        cdef Parser p
        cdef long long before = self.spans
        self._why = NULL
        while True:
            n = getline(&self.buf, &self.buf_cap, self.f)
            if n < 0:
                written[0] += self.spans - before
                return DONE_C  # the end (a read error shows as a short file; the SQL reader would see the same)
            i = 0
            while i < n and (self.buf[i] == c' ' or self.buf[i] == b'\t' or self.buf[i] == b'\n' or self.buf[i] == b'\r'):
                i += 1
            if i == n:
                continue  # blank: not a line for DuckDB either
            self.line_no += 1
            if n > self.max_line:
                self._why = "a line longer than the reader's limit"
                written[0] += self.spans - before
                return FALLBACK_C
            p.s = self.buf
            p.end = self.buf + n
            p.why = NULL
            if not self._line(&p, spans, res):
                self._why = p.why
                if self._why == NULL:
                    self._why = "not the OTLP structure"
                written[0] += self.spans - before
                return FALLBACK_C
            written[0] += self.spans - before
            before = self.spans
            if spans.len > FLUSH_AT:
                out_flush(spans)
            if res.len > FLUSH_AT:
                out_flush(res)
            if spans.failed or res.failed:
                return DONE_C  # raised by read()
            if written[0] >= max_spans:
                return MORE_C

    cdef bint _line(self, Parser *p, Out *spans, Out *res) noexcept nogil:
        cdef int state, found
        cdef bint seen = False
        state = open_object(p)
        if state < 0:
            return False
        found = wanted_member(p, &state, "resourceSpans", 13, &seen)
        while found == 1:
            if not self._resource_spans(p, spans, res):
                return False
            found = wanted_member(p, &state, "resourceSpans", 13, &seen)
        if found < 0:
            return False
        if not seen:
            return fail(p, "a line without spans")
        ws(p)
        if p.s != p.end:
            return fail(p, "invalid JSON")
        return True

    cdef bint _resource_spans(self, Parser *p, Out *spans, Out *res) noexcept nogil:
        cdef int more, inner
        cdef Slice key
        cdef bint resource, scopes
        more = open_array(p)
        if more <= 0:
            return fail(p, "a line without spans")
        while more == 1:
            self.res_no += 1
            clear(&self.res_keys, self.res_found)
            resource = scopes = False
            inner = open_object(p)
            if inner <= 0:
                return fail(p, "a line without spans")
            while inner == 1:
                if not member(p, &key):
                    return False
                if key_is(&key, "resource", 8):
                    if resource:
                        return fail(p, "a key written twice")
                    resource = True
                    if not self._resource(p):
                        return False
                elif key_is(&key, "scopeSpans", 10):
                    if scopes:
                        return fail(p, "a key written twice")
                    scopes = True
                    if not self._scope_spans(p, spans):
                        return False
                elif not skip_value(p, 1):
                    return False
                inner = next_member(p, c'}')
            if inner < 0:
                return False
            if not scopes:
                return fail(p, "a line without spans")
            if not fields_kept(&self.res_keys, self.res_found):
                return fail(p, "a resource attribute the compiled reader does not keep (escaped, non-ASCII or nested)")
            out_uint(res, <uint64_t>self.file_index)
            out_char(res, c',')
            out_uint(res, <uint64_t>self.res_no)
            write_fields(res, &self.res_keys, self.res_found)
            out_char(res, c'\n')
            more = next_member(p, c']')
        return more == 0

    cdef bint _resource(self, Parser *p) noexcept nogil:
        cdef int state, found
        cdef bint seen = False
        if is_null(p):
            return True
        state = open_object(p)
        if state < 0:
            return False
        found = wanted_member(p, &state, "attributes", 10, &seen)
        while found == 1:
            if not read_attributes(p, &self.res_keys, self.res_found):
                return False
            found = wanted_member(p, &state, "attributes", 10, &seen)
        return found == 0

    cdef bint _scope_spans(self, Parser *p, Out *spans) noexcept nogil:
        cdef int more, state, found, items
        cdef bint seen
        more = open_array(p)
        if more <= 0:
            return fail(p, "a line without spans")
        while more == 1:
            seen = False
            state = open_object(p)
            if state < 0:
                return False
            found = wanted_member(p, &state, "spans", 5, &seen)
            while found == 1:
                items = open_array(p)
                if items <= 0:
                    return fail(p, "a line without spans")
                while items == 1:
                    if not self._span(p, spans):
                        return False
                    items = next_member(p, c']')
                if items < 0:
                    return False
                found = wanted_member(p, &state, "spans", 5, &seen)
            if found < 0:
                return False
            if not seen:
                return fail(p, "a line without spans")
            more = next_member(p, c']')
        return more == 0

    cdef bint _span(self, Parser *p, Out *o) noexcept nogil:
        cdef SpanText t
        cdef uint64_t hi = 0, lo = 0, span = 0, parent = 0, unused = 0
        cdef int64_t start = 0, end = 0
        cdef int has_start, has_end
        cdef bint has_parent
        cdef Slice *parent_id = &t.field[F_PARENT]
        clear(&self.span_keys, self.span_found)
        if not read_span(p, &self.span_keys, self.span_found, &t):
            return False
        if not hex_id(&t.field[F_TRACE], 32, &hi, &lo):
            return fail(p, "a traceId that is not 32 hex digits")
        if not hex_id(&t.field[F_SPAN], 16, &unused, &span):
            return fail(p, "a spanId that is not 16 hex digits")
        has_parent = not (parent_id.kind == K_ABSENT or parent_id.kind == K_NULL
                          or (parent_id.kind == K_STRING and parent_id.n == 0))
        if has_parent and not hex_id(parent_id, 16, &unused, &parent):
            return fail(p, "a parentSpanId that is not 16 hex digits")
        has_start = unix_nanos(&t.field[F_START], &start)
        has_end = unix_nanos(&t.field[F_END], &end)
        if has_start < 0 or has_end < 0:
            return fail(p, "a time that is not a non-negative int64")
        if not (kept(&t.field[F_NAME]) and kept(&t.field[F_KIND]) and kept(&t.field[F_STATUS])) or not fields_kept(&self.span_keys, self.span_found):
            return fail(p, "a text the compiled reader does not keep (escaped, non-ASCII or nested)")
        out_uint(o, <uint64_t>self.file_index)
        out_char(o, c',')
        out_uint(o, <uint64_t>self.line_no)
        out_char(o, c',')
        out_uint(o, <uint64_t>self.res_no)
        out_char(o, c',')
        out_uint(o, hi)
        out_char(o, c',')
        out_uint(o, lo)
        out_char(o, c',')
        out_uint(o, span)
        out_char(o, c',')
        if has_parent:
            out_uint(o, parent)
        out_char(o, c',')
        out_text(o, &t.field[F_NAME])
        out_char(o, c',')
        out_text(o, &t.field[F_KIND])
        out_char(o, c',')
        if has_start:  # its digits as read (validated: an int64; leading zeros read the same)
            out_bytes(o, t.field[F_START].p, t.field[F_START].n)
        out_char(o, c',')
        if has_end:
            out_bytes(o, t.field[F_END].p, t.field[F_END].n)
        out_char(o, c',')
        out_text(o, &t.field[F_STATUS])
        write_fields(o, &self.span_keys, self.span_found)
        out_char(o, c'\n')
        self.spans += 1
        return True

    def close(self):
        """Close the file (idempotent)."""
        if self.f != NULL:
            fclose(self.f)
            self.f = NULL
        free(self.stdio_buf)  # only once the file that reads into it is closed
        self.stdio_buf = NULL

    def __dealloc__(self):
        if self.f != NULL:
            fclose(self.f)
        free(self.stdio_buf)
        free(self.buf)

