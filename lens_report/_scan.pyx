# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The report's compiled reader of plain OTLP/JSON trace files: one pass over the bytes, no JSON tree.

It reads the fields the store keeps (ids, name, kind, times, status, chosen span and resource
attributes) into columns in memory, which DuckDB scans through the Arrow C stream interface
(``__arrow_c_stream__``: no pyarrow, no text to parse again); the store's SQL makes its columns
from them with the same expressions as its SQL reader (``lens_report.engine``).
It takes only what it is sure to read as that reader does: any line it does not (invalid JSON,
an id that is not hex, an escaped or non-ASCII text it would keep, a line without spans, a
number that is not an integer where it keeps text, a key written twice, invalid UTF-8 or a lone
surrogate in any string) stops it with a reason,
and the store reads that whole file with the SQL reader instead. Without this module (no
compiler at install) the SQL reader reads every file: the same rows, more CPU.

It also writes the one thing the report writes in bulk, the JSON report's (rank, step) rows
(:func:`seconds_rows`); without it ``json.dumps`` writes the same text, slower.
"""

from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer, PyCapsule_GetName
from libc.stdio cimport FILE, fopen, fclose, setvbuf, _IOFBF
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcmp, memcpy, memset, strlen, strdup
from libc.stdint cimport uint64_t, int64_t, int32_t

cdef extern from "sys/types.h":
    ctypedef long ssize_t

cdef extern from "stdio.h" nogil:
    ssize_t getline(char **lineptr, size_t *n, FILE *stream)

cdef extern from *:
    """
    #include <sys/mman.h>
    /* A column's buffer: an anonymous mapping on Linux, so a freed one is given back at once
       (malloc can keep a freed batch resident in a thread's arena while the next fills new pages). */
    static void *lens_scan_grow(void *buf, size_t cap, size_t new_cap) {
    #ifdef __linux__
        void *p = buf == NULL ? mmap(NULL, new_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                              : mremap(buf, cap, new_cap, MREMAP_MAYMOVE);
        return p == MAP_FAILED ? NULL : p;
    #else
        (void)cap;
        return realloc(buf, new_cap);
    #endif
    }
    static void lens_scan_free(void *buf, size_t cap) {
    #ifdef __linux__
        if (buf != NULL) munmap(buf, cap);
    #else
        (void)cap;
        free(buf);
    #endif
    }
    /* Past the plain bytes of a JSON string from q, 16 at a time where SSE2 is (every x86-64):
       the first byte at or after q that is a quote, a backslash, a control character or not
       ASCII, or the first of the last 15 bytes before end (the caller's byte loop finishes). */
    #if defined(__SSE2__)
    #include <emmintrin.h>
    static inline const char *lens_scan_plain(const char *q, const char *end) {
        const __m128i quote = _mm_set1_epi8(0x22), backslash = _mm_set1_epi8(0x5C), space = _mm_set1_epi8(0x20);
        while (end - q >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)q);
            /* signed compare: a byte >= 0x80 is negative, so below 0x20 as well */
            int stop = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                                   _mm_cmpeq_epi8(v, backslash)),
                                                      _mm_cmplt_epi8(v, space)));
            if (stop)
                return q + __builtin_ctz(stop);
            q += 16;
        }
        return q;
    }
    #else
    static inline const char *lens_scan_plain(const char *q, const char *end) { (void)end; return q; }
    #endif
    static inline long long lens_scan_ref_add(long long *p, long long d) { return __atomic_add_fetch(p, d, __ATOMIC_ACQ_REL); }
    static inline int lens_scan_popcount(unsigned int x) { return __builtin_popcount(x); }
    """
    void *buf_grow "lens_scan_grow" (void *buf, size_t cap, size_t new_cap) noexcept nogil
    void buf_free "lens_scan_free" (void *buf, size_t cap) noexcept nogil
    long long ref_add "lens_scan_ref_add" (long long *p, long long d) noexcept nogil
    int popcount "lens_scan_popcount" (unsigned int x) noexcept nogil
    const char *scan_plain "lens_scan_plain" (const char *q, const char *end) noexcept nogil

__all__ = ["ArrowSink", "ArrowBatch", "SpanScanner", "MORE", "DONE", "FALLBACK", "SPAN_COLUMNS", "RESOURCE_COLUMNS",
           "seconds_rows"]

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
    int failed         # an allocation failed

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
        q = scan_plain(q, p.end)
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
    grown = <char *>buf_grow(o.buf, o.cap, cap)
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

# ---- columns --------------------------------------------------------------------------------------
# A sink's rows are held as Arrow columns (the Arrow C data interface's layout): a validity bitmap
# per column, and fixed-width values or int32 offsets into the texts' bytes. They are appended a
# row at a time, every column in order, then the row is counted. A reader stops at a line's end
# once the sink holds its ``max_bytes``, so a column's texts stay far below int32's 2 GiB: a line
# is at most 64 MB (``max_line``).

cdef enum ColType:
    T_I32 = 0
    T_I64 = 1
    T_U64 = 2
    T_TEXT = 3

cdef const char *FORMAT[4]
FORMAT[:] = [b"i", b"l", b"L", b"u"]  # Arrow's format strings: int32, int64, uint64, utf8 (int32 offsets)
cdef size_t WIDTH[3]
WIDTH[:] = [4, 8, 8]

cdef struct Col:
    int type
    Out values         # fixed-width values, or the texts' bytes
    Out offsets        # T_TEXT: rows + 1 int32 offsets into values
    Out valid          # a bit a row, 1 when the value is not NULL

cdef struct Table:
    int ncols
    long long rows
    Col *cols

cdef bint table_init(Table *t, int ncols, const int *types) noexcept nogil:
    """Empty columns of ``types``. False when memory ran out (``t`` is then freed)."""
    cdef int i
    cdef int32_t zero = 0
    cdef Col *c
    t.ncols = ncols
    t.rows = 0
    t.cols = <Col *>calloc(ncols, sizeof(Col))
    if t.cols == NULL:
        return False
    for i in range(ncols):
        c = &t.cols[i]
        c.type = types[i]
        out_reserve(&c.values, 1)  # (no buffer is NULL, even with no rows)
        out_reserve(&c.valid, 1)
        if c.type == T_TEXT:
            out_bytes(&c.offsets, <const char *>&zero, 4)
    if not table_ok(t):
        table_free(t)
        return False
    return True

cdef void table_free(Table *t) noexcept nogil:
    cdef int i
    if t.cols != NULL:
        for i in range(t.ncols):
            buf_free(t.cols[i].values.buf, t.cols[i].values.cap)
            buf_free(t.cols[i].offsets.buf, t.cols[i].offsets.cap)
            buf_free(t.cols[i].valid.buf, t.cols[i].valid.cap)
        free(t.cols)
    t.cols = NULL
    t.ncols = 0
    t.rows = 0

cdef bint table_ok(Table *t) noexcept nogil:
    """Whether every append so far found memory."""
    cdef int i
    for i in range(t.ncols):
        if t.cols[i].values.failed or t.cols[i].offsets.failed or t.cols[i].valid.failed:
            return False
    return True

cdef void table_rewind(Table *t, long long rows) noexcept nogil:
    """Forget the rows from ``rows`` on."""
    cdef int i
    cdef Col *c
    for i in range(t.ncols):
        c = &t.cols[i]
        if c.type == T_TEXT:
            c.offsets.len = <size_t>(rows + 1) * 4
            c.values.len = <size_t>(<int32_t *>c.offsets.buf)[rows]
        else:
            c.values.len = <size_t>rows * WIDTH[c.type]
        c.valid.len = <size_t>((rows + 7) >> 3)
    t.rows = rows

cdef size_t table_bytes(Table *t) noexcept nogil:
    """The bytes its rows take (its buffers' capacity can be larger, but untouched)."""
    cdef int i
    cdef size_t n = 0
    for i in range(t.ncols):
        n += t.cols[i].values.len + t.cols[i].offsets.len + t.cols[i].valid.len
    return n

cdef inline void set_valid(Table *t, Col *c, bint ok) noexcept nogil:
    """The validity bit of the row being appended (its byte zeroed when the row starts one)."""
    cdef size_t byte = <size_t>(t.rows >> 3)
    cdef unsigned char bit = <unsigned char>(1 << (t.rows & 7))
    if c.valid.len <= byte:
        if not out_reserve(&c.valid, 1):
            return
        c.valid.buf[byte] = 0
        c.valid.len = byte + 1
    if ok:
        c.valid.buf[byte] = c.valid.buf[byte] | bit
    else:
        c.valid.buf[byte] = c.valid.buf[byte] & ~bit

cdef inline void put_i32(Table *t, int col, int32_t v) noexcept nogil:
    out_bytes(&t.cols[col].values, <const char *>&v, 4)
    set_valid(t, &t.cols[col], True)

cdef inline void put_i64(Table *t, int col, int64_t v, bint ok) noexcept nogil:
    if not ok:
        v = 0
    out_bytes(&t.cols[col].values, <const char *>&v, 8)
    set_valid(t, &t.cols[col], ok)

cdef inline void put_u64(Table *t, int col, uint64_t v, bint ok) noexcept nogil:
    if not ok:
        v = 0
    out_bytes(&t.cols[col].values, <const char *>&v, 8)
    set_valid(t, &t.cols[col], ok)

cdef inline void put_text(Table *t, int col, const char *p, Py_ssize_t n, bint ok) noexcept nogil:
    cdef Col *c = &t.cols[col]
    cdef int32_t end
    if c.values.len + <size_t>n > 0x7FFFFFFF:  # past int32 offsets (a sink's max_bytes keeps far below)
        c.values.failed = 1
        return
    if ok and n:
        out_bytes(&c.values, p, <size_t>n)
    end = <int32_t>c.values.len
    out_bytes(&c.offsets, <const char *>&end, 4)
    set_valid(t, c, ok)

cdef inline void put_slice(Table *t, int col, Slice *s) noexcept nogil:
    """A kept text as read (an integer as its digits, a boolean as true/false); NULL when absent or null."""
    if s.kind == K_STRING or s.kind == K_INT:
        put_text(t, col, s.p, s.n, True)
    elif s.kind == K_TRUE:
        put_text(t, col, "true", 4, True)
    elif s.kind == K_FALSE:
        put_text(t, col, "false", 5, True)
    else:
        put_text(t, col, NULL, 0, False)

cdef int64_t count_nulls(Col *c, int64_t rows) noexcept nogil:
    cdef int64_t i, valid = 0
    cdef const unsigned char *bits = <const unsigned char *>c.valid.buf
    for i in range(rows >> 3):
        valid += popcount(bits[i])
    if rows & 7:
        valid += popcount(bits[rows >> 3] & ((1 << (rows & 7)) - 1))
    return rows - valid

# ---- the Arrow C data interface (its ABI, as the Arrow specification defines it) -------------------

cdef struct ArrowSchema:
    const char *format
    const char *name
    const char *metadata
    int64_t flags
    int64_t n_children
    ArrowSchema **children
    ArrowSchema *dictionary
    void (*release)(ArrowSchema *) noexcept nogil
    void *private_data

cdef struct ArrowArray:
    int64_t length
    int64_t null_count
    int64_t offset
    int64_t n_buffers
    int64_t n_children
    const void **buffers
    ArrowArray **children
    ArrowArray *dictionary
    void (*release)(ArrowArray *) noexcept nogil
    void *private_data

cdef struct ArrowArrayStream:
    int (*get_schema)(ArrowArrayStream *, ArrowSchema *) noexcept nogil
    int (*get_next)(ArrowArrayStream *, ArrowArray *) noexcept nogil
    const char *(*get_last_error)(ArrowArrayStream *) noexcept nogil
    void (*release)(ArrowArrayStream *) noexcept nogil
    void *private_data

cdef enum:
    ARROW_FLAG_NULLABLE = 2
    E_NOMEM = 12       # errno's ENOMEM, what a stream's callbacks return when memory ran out

cdef struct Shared:
    # a table handed over by a sink, with its column names; freed when the last holder lets go
    # (the ArrowBatch, and every stream and array exported from it: DuckDB releases those on its
    # own threads, hence the atomic count)
    long long refs
    Table table
    char **names

cdef void shared_release(Shared *s) noexcept nogil:
    cdef int i
    if ref_add(&s.refs, -1) != 0:
        return
    if s.names != NULL:
        for i in range(s.table.ncols):
            free(s.names[i])
        free(s.names)
    table_free(&s.table)
    free(s)

cdef struct StreamState:
    Shared *shared
    bint done

cdef void schema_release(ArrowSchema *schema) noexcept nogil:
    cdef int64_t i
    if schema.children != NULL:
        for i in range(schema.n_children):
            if schema.children[i] != NULL:
                if schema.children[i].release != NULL:
                    schema.children[i].release(schema.children[i])
                free(schema.children[i])
        free(schema.children)
    free(<void *>schema.name)
    schema.release = NULL

cdef int stream_get_schema(ArrowArrayStream *stream, ArrowSchema *out) noexcept nogil:
    """A struct of the table's columns, each nullable."""
    cdef Shared *s = (<StreamState *>stream.private_data).shared
    cdef ArrowSchema *child
    cdef int i
    memset(out, 0, sizeof(ArrowSchema))
    out.format = "+s"
    out.release = schema_release
    out.children = <ArrowSchema **>calloc(s.table.ncols, sizeof(ArrowSchema *))
    if out.children == NULL:
        out.release = NULL
        return E_NOMEM
    out.n_children = s.table.ncols
    for i in range(s.table.ncols):
        child = <ArrowSchema *>calloc(1, sizeof(ArrowSchema))
        if child == NULL:
            schema_release(out)
            return E_NOMEM
        out.children[i] = child
        child.format = FORMAT[s.table.cols[i].type]
        child.flags = ARROW_FLAG_NULLABLE
        child.release = schema_release
        child.name = strdup(s.names[i])
        if child.name == NULL:
            schema_release(out)
            return E_NOMEM
    return 0

cdef void child_release(ArrowArray *array) noexcept nogil:
    free(array.buffers)
    shared_release(<Shared *>array.private_data)
    array.release = NULL

cdef void struct_release(ArrowArray *array) noexcept nogil:
    cdef int64_t i
    if array.children != NULL:
        for i in range(array.n_children):
            if array.children[i] != NULL:
                if array.children[i].release != NULL:  # (NULL: not made, or moved out by the reader)
                    array.children[i].release(array.children[i])
                free(array.children[i])
        free(array.children)
    free(array.buffers)
    shared_release(<Shared *>array.private_data)
    array.release = NULL

cdef int stream_get_next(ArrowArrayStream *stream, ArrowArray *out) noexcept nogil:
    """The whole table as one struct array the first time; the end of the stream after that."""
    cdef StreamState *state = <StreamState *>stream.private_data
    cdef Shared *s = state.shared
    cdef ArrowArray *child
    cdef Col *c
    cdef int i
    memset(out, 0, sizeof(ArrowArray))  # release NULL: the end
    if state.done:
        return 0
    out.length = s.table.rows
    out.n_buffers = 1
    out.buffers = <const void **>calloc(1, sizeof(void *))  # no validity bitmap: every row is there
    out.children = <ArrowArray **>calloc(s.table.ncols, sizeof(ArrowArray *))
    ref_add(&s.refs, 1)
    out.private_data = s
    out.release = struct_release
    if out.buffers == NULL or out.children == NULL:
        struct_release(out)
        return E_NOMEM
    out.n_children = s.table.ncols
    for i in range(s.table.ncols):
        c = &s.table.cols[i]
        child = <ArrowArray *>calloc(1, sizeof(ArrowArray))
        if child == NULL:
            struct_release(out)
            return E_NOMEM
        out.children[i] = child
        child.n_buffers = 3 if c.type == T_TEXT else 2
        child.buffers = <const void **>malloc(child.n_buffers * sizeof(void *))
        if child.buffers == NULL:
            struct_release(out)
            return E_NOMEM
        child.length = s.table.rows
        child.null_count = count_nulls(c, s.table.rows)
        child.buffers[0] = c.valid.buf
        if c.type == T_TEXT:
            child.buffers[1] = c.offsets.buf
            child.buffers[2] = c.values.buf
        else:
            child.buffers[1] = c.values.buf
        ref_add(&s.refs, 1)
        child.private_data = s
        child.release = child_release
    state.done = True
    return 0

cdef const char *stream_last_error(ArrowArrayStream *stream) noexcept nogil:
    return NULL

cdef void stream_release(ArrowArrayStream *stream) noexcept nogil:
    shared_release((<StreamState *>stream.private_data).shared)
    free(stream.private_data)
    stream.release = NULL

cdef void stream_capsule_free(object capsule) noexcept:
    # (by the name it has now: a reader may rename a capsule it took the stream from)
    cdef ArrowArrayStream *stream = <ArrowArrayStream *>PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule))
    if stream != NULL:
        if stream.release != NULL:  # (NULL: the reader moved the stream out)
            stream.release(stream)
        free(stream)


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

cdef void put_fields(Table *t, int first, Keys *keys, Attr *found) noexcept nogil:
    """The asked-for attribute fields of a span or resource, in columns ``first`` on (NULL for an absent one)."""
    cdef int i, k
    for i in range(keys.fields):
        k = keys.key_of[i]
        if found[k].seen:
            put_slice(t, first + i, &found[k].value[keys.field_of[i]])
        else:
            put_text(t, first + i, NULL, 0, False)

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


cdef class ArrowBatch:
    """Rows an :class:`ArrowSink` handed over, for DuckDB to scan through the Arrow PyCapsule
    interface (``__arrow_c_stream__``), as many times as it asks; the buffers are freed when this
    object and every stream DuckDB took from it are gone."""

    cdef Shared *shared
    cdef readonly long long rows
    """The rows it holds."""

    def __cinit__(self):
        self.shared = NULL
        self.rows = 0

    def __arrow_c_stream__(self, requested_schema=None):
        """A PyCapsule holding an ``ArrowArrayStream`` of one struct array: the batch's columns
        (``requested_schema`` is not honoured: the columns are what they are)."""
        cdef ArrowArrayStream *stream
        cdef StreamState *state
        if self.shared == NULL:
            raise ValueError("the batch is empty")
        stream = <ArrowArrayStream *>calloc(1, sizeof(ArrowArrayStream))
        state = <StreamState *>calloc(1, sizeof(StreamState))
        if stream == NULL or state == NULL:
            free(stream)
            free(state)
            raise MemoryError()
        ref_add(&self.shared.refs, 1)
        state.shared = self.shared
        stream.private_data = state
        stream.get_schema = stream_get_schema
        stream.get_next = stream_get_next
        stream.get_last_error = stream_last_error
        stream.release = stream_release
        return PyCapsule_New(stream, b"arrow_array_stream", stream_capsule_free)

    def __dealloc__(self):
        if self.shared != NULL:
            shared_release(self.shared)
            self.shared = NULL


# the columns every span and every resource has, before their attribute fields
cdef int SPAN_TYPES[12]
SPAN_TYPES[:] = [T_I32, T_I64, T_I64, T_U64, T_U64, T_U64, T_U64, T_TEXT, T_TEXT, T_I64, T_I64, T_TEXT]
SPAN_COLUMNS = ("file", "o", "res", "th", "tl", "span_id", "parent_id", "name", "kind_text", "st", "en", "status_text")
"""The span columns an :class:`ArrowSink` holds before the attribute fields (types in ``SPAN_TYPES``)."""
cdef int RESOURCE_TYPES[2]
RESOURCE_TYPES[:] = [T_I32, T_I64]
RESOURCE_COLUMNS = ("file", "res")
"""The resource columns an :class:`ArrowSink` holds before the attribute fields."""


cdef class ArrowSink:
    """The spans and resources the scanners read, as columns in memory, for one INSERT at a time.

    ``span_fields`` and ``resource_fields`` name the text columns of the attribute fields the
    scanners are told to read (in their order), after :data:`SPAN_COLUMNS` and
    :data:`RESOURCE_COLUMNS`; a scanner stops at the end of the line that takes the sink to
    ``max_bytes`` (1 MiB to 1 GiB). :meth:`take` hands the rows over as two :class:`ArrowBatch`
    objects and empties the sink; :meth:`mark` and :meth:`rewind` take back what a file wrote
    before it turned out to be the SQL reader's.
    """

    cdef Table span_table
    cdef Table res_table
    cdef list _span_names
    cdef list _res_names
    cdef public long long spans
    """Spans written since the sink was last emptied."""
    cdef readonly size_t max_bytes
    """The bytes of rows at which a scanner stops (at the end of a line)."""

    def __cinit__(self, span_fields, resource_fields, size_t max_bytes=32 * 1024 * 1024):
        self.span_table.cols = self.res_table.cols = NULL
        self.spans = 0
        if not (1 << 20) <= max_bytes <= (1 << 30):
            raise ValueError(f"max_bytes must be 1 MiB to 1 GiB (texts are indexed by int32), got {max_bytes}")
        self.max_bytes = max_bytes
        self._span_names = [name.encode() for name in (*SPAN_COLUMNS, *span_fields)]
        self._res_names = [name.encode() for name in (*RESOURCE_COLUMNS, *resource_fields)]
        if max(len(self._span_names) - 12, len(self._res_names) - 2) > MAX_KEYS * 3:
            raise ValueError(f"at most {MAX_KEYS * 3} fields")
        if len(set(self._span_names)) < len(self._span_names) or len(set(self._res_names)) < len(self._res_names):
            raise ValueError("a column name given twice (or one of SPAN_COLUMNS or RESOURCE_COLUMNS)")
        self._fill()

    cdef _fill(self):
        cdef int i
        cdef int types[MAX_KEYS * 3 + 12]
        for i in range(len(self._span_names)):
            types[i] = SPAN_TYPES[i] if i < 12 else T_TEXT
        if not table_init(&self.span_table, len(self._span_names), types):
            raise MemoryError()
        for i in range(len(self._res_names)):
            types[i] = RESOURCE_TYPES[i] if i < 2 else T_TEXT
        if not table_init(&self.res_table, len(self._res_names), types):
            table_free(&self.span_table)
            raise MemoryError()
        self.spans = 0

    @property
    def span_fields(self):
        """How many attribute fields a span row holds."""
        return len(self._span_names) - 12

    @property
    def resource_fields(self):
        """How many attribute fields a resource row holds."""
        return len(self._res_names) - 2

    def mark(self):
        """Where the rows end now (for :meth:`rewind`)."""
        self._check()
        return (self.span_table.rows, self.res_table.rows, self.spans)

    def rewind(self, mark):
        """Take back every row written after ``mark`` (from :meth:`mark`, since the sink was last emptied)."""
        span_rows, res_rows, spans = mark
        self._check()
        if not (0 <= span_rows <= self.span_table.rows and 0 <= res_rows <= self.res_table.rows):
            raise ValueError(f"mark {mark!r} is not one of this sink's since it was last emptied")
        table_rewind(&self.span_table, span_rows)
        table_rewind(&self.res_table, res_rows)
        self.spans = spans

    def take(self):
        """(spans, resources): the rows written since the sink was last emptied, as two
        :class:`ArrowBatch` objects; the sink is empty after."""
        self._check()
        self._raise_failed()
        spans = self._batch(&self.span_table, self._span_names)
        resources = self._batch(&self.res_table, self._res_names)
        self._fill()
        return spans, resources

    cdef ArrowBatch _batch(self, Table *table, list names):
        cdef ArrowBatch batch = ArrowBatch()
        cdef Shared *s = <Shared *>calloc(1, sizeof(Shared))
        cdef int i
        if s == NULL:
            raise MemoryError()
        s.names = <char **>calloc(len(names), sizeof(char *))
        if s.names == NULL:
            free(s)
            raise MemoryError()
        s.refs = 1
        s.table = table[0]  # the batch owns the buffers from here on
        table.cols = NULL
        table.ncols = 0
        table.rows = 0
        batch.shared = s
        batch.rows = s.table.rows
        for i, name in enumerate(names):
            s.names[i] = strdup(<const char *>name)
            if s.names[i] == NULL:
                raise MemoryError()
        return batch

    cdef _check(self):
        if self.span_table.cols == NULL:
            raise ValueError("the sink is closed")

    cdef _raise_failed(self):
        if not (table_ok(&self.span_table) and table_ok(&self.res_table)):
            raise MemoryError("the compiled reader's sink ran out of memory")

    def close(self):
        """Free the buffers (idempotent); the sink cannot be written after."""
        table_free(&self.span_table)
        table_free(&self.res_table)

    def __dealloc__(self):
        self.close()


cdef class SpanScanner:
    """Reads one plain OTLP/JSON trace file into an :class:`ArrowSink`, a part at a time (see :meth:`read`).

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

    def read(self, ArrowSink sink, long long max_spans):
        """Write the next lines' spans and resources to ``sink``, stopping after the line that takes
        ``sink.spans`` to ``max_spans`` or more, or the sink to its ``max_bytes``.

        Returns ``MORE`` (then empty the sink before the next call), ``DONE`` or ``FALLBACK`` (then :attr:`reason` says why, and the file
        is the SQL reader's: take back what it wrote with the sink's ``rewind``).
        """
        cdef int status
        if self.f == NULL:
            raise ValueError("the scanner is closed")
        sink._check()
        if sink.span_fields != self.span_keys.fields or sink.resource_fields != self.res_keys.fields:
            raise ValueError(f"the sink holds {sink.span_fields} span and {sink.resource_fields} resource fields, "
                             f"the scanner reads {self.span_keys.fields} and {self.res_keys.fields}")
        self.reason = None
        with nogil:
            status = self._read(&sink.span_table, &sink.res_table, &sink.spans, max_spans, sink.max_bytes)
        sink._raise_failed()
        if status == FALLBACK_C:
            why = (<bytes>self._why).decode() if self._why != NULL else "not the OTLP structure"
            self.reason = f"line {self.line_no}: {why}"
        return status

    cdef int _read(self, Table *spans, Table *res, long long *written, long long max_spans,
                   size_t max_bytes) noexcept nogil:
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
            if not (table_ok(spans) and table_ok(res)):
                return DONE_C  # raised by read()
            if written[0] >= max_spans or table_bytes(spans) + table_bytes(res) >= max_bytes:
                return MORE_C

    cdef bint _line(self, Parser *p, Table *spans, Table *res) noexcept nogil:
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

    cdef bint _resource_spans(self, Parser *p, Table *spans, Table *res) noexcept nogil:
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
            put_i32(res, 0, <int32_t>self.file_index)
            put_i64(res, 1, self.res_no, True)
            put_fields(res, 2, &self.res_keys, self.res_found)
            res.rows += 1
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

    cdef bint _scope_spans(self, Parser *p, Table *spans) noexcept nogil:
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

    cdef bint _span(self, Parser *p, Table *o) noexcept nogil:
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
        put_i32(o, 0, <int32_t>self.file_index)
        put_i64(o, 1, self.line_no, True)
        put_i64(o, 2, self.res_no, True)
        put_u64(o, 3, hi, True)
        put_u64(o, 4, lo, True)
        put_u64(o, 5, span, True)
        put_u64(o, 6, parent, has_parent)
        put_slice(o, 7, &t.field[F_NAME])
        put_slice(o, 8, &t.field[F_KIND])
        put_i64(o, 9, start, has_start == 1)  # (validated: a non-negative int64)
        put_i64(o, 10, end, has_end == 1)
        put_slice(o, 11, &t.field[F_STATUS])
        put_fields(o, 12, &self.span_keys, self.span_found)
        o.rows += 1
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



# ---- the JSON report's (rank, step) rows ----------------------------------------------------------
# The one thing the report writes in bulk: 500,000 rows of six seconds each at 1,000 ranks x 500 steps.
# json.dumps spends ~0.4 us a float finding its shortest text (1.2 s for those rows); a second here is
# ns / 1e9, whose shortest text is the nanoseconds' own digits wherever they are at most 15 (a double
# holds every decimal of <= 15 significant digits apart from every other, so no shorter text reads
# back as the same number), written as Python's repr does: fixed point from 1e-4 up, at least one
# decimal. Elsewhere (below 100 us but not 0, or from 10**15 ns: 11.6 days) repr itself writes it.

_NS_PER_S = 1000000000
cdef const long long SECONDS_MIN_NS = 100000               # 1e-4 s: below it repr writes an exponent
cdef const long long SECONDS_MAX_NS = 1000000000000000     # 10**15 ns: from it, over 15 digits

cdef inline void out_uint(Out *o, unsigned long long u) noexcept nogil:
    cdef char tmp[24]
    cdef int i = 24
    if u == 0:
        i -= 1
        tmp[i] = 48
    while u:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
    out_bytes(o, tmp + i, 24 - i)

cdef inline void out_int(Out *o, long long v) noexcept nogil:
    if v < 0:
        out_bytes(o, "-", 1)
        out_uint(o, <unsigned long long>(-(v + 1)) + 1)  # LLONG_MIN too
    else:
        out_uint(o, <unsigned long long>v)

cdef inline bint out_seconds(Out *o, long long ns) noexcept nogil:
    """Write ``ns / 1e9`` as ``repr`` writes that float, where it is the nanoseconds' digits; False (nothing
    written) where it is not."""
    cdef char frac[9]
    cdef unsigned long long u, f
    cdef int i, n
    if ns == 0:
        out_bytes(o, "0.0", 3)
        return True
    if ns <= -SECONDS_MAX_NS or ns >= SECONDS_MAX_NS or (-SECONDS_MIN_NS < ns < SECONDS_MIN_NS):
        return False
    if ns < 0:
        out_bytes(o, "-", 1)
        u = <unsigned long long>(-ns)
    else:
        u = <unsigned long long>ns
    out_uint(o, u // 1000000000)
    f = u % 1000000000
    for i in range(8, -1, -1):
        frac[i] = <char>(48 + f % 10)
        f //= 10
    n = 9
    while n > 1 and frac[n - 1] == 48:
        n -= 1
    out_bytes(o, ".", 1)
    out_bytes(o, frac, n)
    return True


def seconds_rows(const long long[::1] iterations not None, const long long[::1] ranks not None, labels,
                 const long long[::1] wall not None, const long long[::1] productive not None,
                 const long long[::1] overhead not None, const long long[::1] idle not None,
                 const long long[::1] wasted not None, const long long[::1] busy not None,
                 Py_ssize_t start, Py_ssize_t stop, const unsigned char[::1] keep=None):
    """The JSON text of rows ``start`` to ``stop`` of a report's (rank, step) columns, as ``json.dumps`` writes
    each compact (``[iteration,label,six seconds]``), joined by commas: what ``RankSteps.row_tuples`` gives, the
    seconds each column's nanoseconds / 1e9. ``labels``: each rank's label as JSON text (bytes), indexed by
    ``ranks``; ``keep`` (optional): 1 per label index for the rows to write. Returns bytes (ASCII)."""
    cdef Py_ssize_t i, c, count = len(labels)
    cdef Out o
    cdef const long long *cols[6]
    cdef const char **text = NULL
    cdef Py_ssize_t *length = NULL
    cdef long long rank, v
    cdef bint first = True
    cdef bytes label
    cdef object ns
    if not (0 <= start <= stop <= iterations.shape[0]):
        raise ValueError(f"rows {start} to {stop} of {iterations.shape[0]}")
    for rows in (ranks.shape[0], wall.shape[0], productive.shape[0], overhead.shape[0], idle.shape[0],
                 wasted.shape[0], busy.shape[0]):
        if rows != iterations.shape[0]:
            raise ValueError(f"a column of {rows} rows beside {iterations.shape[0]} iterations")
    if keep is not None and keep.shape[0] != count:
        raise ValueError(f"keep holds {keep.shape[0]} flags for {count} labels")
    memset(&o, 0, sizeof(Out))
    text = <const char **>malloc(max(count, 1) * sizeof(char *))
    length = <Py_ssize_t *>malloc(max(count, 1) * sizeof(Py_ssize_t))
    if text == NULL or length == NULL:
        free(text)
        free(length)
        raise MemoryError()
    try:
        for i in range(count):
            label = labels[i]
            text[i] = label
            length[i] = len(label)
        if stop > start:
            cols[0] = &wall[0]
            cols[1] = &productive[0]
            cols[2] = &overhead[0]
            cols[3] = &idle[0]
            cols[4] = &wasted[0]
            cols[5] = &busy[0]
        for i in range(start, stop):
            rank = ranks[i]
            if not (0 <= rank < count):
                raise ValueError(f"row {i}: rank index {rank} of {count} labels")
            if keep is not None and not keep[rank]:
                continue
            out_bytes(&o, "[" if first else ",[", 1 if first else 2)
            first = False
            out_int(&o, iterations[i])
            out_bytes(&o, ",", 1)
            out_bytes(&o, text[rank], length[rank])
            for c in range(6):
                out_bytes(&o, ",", 1)
                v = cols[c][i]
                if not out_seconds(&o, v):  # Python's int / int, as RankSteps.row_tuples divides
                    ns = v
                    spelled = repr(ns / _NS_PER_S).encode("ascii")
                    out_bytes(&o, spelled, len(spelled))
            out_bytes(&o, "]", 1)
        if o.failed:
            raise MemoryError()
        return b"" if o.len == 0 else (<char *>o.buf)[:o.len]
    finally:
        free(text)
        free(length)
        buf_free(o.buf, o.cap)
