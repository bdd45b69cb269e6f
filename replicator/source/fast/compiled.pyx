# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The compiled row decoder (docs/decisions/compiled-decoder.md): rows events straight into
Arrow column buffers, no Python object per value for the common types.

Two classes:

- ``Columns``: the Arrow buffers of one table's change-batch columns (validity bitmap, fixed
  values or int32 offsets + bytes), grown in C and handed to ``pa.Array.from_buffers`` by
  ``source.fast.native``; a column of a type kept as Python values (decimal256, ...) is a
  list, and ``append`` writes any Python value (a library row, a cell read by the reference
  expression) into any column;
- ``ShapeDecoder``: one Table_map's wire layout, as the plan ``codec.native_cells`` gives,
  read by one loop with a switch per cell. A cell whose type has no C reader here is read by
  the reference decoder's own expression (``codec``'s Python, called per value).

Every value equals the reference decoder's (``codec.compile_columnar``): the differential
corpus and the property tests run through both. A layout misread raises ValueError /
IndexError, which ``codec.decode_checked`` turns into the same stop as the reference's.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

cdef extern from *:
    """
    typedef __int128 i128;
    """
    ctypedef long long i128

# Column storage kinds (``Columns``).
cdef enum:
    C_FIXED = 0
    C_VAR = 1
    C_PYLIST = 2

# Column logical kinds (how ``Column.append`` converts a Python value).
cdef enum:
    L_INT = 0
    L_UINT = 1
    L_FLOAT = 2
    L_DEC128 = 3
    L_DATE = 4
    L_TIMESTAMP = 5
    L_STRING = 6
    L_BINARY = 7
    L_PYTHON = 8

# Wire kinds of a cell (``ShapeDecoder``), by the names ``codec.native_cells`` gives.
cdef enum:
    W_INT = 0
    W_YEAR = 1
    W_DOUBLE = 2
    W_DECIMAL = 3
    W_DATE = 4
    W_DATETIME = 5
    W_TIMESTAMP = 6
    W_ENUM = 7
    W_BIT = 8
    W_UTF8 = 9
    W_BYTES = 10
    W_OBJECT_FIXED = 11
    W_OBJECT_VAR = 12

STORAGE = {"fixed": C_FIXED, "var": C_VAR, "python": C_PYLIST}
LOGICAL = {"int": L_INT, "uint": L_UINT, "float": L_FLOAT, "decimal128": L_DEC128,
           "date": L_DATE, "timestamp": L_TIMESTAMP, "string": L_STRING, "binary": L_BINARY,
           "python": L_PYTHON}
WIRE = {"int": W_INT, "year": W_YEAR, "double": W_DOUBLE, "decimal": W_DECIMAL, "date": W_DATE,
        "datetime": W_DATETIME, "timestamp": W_TIMESTAMP, "enum": W_ENUM, "bit": W_BIT,
        "utf8": W_UTF8, "bytes": W_BYTES, "object_fixed": W_OBJECT_FIXED,
        "object_var": W_OBJECT_VAR}

cdef int64_t DAYS_TO_1970 = 719162  # date(1970, 1, 1).toordinal() - 1
cdef int64_t US_PER_DAY = 86400000000
cdef int[13] DAYS_IN_MONTH = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
cdef int[10] DIG2BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
cdef int64_t[10] POW10 = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
                          1000000000]


cdef class Buffer:
    """A growable byte buffer (new bytes are zero)."""
    cdef char* data
    cdef Py_ssize_t size
    cdef Py_ssize_t cap

    def __dealloc__(self):
        free(self.data)

    cdef inline char* grow(self, Py_ssize_t n) except NULL:
        """``n`` more bytes at the end (zeroed); their address."""
        cdef Py_ssize_t want = self.size + n
        cdef Py_ssize_t cap
        cdef char* moved
        if want > self.cap:
            cap = self.cap * 2 if self.cap else 4096
            while cap < want:
                cap *= 2
            moved = <char*>realloc(self.data, cap)
            if moved == NULL:
                raise MemoryError()
            memset(moved + self.cap, 0, cap - self.cap)
            self.data = moved
            self.cap = cap
        cdef char* at = self.data + self.size
        self.size = want
        return at

    cdef bytes take(self):
        cdef bytes out = self.data[:self.size] if self.size else b""
        if self.size:
            memset(self.data, 0, self.size)
        self.size = 0
        return out


cdef class Column:
    cdef int storage
    cdef int logical
    cdef int width  # C_FIXED: bytes per value
    cdef int scale, precision  # L_DEC128
    cdef bint aware  # L_TIMESTAMP: tz=UTC
    cdef Py_ssize_t rows
    cdef Py_ssize_t nulls
    cdef Buffer validity, data, offsets
    cdef list values  # C_PYLIST
    cdef object to_unscaled, to_micros  # Python converters of rare values

    cdef inline void _valid(self, bint valid):
        cdef Py_ssize_t byte = self.rows >> 3
        if byte >= self.validity.size:
            self.validity.grow(byte + 1 - self.validity.size)
        if valid:
            self.validity.data[byte] |= <char>(1 << (self.rows & 7))
        else:
            self.nulls += 1
        self.rows += 1

    cdef inline char* fixed(self) except NULL:
        """The slot of a non-NULL fixed-width value."""
        self._valid(True)
        return self.data.grow(self.width)

    cdef inline int var(self, const char* at, Py_ssize_t n) except -1:
        cdef Py_ssize_t end = self.data.size + n
        if end > 2147483647:
            raise OverflowError("a change-batch string column past 2 GiB in one chunk")
        if n:
            memcpy(self.data.grow(n), at, n)
        (<int32_t*>self.offsets.grow(4))[0] = <int32_t>end
        self._valid(True)
        return 0

    cdef inline int null(self) except -1:
        if self.storage == C_PYLIST:
            self.values.append(None)
            self.rows += 1
            self.nulls += 1
            return 0
        if self.storage == C_FIXED:
            self.data.grow(self.width)
        else:
            (<int32_t*>self.offsets.grow(4))[0] = <int32_t>self.data.size
        self._valid(False)
        return 0

    cdef int put_int(self, object value) except -1:
        cdef char* at
        cdef int64_t s
        cdef uint64_t u
        if self.logical == L_UINT:
            u = value  # OverflowError below 0 or past 2**64-1
            if self.width < 8 and u >> (8 * self.width):
                raise OverflowError(f"{value} does not fit {8 * self.width} bits unsigned")
            at = self.fixed()
            memcpy(at, &u, self.width)  # little-endian host
        else:
            s = value
            if self.width < 8 and (s >= (<int64_t>1) << (8 * self.width - 1)
                                   or s < -((<int64_t>1) << (8 * self.width - 1))):
                raise OverflowError(f"{value} does not fit {8 * self.width} bits")
            at = self.fixed()
            memcpy(at, &s, self.width)
        return 0

    cdef int put_unscaled(self, object unscaled) except -1:
        cdef bytes raw = (<object>unscaled).to_bytes(16, "little", signed=True)
        memcpy(self.fixed(), <const char*>raw, 16)
        return 0

    def append(self, value):
        """Any Python value of this column (a library row's, a reference-read cell's)."""
        cdef double d
        cdef int64_t n
        if value is None:
            self.null()
            return
        if self.storage == C_PYLIST:
            self.values.append(value)
            self.rows += 1
            return
        if self.logical == L_INT or self.logical == L_UINT:
            if isinstance(value, float) or not isinstance(value, int):
                raise TypeError(f"{value!r} is not an integer")
            self.put_int(value)
        elif self.logical == L_FLOAT:
            d = value
            (<double*>self.fixed())[0] = d
        elif self.logical == L_DEC128:
            self.put_unscaled(self.to_unscaled(value, self.precision, self.scale))
        elif self.logical == L_DATE:
            n = value.toordinal() - DAYS_TO_1970 - 1
            (<int32_t*>self.fixed())[0] = <int32_t>n
        elif self.logical == L_TIMESTAMP:
            n = self.to_micros(value)
            (<int64_t*>self.fixed())[0] = n
        elif self.logical == L_STRING:
            if isinstance(value, str):
                raw = (<str>value).encode("utf-8")
            elif isinstance(value, bytes):
                raw = value
                if not utf8_valid(<const uint8_t*><const char*>raw, len(raw)):
                    raise ValueError("a string value is not UTF-8")
            else:
                raise TypeError(f"{value!r} is not a string")
            self.var(<const char*>raw, len(raw))
        elif self.logical == L_BINARY:
            if isinstance(value, str):
                raw = (<str>value).encode("utf-8")
            else:
                raw = bytes(value)
            self.var(<const char*>raw, len(raw))
        else:
            raise TypeError(f"no storage for {value!r}")


cdef class Columns:
    """The change-batch image columns of one table, as Arrow buffers (``native.NativeColumns``
    describes them: storage, logical kind, width, decimal precision/scale, tz)."""
    cdef public list columns

    def __init__(self, specs, to_unscaled, to_micros):
        self.columns = []
        for storage, logical, width, precision, scale, aware in specs:
            column = Column()
            column.storage = storage
            column.logical = logical
            column.width = width
            column.precision = precision
            column.scale = scale
            column.aware = aware
            column.validity = Buffer()
            column.data = Buffer()
            column.offsets = Buffer()
            column.values = []
            column.to_unscaled = to_unscaled
            column.to_micros = to_micros
            if storage == C_VAR:
                column.offsets.grow(4)  # offset 0
            self.columns.append(column)

    def appenders(self):
        return [(<Column>column).append for column in self.columns]

    def take(self):
        """Each column's (rows, nulls, validity, data, offsets, values), emptied."""
        cdef Column column
        out = []
        for column in self.columns:
            offsets = column.offsets.take() if column.storage == C_VAR else None
            out.append((column.rows, column.nulls, column.validity.take(), column.data.take(),
                        offsets, column.values))
            column.values = []
            column.rows = 0
            column.nulls = 0
            if column.storage == C_VAR:
                column.offsets.grow(4)
        return out

    @property
    def largest(self):
        """The bytes of the largest string column: Arrow's string offsets are int32, so the
        reader closes the chunk long before 2 GiB (``columnar.SPILL_BYTES``)."""
        cdef Column column
        cdef Py_ssize_t most = 0
        for column in self.columns:
            if column.storage == C_VAR and column.data.size > most:
                most = column.data.size
        return most


cdef inline bint utf8_valid(const uint8_t* s, Py_ssize_t n):
    """Python's strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
            continue
        if c < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            if c == 0xE0 and c1 < 0xA0:
                return False
            if c == 0xED and c1 >= 0xA0:
                return False
            i += 3
            continue
        if c < 0xF5:
            if i + 3 >= n:
                return False
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return False
            if c == 0xF0 and c1 < 0x90:
                return False
            if c == 0xF4 and c1 >= 0x90:
                return False
            i += 4
            continue
        return False
    return True


cdef inline uint64_t big_endian(const uint8_t* at, int n):
    cdef uint64_t v = 0
    cdef int i
    for i in range(n):
        v = (v << 8) | at[i]
    return v


cdef inline uint64_t little_endian(const uint8_t* at, int n):
    cdef uint64_t v = 0
    cdef int i
    for i in range(n - 1, -1, -1):
        v = (v << 8) | at[i]
    return v


cdef inline int64_t days_from_civil(int64_t y, int64_t m, int64_t d):
    """Days since 1970-01-01 (Howard Hinnant's algorithm)."""
    y -= m <= 2
    cdef int64_t era = (y if y >= 0 else y - 399) // 400
    cdef int64_t yoe = y - era * 400
    cdef int64_t doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    cdef int64_t doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef inline bint valid_date(int64_t y, int64_t m, int64_t d):
    if y < 1 or y > 9999 or m < 1 or m > 12 or d < 1:
        return False
    if m == 2 and (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        return d <= 29
    return d <= DAYS_IN_MONTH[m]


cdef class ShapeDecoder:
    """The rows events of one Table_map shape into ``Columns`` (see the module doc)."""
    cdef int ncols
    cdef int nulls_bytes
    cdef int[:] wire
    cdef int[:] width  # fixed bytes on the wire; variable: the length prefix's bytes
    cdef int[:] a  # per kind: signed / fsp / precision / bits / pad length
    cdef int[:] b  # per kind: scale
    cdef list params  # per column: enum members (bytes), a reader, or None
    cdef list names
    cdef object table
    cdef int[:] keys
    cdef object before_image, silent

    def __init__(self, table, names, plan, keys, before_image, silent):
        import array
        self.table = table
        self.names = list(names)
        self.ncols = len(plan)
        self.nulls_bytes = (self.ncols + 7) // 8
        self.wire = array.array("i", [p[0] for p in plan])
        self.width = array.array("i", [p[1] for p in plan])
        self.a = array.array("i", [p[2] for p in plan])
        self.b = array.array("i", [p[3] for p in plan])
        self.params = [p[4] for p in plan]
        if len(keys) > 32:
            raise ValueError("more than 32 key columns")
        self.keys = array.array("i", list(keys) or [0])
        if not keys:
            self.keys = self.keys[:0]
        self.before_image = before_image
        self.silent = silent

    cdef Py_ssize_t image(self, const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end,
                          list columns, bint store, object zero_dates,
                          Py_ssize_t* spans) except -1:
        """One row image at ``pos``: its end. ``store``: written to ``columns`` (else only
        walked, zero dates still counted/refused as the reference does). ``spans``: each key
        cell's (start, length) when not NULL (-1 when NULL)."""
        cdef int i, k, w, kind, nb
        cdef uint64_t u
        cdef int64_t s, y, m, d, micros, secs
        cdef Py_ssize_t n, start
        cdef const uint8_t* at
        cdef Column column
        cdef i128 unscaled, group
        cdef int intg, frac, intg0, intg0x, frac0, frac0x, g
        cdef uint8_t mask
        cdef uint8_t[32] dec
        cdef const uint8_t* null_at
        if pos + self.nulls_bytes > end:
            raise IndexError("a row image's NULL bitmap past the event's end")
        null_at = buf + pos
        pos += self.nulls_bytes
        for i in range(self.ncols):
            column = <Column>columns[i] if store else None
            if null_at[i >> 3] >> (i & 7) & 1:
                if store:
                    column.null()
                for k in range(self.keys.shape[0]):
                    if self.keys[k] == i:
                        spans[2 * k] = -1
                continue
            kind = self.wire[i]
            w = self.width[i]
            start = pos
            if kind == W_UTF8 or kind == W_BYTES or kind == W_OBJECT_VAR:
                if pos + w > end:
                    raise IndexError("a length prefix past the event's end")
                n = <Py_ssize_t>little_endian(buf + pos, w)
                pos += w
                if pos + n > end:
                    raise IndexError("a value past the event's end")
                at = buf + pos
                pos += n
                if kind == W_UTF8:
                    if not utf8_valid(at, n):
                        raise ValueError(f"{self.table}.{self.names[i]}: bytes that are not "
                                         "UTF-8")
                    if store:
                        column.var(<const char*>at, n)
                elif kind == W_BYTES:
                    if store:
                        if n < self.a[i]:  # BINARY(n): zero-padded back to n bytes
                            column.var(<const char*>at, n)
                            column.data.grow(self.a[i] - n)
                            (<int32_t*>column.offsets.data)[column.rows] = \
                                <int32_t>column.data.size
                        else:
                            column.var(<const char*>at, n)
                else:
                    value = self.params[i](buf[start + w:pos], zero_dates)
                    if store:
                        column.append(value)
            else:
                if pos + w > end:
                    raise IndexError("a value past the event's end")
                at = buf + pos
                pos += w
                if kind == W_INT:
                    if store:
                        if self.a[i]:  # signed: sign-extend the w-byte value
                            u = little_endian(at, w)
                            s = <int64_t>(u << (64 - 8 * w)) >> (64 - 8 * w)
                            memcpy(column.fixed(), &s, column.width)
                        else:
                            u = little_endian(at, w)
                            memcpy(column.fixed(), &u, column.width)
                elif kind == W_YEAR:
                    if store:
                        (<int16_t*>column.fixed())[0] = <int16_t>(at[0] + 1900 if at[0] else 0)
                elif kind == W_DOUBLE:
                    if store:
                        memcpy(column.fixed(), at, 8)
                elif kind == W_DECIMAL:
                    # MySQL's packed decimal (decimal.cc): groups of 9 digits in 4 bytes
                    # big-endian, a leading and a trailing short group, the sign in the top
                    # bit, a negative value stored inverted.
                    intg = self.a[i] - self.b[i]
                    frac = self.b[i]
                    intg0 = intg // 9
                    intg0x = intg % 9
                    frac0 = frac // 9
                    frac0x = frac % 9
                    mask = 0 if at[0] & 0x80 else 0xFF
                    for k in range(w):
                        dec[k] = at[k] ^ mask
                    dec[0] ^= 0x80
                    unscaled = 0
                    k = 0
                    if intg0x:
                        nb = DIG2BYTES[intg0x]
                        group = <i128>big_endian(dec, nb)
                        if group >= POW10[intg0x]:
                            raise ValueError("a DECIMAL digit group out of range")
                        unscaled = group
                        k = nb
                    for g in range(intg0 + frac0):
                        group = <i128>big_endian(dec + k, 4)
                        if group >= 1000000000:
                            raise ValueError("a DECIMAL digit group out of range")
                        unscaled = unscaled * 1000000000 + group
                        k += 4
                    if frac0x:
                        nb = DIG2BYTES[frac0x]
                        group = <i128>big_endian(dec + k, nb)
                        if group >= POW10[frac0x]:
                            raise ValueError("a DECIMAL digit group out of range")
                        unscaled = unscaled * POW10[frac0x] + group
                    if store:
                        if mask:
                            unscaled = -unscaled
                        memcpy(column.fixed(), &unscaled, 16)
                elif kind == W_DATE:
                    u = little_endian(at, 3)
                    y = u >> 9
                    m = (u >> 5) & 15
                    d = u & 31
                    if not (y and m and d):
                        zero_dates(self.table, self.names[i], "0000-00-00")
                        if store:
                            column.null()
                    else:
                        if not valid_date(y, m, d):
                            raise ValueError(f"{self.table}.{self.names[i]}: no such date "
                                             f"{y}-{m}-{d}")
                        if store:
                            (<int32_t*>column.fixed())[0] = <int32_t>days_from_civil(y, m, d)
                elif kind == W_DATETIME:
                    nb = w - 5
                    u = big_endian(at, 5)
                    micros = 0
                    if nb:
                        micros = <int64_t>big_endian(at + 5, nb)
                        if self.a[i] % 2:
                            micros //= 10
                        micros *= POW10[6 - self.a[i]]
                    s = (u >> 22) & 0x1FFFF  # year * 13 + month
                    y = s // 13
                    m = s % 13
                    d = (u >> 17) & 31
                    secs = (((u >> 12) & 31) * 60 + ((u >> 6) & 63)) * 60 + (u & 63)
                    if (not valid_date(y, m, d) or (u >> 12) & 31 > 23 or (u >> 6) & 63 > 59
                            or u & 63 > 59 or micros > 999999):
                        zero_dates(self.table, self.names[i], "0000-00-00")
                        if store:
                            column.null()
                    elif store:
                        (<int64_t*>column.fixed())[0] = (days_from_civil(y, m, d) * US_PER_DAY
                                                         + secs * 1000000 + micros)
                elif kind == W_TIMESTAMP:
                    nb = w - 4
                    secs = <int64_t>big_endian(at, 4)
                    micros = 0
                    if nb:
                        micros = <int64_t>big_endian(at + 4, nb)
                        if self.a[i] % 2:
                            micros //= 10
                        micros *= POW10[6 - self.a[i]]
                    if not secs and not micros:  # MySQL's zero timestamp
                        zero_dates(self.table, self.names[i], "0000-00-00 00:00:00")
                        if store:
                            column.null()
                    else:
                        if micros > 999999:
                            raise ValueError("microsecond must be in 0..999999")
                        if store:
                            (<int64_t*>column.fixed())[0] = secs * 1000000 + micros
                elif kind == W_ENUM:
                    u = little_endian(at, w)
                    members = <tuple>self.params[i]
                    if not len(members):
                        if store:
                            column.null()
                    else:
                        if u >= <uint64_t>len(members):
                            raise IndexError("an ENUM index past the column's members")
                        if store:
                            member = <bytes>members[u]
                            column.var(<const char*>member, len(member))
                elif kind == W_BIT:
                    if store:
                        u = big_endian(at, w) if w <= 8 else 0
                        if w > 8:
                            raise ValueError("a BIT value wider than 8 bytes")
                        if self.a[i] < 64:
                            u &= ((<uint64_t>1) << self.a[i]) - 1
                        (<uint64_t*>column.fixed())[0] = u
                else:  # W_OBJECT_FIXED: the reference expression over the cell's bytes
                    value = self.params[i](buf[start:pos], zero_dates)
                    if store:
                        column.append(value)
            for k in range(self.keys.shape[0]):
                if self.keys[k] == i:
                    spans[2 * k] = start
                    spans[2 * k + 1] = pos - start
        return pos

    def inserts(self, bytes buf, Py_ssize_t pos, Py_ssize_t end, Columns out, moved,
                zero_dates):
        """The reference decoder's signature: (end, rows)."""
        return self._images(buf, pos, end, out, zero_dates)

    def deletes(self, bytes buf, Py_ssize_t pos, Py_ssize_t end, Columns out, moved,
                zero_dates):
        return self._images(buf, pos, end, out, zero_dates)

    cdef tuple _images(self, bytes buf, Py_ssize_t pos, Py_ssize_t end, Columns out,
                       object zero_dates):
        cdef const uint8_t* data = <const uint8_t*><const char*>buf
        cdef Py_ssize_t rows = 0
        cdef Py_ssize_t[64] spans
        if end > len(buf):
            raise IndexError("the rows event past its packet")
        columns = out.columns
        while pos < end:
            pos = self.image(data, pos, end, columns, True, zero_dates, spans)
            rows += 1
        return pos, rows

    def updates(self, bytes buf, Py_ssize_t pos, Py_ssize_t end, Columns out, moved,
                zero_dates):
        """After-images stored; a row whose key cells' bytes differ is checked by the
        reference decoder's values (rare: a key move), and a real move calls
        ``moved(row, before)`` with the reference's before-image, as its decoder does."""
        cdef const uint8_t* data = <const uint8_t*><const char*>buf
        cdef Py_ssize_t rows = 0
        cdef Py_ssize_t start, after
        cdef Py_ssize_t[64] old
        cdef Py_ssize_t[64] new
        cdef int k, nkeys = self.keys.shape[0]
        cdef bint differ
        if end > len(buf):
            raise IndexError("the rows event past its packet")
        if nkeys > 32:
            raise ValueError("more than 32 key columns")
        columns = out.columns
        while pos < end:
            start = pos
            after = self.image(data, pos, end, columns, False, zero_dates, old)
            pos = self.image(data, after, end, columns, True, zero_dates, new)
            differ = False
            for k in range(nkeys):
                if old[2 * k] < 0 or new[2 * k] < 0:
                    differ = differ or (old[2 * k] < 0) != (new[2 * k] < 0)
                elif old[2 * k + 1] != new[2 * k + 1] or \
                        memcmp_(data + old[2 * k], data + new[2 * k], old[2 * k + 1]):
                    differ = True
            if differ and self._moved(buf, start, after):
                moved(rows, self.before_image(buf, start, zero_dates))
            rows += 1
        return pos, rows

    cdef bint _moved(self, bytes buf, Py_ssize_t start, Py_ssize_t after) except -1:
        """Equal values can have unequal bytes (two zero dates, -0.0 and 0.0): the
        reference decides, its zero dates not counted twice."""
        old = self.before_image(buf, start, self.silent)
        new = self.before_image(buf, after, self.silent)
        for k in range(self.keys.shape[0]):
            if old[self.keys[k]] != new[self.keys[k]]:
                return True
        return False


cdef inline int memcmp_(const uint8_t* x, const uint8_t* y, Py_ssize_t n):
    cdef Py_ssize_t i
    for i in range(n):
        if x[i] != y[i]:
            return 1
    return 0
