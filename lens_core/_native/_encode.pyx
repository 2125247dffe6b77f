# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled OTLP encoders (protobuf and OTLP/JSON): the twin of lens_core._native._encode_py, byte for byte.

Records are the compiled recorder's Span objects (declared in _recorder.pxd). Output goes
into a growable C buffer; a length-delimited field is written as a one-byte placeholder
that is widened in place (memmove) once the body's size is known, so each record is
visited once.
"""

cimport cython
from libc.stdint cimport uint64_t, int64_t
from cpython.object cimport PyObject
from cpython.dict cimport PyDict_Next
from lens_core._native._recorder cimport Span
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove
from libc.math cimport isnan, isinf
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.float cimport PyFloat_AS_DOUBLE

__all__ = ["encode_traces_json", "encode_traces_pb"]

cdef extern from "Python.h":
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* type) except NULL
    int Py_DTSF_ADD_DOT_0
    void PyMem_Free(void* p)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

cdef struct _Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int _grow(_Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t want = b.len + extra
    cdef Py_ssize_t cap
    cdef char* data
    if want <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < want:
        cap *= 2
    data = <char*>realloc(b.data, cap)
    if data is NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline int _put(_Buf* b, const char* s, Py_ssize_t n) except -1:
    if b.len + n > b.cap:
        _grow(b, n)
    memcpy(b.data + b.len, s, n)
    b.len += n
    return 0


cdef inline int _byte(_Buf* b, unsigned char c) except -1:
    if b.len + 1 > b.cap:
        _grow(b, 1)
    b.data[b.len] = <char>c
    b.len += 1
    return 0


# ---- protobuf ------------------------------------------------------------------------------

cdef inline int _varint(_Buf* b, uint64_t v) except -1:
    if b.len + 10 > b.cap:
        _grow(b, 10)
    while v > 0x7F:
        b.data[b.len] = <char>((v & 0x7F) | 0x80)
        b.len += 1
        v >>= 7
    b.data[b.len] = <char>v
    b.len += 1
    return 0


cdef inline int _fixed64(_Buf* b, uint64_t v) except -1:
    cdef int i
    if b.len + 8 > b.cap:
        _grow(b, 8)
    for i in range(8):
        b.data[b.len + i] = <char>((v >> (8 * i)) & 0xFF)
    b.len += 8
    return 0


cdef inline int _fixed32(_Buf* b, unsigned int v) except -1:
    cdef int i
    if b.len + 4 > b.cap:
        _grow(b, 4)
    for i in range(4):
        b.data[b.len + i] = <char>((v >> (8 * i)) & 0xFF)
    b.len += 4
    return 0


cdef inline Py_ssize_t _open(_Buf* b, int number) except -1:
    # Tag, then a one-byte length placeholder; returns where the body starts.
    _varint(b, (number << 3) | 2)
    _byte(b, 0)
    return b.len


cdef int _close(_Buf* b, Py_ssize_t start) except -1:
    # Write the body's length into the placeholder before ``start``, widening it if needed.
    cdef Py_ssize_t size = b.len - start
    cdef Py_ssize_t extra = 0
    cdef uint64_t v = <uint64_t>size
    cdef int i
    while v > 0x7F:
        extra += 1
        v >>= 7
    if extra:
        _grow(b, extra)
        memmove(b.data + start + extra, b.data + start, size)
        b.len += extra
    v = <uint64_t>size
    i = 0
    while v > 0x7F:
        b.data[start - 1 + i] = <char>((v & 0x7F) | 0x80)
        v >>= 7
        i += 1
    b.data[start - 1 + i] = <char>v
    return 0


cdef object _utf8_of(object text):
    # (bytes-like holder, pointer, size): UTF-8 of a str, with lone surrogates replaced.
    return text.encode("utf-8", "replace")


cdef int _pb_bytes_field(_Buf* b, int number, const char* data, Py_ssize_t n) except -1:
    _varint(b, (number << 3) | 2)
    _varint(b, <uint64_t>n)
    _put(b, data, n)
    return 0


cdef int _pb_str(_Buf* b, int number, object text) except -1:
    cdef Py_ssize_t n
    cdef const char* p
    try:
        p = PyUnicode_AsUTF8AndSize(text, &n)
    except UnicodeEncodeError:
        raw = _utf8_of(text)
        return _pb_bytes_field(b, number, raw, len(raw))
    return _pb_bytes_field(b, number, p, n)


cdef int _pb_any(_Buf* b, object value) except -1:
    cdef int overflow = 0
    cdef long long iv
    cdef double d
    cdef uint64_t bits
    cdef Py_ssize_t start, inner
    kind = type(value)
    if kind is bool or isinstance(value, bool):
        _varint(b, 2 << 3)
        _varint(b, 1 if value else 0)
    elif isinstance(value, int):
        iv = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            _pb_str(b, 1, str(value))
        else:
            _varint(b, 3 << 3)
            _varint(b, <uint64_t>iv)
    elif isinstance(value, float):
        d = value
        memcpy(&bits, &d, 8)
        _varint(b, (4 << 3) | 1)
        _fixed64(b, bits)
    elif isinstance(value, str):
        _pb_str(b, 1, value)
    elif isinstance(value, bytes):
        _pb_bytes_field(b, 7, value, len(value))
    elif isinstance(value, (list, tuple)):
        start = _open(b, 5)
        for item in value:
            inner = _open(b, 1)
            _pb_any(b, item)
            _close(b, inner)
        _close(b, start)
    else:
        _pb_str(b, 1, str(value))
    return 0


cdef int _pb_kv(_Buf* b, int number, object key, object value) except -1:
    cdef Py_ssize_t start = _open(b, number)
    cdef Py_ssize_t inner
    _pb_str(b, 1, key)
    inner = _open(b, 2)
    _pb_any(b, value)
    _close(b, inner)
    _close(b, start)
    return 0


cdef int _pb_attrs(_Buf* b, int number, object attrs) except -1:
    cdef PyObject* key
    cdef PyObject* value
    cdef Py_ssize_t pos = 0
    if not attrs:
        return 0
    if type(attrs) is dict:
        while PyDict_Next(attrs, &pos, &key, &value):
            _pb_kv(b, number, <object>key, <object>value)
    else:
        for k, v in attrs.items():
            _pb_kv(b, number, k, v)
    return 0


cdef inline int _pb_id(_Buf* b, int number, uint64_t hi, uint64_t lo, bint wide) except -1:
    cdef char raw[16]
    cdef int i
    cdef int n = 16 if wide else 8
    if wide:
        for i in range(8):
            raw[i] = <char>((hi >> (56 - 8 * i)) & 0xFF)
            raw[8 + i] = <char>((lo >> (56 - 8 * i)) & 0xFF)
    else:
        for i in range(8):
            raw[i] = <char>((lo >> (56 - 8 * i)) & 0xFF)
    return _pb_bytes_field(b, number, raw, n)


cdef inline unsigned int _remote_flags(bint remote) noexcept:
    return 0x100 | (0x200 if remote else 0)


cdef int _pb_span(_Buf* b, Span r) except -1:
    cdef Py_ssize_t start, inner
    _pb_id(b, 1, r._trace_hi, r._trace_lo, True)
    _pb_id(b, 2, 0, r._span_id, False)
    if r.trace_state:
        _pb_str(b, 3, r.trace_state)
    if r._parent_id:
        _pb_id(b, 4, 0, r._parent_id, False)
    _pb_str(b, 5, r.name)
    _varint(b, 6 << 3)
    _varint(b, <uint64_t>r.kind)
    _varint(b, (7 << 3) | 1)
    _fixed64(b, <uint64_t>r.start_ns)
    _varint(b, (8 << 3) | 1)
    _fixed64(b, <uint64_t>r.end_ns)
    _pb_attrs(b, 9, r.attrs)
    if r.thread_name is not None:
        _pb_kv(b, 9, "thread.id", r.thread_id)
        _pb_kv(b, 9, "thread.name", r.thread_name)
    if r.dropped_attrs:
        _varint(b, 10 << 3)
        _varint(b, <uint64_t>r.dropped_attrs)
    if r.events:
        for name, time_ns, attrs in r.events:
            start = _open(b, 11)
            _varint(b, (1 << 3) | 1)
            _fixed64(b, <uint64_t>time_ns)
            _pb_str(b, 2, name)
            _pb_attrs(b, 3, attrs)
            _close(b, start)
    if r.dropped_events:
        _varint(b, 12 << 3)
        _varint(b, <uint64_t>r.dropped_events)
    if r.links:
        for trace_id, span_id, state, attrs, remote in r.links:
            start = _open(b, 13)
            _pb_id(b, 1, (trace_id >> 64) & 0xFFFFFFFFFFFFFFFF, trace_id & 0xFFFFFFFFFFFFFFFF, True)
            _pb_id(b, 2, 0, span_id, False)
            if state:
                _pb_str(b, 3, state)
            _pb_attrs(b, 4, attrs)
            _varint(b, (6 << 3) | 5)
            _fixed32(b, _remote_flags(remote))
            _close(b, start)
    if r.dropped_links:
        _varint(b, 14 << 3)
        _varint(b, <uint64_t>r.dropped_links)
    start = _open(b, 15)
    if r.status_msg:
        _pb_str(b, 2, r.status_msg)
    if r.status_code:
        _varint(b, 3 << 3)
        _varint(b, <uint64_t>r.status_code)
    _close(b, start)
    _varint(b, (16 << 3) | 5)
    _fixed32(b, _remote_flags(r.parent_remote))
    return 0


cdef object _schema_url(urls, object index):
    # urls[index], or "" where urls is shorter (a scope without a declared schema); a Python
    # index, not Py_ssize_t: with wraparound and boundscheck off a C index would skip the checks
    return urls[index] if index < len(urls) else ""


def encode_traces_pb(bytes resource, scopes, records, resource_schema_url="", scope_schema_urls=()):
    """An ``ExportTraceServiceRequest`` for ``records`` of one resource (see the Python twin)."""
    cdef _Buf b
    cdef Py_ssize_t rs, ss, sp
    cdef Span r
    b.data = NULL
    b.len = b.cap = 0
    try:
        rs = _open(&b, 1)
        _pb_bytes_field(&b, 1, resource, len(resource))
        for scope, group in _by_scope(records):
            ss = _open(&b, 2)
            scope_pb = <bytes>scopes[scope]
            _pb_bytes_field(&b, 1, scope_pb, len(scope_pb))
            for r in group:
                sp = _open(&b, 2)
                _pb_span(&b, r)
                _close(&b, sp)
            url = _schema_url(scope_schema_urls, scope)
            if url:
                _pb_str(&b, 3, url)
            _close(&b, ss)
        if resource_schema_url:
            _pb_str(&b, 3, resource_schema_url)
        _close(&b, rs)
        return PyBytes_FromStringAndSize(b.data, b.len)
    finally:
        free(b.data)


cdef list _by_scope(records):
    # [(scope, [records...])] in first-seen order; almost always one scope.
    cdef dict groups = {}
    cdef Span r
    first = None
    for r in records:
        if first is None:
            first = r.scope
        found = groups.get(r.scope)
        if found is None:
            groups[r.scope] = found = []
        (<list>found).append(r)
    return list(groups.items())


# ---- OTLP/JSON -----------------------------------------------------------------------------

cdef char* _HEXDIGITS = b"0123456789abcdef"


cdef int _js_str_raw(_Buf* b, const char* p, Py_ssize_t n) except -1:
    # A JSON string (with quotes) from UTF-8, escaped as json.dumps(ensure_ascii=False) does.
    cdef Py_ssize_t i
    cdef unsigned char c
    _grow(b, n + 2)
    b.data[b.len] = b'"'
    b.len += 1
    for i in range(n):
        c = <unsigned char>p[i]
        if c >= 0x20 and c != b'"' and c != b'\\':
            if b.len + 1 > b.cap:
                _grow(b, 1)
            b.data[b.len] = <char>c
            b.len += 1
        elif c == b'"':
            _put(b, b'\\"', 2)
        elif c == b'\\':
            _put(b, b'\\\\', 2)
        elif c == b'\n':
            _put(b, b'\\n', 2)
        elif c == b'\r':
            _put(b, b'\\r', 2)
        elif c == b'\t':
            _put(b, b'\\t', 2)
        elif c == 0x08:
            _put(b, b'\\b', 2)
        elif c == 0x0c:
            _put(b, b'\\f', 2)
        else:
            _put(b, b'\\u00', 4)
            _byte(b, _HEXDIGITS[c >> 4])
            _byte(b, _HEXDIGITS[c & 15])
    _byte(b, b'"')
    return 0


cdef int _js_str(_Buf* b, object text) except -1:
    cdef Py_ssize_t n
    cdef const char* p
    try:
        p = PyUnicode_AsUTF8AndSize(text, &n)
    except UnicodeEncodeError:
        raw = _utf8_of(text)
        return _js_str_raw(b, raw, len(raw))
    return _js_str_raw(b, p, n)


cdef int _js_lit(_Buf* b, const char* s) except -1:
    cdef Py_ssize_t n = 0
    while s[n]:
        n += 1
    return _put(b, s, n)


cdef int _js_int(_Buf* b, long long v) except -1:
    cdef char tmp[24]
    cdef int n = 0
    cdef unsigned long long u
    cdef bint neg = v < 0
    u = <unsigned long long>(-(v + 1)) + 1 if neg else <unsigned long long>v
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    if neg:
        _byte(b, b'-')
    while n:
        n -= 1
        _byte(b, tmp[n])
    return 0


cdef int _js_uint(_Buf* b, uint64_t v) except -1:
    cdef char tmp[24]
    cdef int n = 0
    while True:
        tmp[n] = <char>(48 + v % 10)
        n += 1
        v //= 10
        if v == 0:
            break
    while n:
        n -= 1
        _byte(b, tmp[n])
    return 0


cdef int _js_hex(_Buf* b, uint64_t v, int digits) except -1:
    cdef int i
    _grow(b, digits)
    for i in range(digits):
        b.data[b.len + i] = _HEXDIGITS[(v >> (4 * (digits - 1 - i))) & 15]
    b.len += digits
    return 0


cdef int _js_double(_Buf* b, double d) except -1:
    cdef char* text
    if isnan(d):
        return _js_lit(b, b'"NaN"')
    if isinf(d):
        return _js_lit(b, b'"Infinity"' if d > 0 else b'"-Infinity"')
    text = PyOS_double_to_string(d, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    try:
        _js_lit(b, text)
    finally:
        PyMem_Free(text)
    return 0


cdef int _js_value(_Buf* b, object value) except -1:
    cdef int overflow = 0
    cdef long long iv
    cdef bint first = True
    if isinstance(value, bool):
        return _js_lit(b, b'{"boolValue":true}' if value else b'{"boolValue":false}')
    if isinstance(value, int):
        iv = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            _js_lit(b, b'{"stringValue":')
            _js_str(b, str(value))
            return _byte(b, b'}')
        _js_lit(b, b'{"intValue":"')
        _js_int(b, iv)
        return _js_lit(b, b'"}')
    if isinstance(value, float):
        _js_lit(b, b'{"doubleValue":')
        _js_double(b, value)
        return _byte(b, b'}')
    if isinstance(value, str):
        _js_lit(b, b'{"stringValue":')
        _js_str(b, value)
        return _byte(b, b'}')
    if isinstance(value, bytes):
        import base64

        _js_lit(b, b'{"bytesValue":"')
        _js_lit(b, base64.b64encode(value))
        return _js_lit(b, b'"}')
    if isinstance(value, (list, tuple)):
        if not value:
            return _js_lit(b, b'{"arrayValue":{}}')
        _js_lit(b, b'{"arrayValue":{"values":[')
        for item in value:
            if not first:
                _byte(b, b',')
            first = False
            _js_value(b, item)
        return _js_lit(b, b']}}')
    _js_lit(b, b'{"stringValue":')
    _js_str(b, str(value))
    return _byte(b, b'}')


cdef int _js_kv(_Buf* b, object key, object value) except -1:
    _js_lit(b, b'{"key":')
    _js_str(b, key)
    _js_lit(b, b',"value":')
    _js_value(b, value)
    return _byte(b, b'}')


cdef bint _js_attrs(_Buf* b, object attrs, bint first) except -1:
    # Appends ``attrs`` as comma-separated KeyValues; returns whether nothing was written yet.
    cdef PyObject* key
    cdef PyObject* value
    cdef Py_ssize_t pos = 0
    if not attrs:
        return first
    if type(attrs) is dict:
        while PyDict_Next(attrs, &pos, &key, &value):
            if not first:
                _byte(b, b',')
            first = False
            _js_kv(b, <object>key, <object>value)
    else:
        for k, v in attrs.items():
            if not first:
                _byte(b, b',')
            first = False
            _js_kv(b, k, v)
    return first


cdef int _js_span(_Buf* b, Span r) except -1:
    cdef bint first
    _js_lit(b, b'{"traceId":"')
    _js_hex(b, r._trace_hi, 16)
    _js_hex(b, r._trace_lo, 16)
    _js_lit(b, b'","spanId":"')
    _js_hex(b, r._span_id, 16)
    _byte(b, b'"')
    if r.trace_state:
        _js_lit(b, b',"traceState":')
        _js_str(b, r.trace_state)
    if r._parent_id:
        _js_lit(b, b',"parentSpanId":"')
        _js_hex(b, r._parent_id, 16)
        _byte(b, b'"')
    _js_lit(b, b',"name":')
    _js_str(b, r.name)
    _js_lit(b, b',"kind":')
    _js_int(b, r.kind)
    _js_lit(b, b',"startTimeUnixNano":"')
    _js_uint(b, <uint64_t>r.start_ns)
    _js_lit(b, b'","endTimeUnixNano":"')
    _js_uint(b, <uint64_t>r.end_ns)
    _byte(b, b'"')
    if r.attrs or r.thread_name is not None:
        _js_lit(b, b',"attributes":[')
        first = _js_attrs(b, r.attrs, True)
        if r.thread_name is not None:
            if not first:
                _byte(b, b',')
            _js_kv(b, "thread.id", r.thread_id)
            _byte(b, b',')
            _js_kv(b, "thread.name", r.thread_name)
        _byte(b, b']')
    if r.dropped_attrs:
        _js_lit(b, b',"droppedAttributesCount":')
        _js_int(b, r.dropped_attrs)
    if r.events:
        _js_lit(b, b',"events":[')
        first = True
        for name, time_ns, attrs in r.events:
            if not first:
                _byte(b, b',')
            first = False
            _js_lit(b, b'{"timeUnixNano":"')
            _js_uint(b, <uint64_t>time_ns)
            _js_lit(b, b'","name":')
            _js_str(b, name)
            if attrs:
                _js_lit(b, b',"attributes":[')
                _js_attrs(b, attrs, True)
                _byte(b, b']')
            _byte(b, b'}')
        _byte(b, b']')
    if r.dropped_events:
        _js_lit(b, b',"droppedEventsCount":')
        _js_int(b, r.dropped_events)
    if r.links:
        _js_lit(b, b',"links":[')
        first = True
        for trace_id, span_id, state, attrs, remote in r.links:
            if not first:
                _byte(b, b',')
            first = False
            _js_lit(b, b'{"traceId":"')
            _js_hex(b, (trace_id >> 64) & 0xFFFFFFFFFFFFFFFF, 16)
            _js_hex(b, trace_id & 0xFFFFFFFFFFFFFFFF, 16)
            _js_lit(b, b'","spanId":"')
            _js_hex(b, span_id, 16)
            _byte(b, b'"')
            if state:
                _js_lit(b, b',"traceState":')
                _js_str(b, state)
            if attrs:
                _js_lit(b, b',"attributes":[')
                _js_attrs(b, attrs, True)
                _byte(b, b']')
            _js_lit(b, b',"flags":')
            _js_int(b, _remote_flags(remote))
            _byte(b, b'}')
        _byte(b, b']')
    if r.dropped_links:
        _js_lit(b, b',"droppedLinksCount":')
        _js_int(b, r.dropped_links)
    _js_lit(b, b',"status":{')
    if r.status_msg:
        _js_lit(b, b'"message":')
        _js_str(b, r.status_msg)
        if r.status_code:
            _byte(b, b',')
    if r.status_code:
        _js_lit(b, b'"code":')
        _js_int(b, r.status_code)
    _js_lit(b, b'},"flags":')
    _js_int(b, _remote_flags(r.parent_remote))
    return _byte(b, b'}')


def encode_traces_json(str resource, scopes, records, resource_schema_url="", scope_schema_urls=()):
    """One OTLP/JSON ``ExportTraceServiceRequest`` line (no newline) for ``records``."""
    cdef _Buf b
    cdef Span r
    cdef bint first_scope = True, first
    b.data = NULL
    b.len = b.cap = 0
    try:
        _js_lit(&b, b'{"resourceSpans":[{"resource":')
        raw = resource.encode("utf-8")
        _put(&b, raw, len(raw))
        _js_lit(&b, b',"scopeSpans":[')
        for scope, group in _by_scope(records):
            if not first_scope:
                _byte(&b, b',')
            first_scope = False
            _js_lit(&b, b'{"scope":')
            raw = (<str>scopes[scope]).encode("utf-8")
            _put(&b, raw, len(raw))
            _js_lit(&b, b',"spans":[')
            first = True
            for r in group:
                if not first:
                    _byte(&b, b',')
                first = False
                _js_span(&b, r)
            _byte(&b, b']')
            url = _schema_url(scope_schema_urls, scope)
            if url:
                _js_lit(&b, b',"schemaUrl":')
                _js_str(&b, url)
            _byte(&b, b'}')
        _byte(&b, b']')
        if resource_schema_url:
            _js_lit(&b, b',"schemaUrl":')
            _js_str(&b, resource_schema_url)
        _js_lit(&b, b'}]}')
        return PyUnicode_DecodeUTF8(b.data, b.len, NULL)
    finally:
        free(b.data)
