/*
 * toolproof._jcs: the fast path of toolproof.identity.canonical_json (RFC 8785, JCS).
 *
 * encode(value) returns the canonical UTF-8 bytes of a plain JSON value, or None
 * when it meets anything it does not handle exactly: a type that is not exactly
 * dict / list / str / int / float / bool / None (subclasses included), a
 * non-string key, NaN or an infinity, an integer outside +-(2**53 - 1), a lone
 * surrogate, or containers nested MAX_DEPTH deep. On None the caller runs the exact
 * pure-Python encoder, which either produces the same bytes or raises the
 * CanonicalizationError naming where the bad item sits. This code therefore never
 * decides what is an error: it only ever produces bytes it is sure of.
 *
 * No Python code runs during encoding (only exact built-in types are touched), so
 * the value cannot change under us.
 *
 * sha256_hex(data) is a one-shot SHA-256 as hex digits (see the section below), and
 * chain(prev_json, idx, lines) splices and hash-chains trace lines (the last section).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 256 /* identity.MAX_DEPTH: deeper containers are refused there */
#define MAX_SAFE_INTEGER 9007199254740991LL

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} Buffer;

/* Return codes of the encoders. */
#define OK 0
#define BAIL 1 /* not handled: the exact encoder decides */
#define FAIL -1 /* a Python exception is set (MemoryError) */

static int
grow(Buffer *buf, size_t extra)
{
    size_t need = buf->len + extra;
    if (need <= buf->cap) {
        return OK;
    }
    size_t cap = buf->cap ? buf->cap : 256;
    while (cap < need) {
        cap *= 2;
    }
    char *data = PyMem_Realloc(buf->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    buf->data = data;
    buf->cap = cap;
    return OK;
}

static inline int
put(Buffer *buf, const char *text, size_t n)
{
    if (grow(buf, n) != OK) {
        return FAIL;
    }
    memcpy(buf->data + buf->len, text, n);
    buf->len += n;
    return OK;
}

static const char HEX[] = "0123456789abcdef";

/* JSON.stringify string escaping (RFC 8785 section 3.2.2.2). */
static int
encode_string(Buffer *buf, PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *src = PyUnicode_DATA(text);
    /* worst case: 6 bytes per code unit (\u00XX) plus quotes */
    if (grow(buf, (size_t)n * 6 + 2) != OK) {
        return FAIL;
    }
    char *out = buf->data + buf->len;
    *out++ = '"';
    if (PyUnicode_IS_ASCII(text)) {
        /* copy runs of characters that need no escape in one go */
        const unsigned char *bytes = (const unsigned char *)src;
        Py_ssize_t run = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char c = bytes[i];
            if (c >= 0x20 && c != '"' && c != '\\') {
                continue;
            }
            memcpy(out, bytes + run, (size_t)(i - run));
            out += i - run;
            run = i + 1;
            *out++ = '\\';
            switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\t': *out++ = 't'; break;
            case '\n': *out++ = 'n'; break;
            case '\f': *out++ = 'f'; break;
            case '\r': *out++ = 'r'; break;
            default:
                *out++ = 'u';
                *out++ = '0';
                *out++ = '0';
                *out++ = HEX[c >> 4];
                *out++ = HEX[c & 0xF];
            }
        }
        memcpy(out, bytes + run, (size_t)(n - run));
        out += n - run;
        *out++ = '"';
        buf->len = (size_t)(out - buf->data);
        return OK;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, src, i);
        if (c >= 0x20 && c < 0x80) {
            if (c == '"' || c == '\\') {
                *out++ = '\\';
            }
            *out++ = (char)c;
        }
        else if (c < 0x20) {
            *out++ = '\\';
            switch (c) {
            case '\b': *out++ = 'b'; break;
            case '\t': *out++ = 't'; break;
            case '\n': *out++ = 'n'; break;
            case '\f': *out++ = 'f'; break;
            case '\r': *out++ = 'r'; break;
            default:
                *out++ = 'u';
                *out++ = '0';
                *out++ = '0';
                *out++ = HEX[c >> 4];
                *out++ = HEX[c & 0xF];
            }
        }
        else if (c < 0x800) {
            *out++ = (char)(0xC0 | (c >> 6));
            *out++ = (char)(0x80 | (c & 0x3F));
        }
        else if (c < 0x10000) {
            if (c >= 0xD800 && c <= 0xDFFF) {
                return BAIL; /* lone surrogate: not Unicode text */
            }
            *out++ = (char)(0xE0 | (c >> 12));
            *out++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (char)(0x80 | (c & 0x3F));
        }
        else {
            *out++ = (char)(0xF0 | (c >> 18));
            *out++ = (char)(0x80 | ((c >> 12) & 0x3F));
            *out++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (char)(0x80 | (c & 0x3F));
        }
    }
    *out++ = '"';
    buf->len = (size_t)(out - buf->data);
    return OK;
}

static int
encode_int(Buffer *buf, PyObject *value)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0 || v > MAX_SAFE_INTEGER || v < -MAX_SAFE_INTEGER) {
        return BAIL;
    }
    if (v == -1 && PyErr_Occurred()) {
        return FAIL;
    }
    char tmp[24];
    int pos = 24;
    unsigned long long u = v < 0 ? (unsigned long long)(-v) : (unsigned long long)v;
    do {
        tmp[--pos] = (char)('0' + (u % 10));
        u /= 10;
    } while (u);
    if (v < 0) {
        tmp[--pos] = '-';
    }
    return put(buf, tmp + pos, (size_t)(24 - pos));
}

#if defined(__SIZEOF_INT128__) && !defined(TOOLPROOF_JCS_NO_RYU)
#define HAVE_RYU 1
#include "_jcs_pow5.h"

/*
 * Shortest round-trip digits of a positive finite double with the Ryu method
 * (Ulf Adams, "Ryu: fast float-to-string conversion", PLDI 2018): the shortest
 * decimal in the rounding interval of the double, the nearest one when several
 * have that length, ties to even -- the digits ECMAScript Number::toString needs
 * and Python's repr prints. The tests compare it with repr on random bit patterns.
 */
static inline int32_t
pow5bits(int32_t e)
{
    return (int32_t)((((uint32_t)e) * 1217359u) >> 19) + 1;
}

static inline uint32_t
log10_pow2(int32_t e)
{
    return (((uint32_t)e) * 78913u) >> 18;
}

static inline uint32_t
log10_pow5(int32_t e)
{
    return (((uint32_t)e) * 732923u) >> 20;
}

static inline int
multiple_of_pow5(uint64_t value, uint32_t p)
{
    uint32_t count = 0;
    while (value % 5 == 0) {
        value /= 5;
        count++;
    }
    return count >= p;
}

static inline int
multiple_of_pow2(uint64_t value, uint32_t p)
{
    return (value & ((1ull << p) - 1)) == 0;
}

static inline uint64_t
mul_shift(uint64_t m, const uint64_t *mul, int32_t j)
{
    unsigned __int128 low = (unsigned __int128)m * mul[0];
    unsigned __int128 high = (unsigned __int128)m * mul[1];
    return (uint64_t)(((low >> 64) + high) >> (j - 64));
}

/* value > 0 and finite: returns the digits as an integer, sets *exponent (value = d * 10**e). */
static uint64_t
ryu_digits(double value, int32_t *exponent)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    const uint64_t ieee_m = bits & ((1ull << 52) - 1);
    const uint32_t ieee_e = (uint32_t)((bits >> 52) & 0x7FF);
    int32_t e2;
    uint64_t m2;
    if (ieee_e == 0) {
        e2 = 1 - 1023 - 52 - 2;
        m2 = ieee_m;
    }
    else {
        e2 = (int32_t)ieee_e - 1023 - 52 - 2;
        m2 = (1ull << 52) | ieee_m;
    }
    const int accept_bounds = (m2 & 1) == 0;
    const uint64_t mv = 4 * m2;
    const uint32_t mm_shift = ieee_m != 0 || ieee_e <= 1;
    uint64_t vr, vp, vm;
    int32_t e10;
    int vm_zeros = 0;
    int vr_zeros = 0;
    if (e2 >= 0) {
        const uint32_t q = log10_pow2(e2) - (e2 > 3);
        e10 = (int32_t)q;
        const int32_t k = POW5_INV_BITCOUNT + pow5bits((int32_t)q) - 1;
        const int32_t i = -e2 + (int32_t)q + k;
        vr = mul_shift(mv, POW5_INV_SPLIT[q], i);
        vp = mul_shift(mv + 2, POW5_INV_SPLIT[q], i);
        vm = mul_shift(mv - 1 - mm_shift, POW5_INV_SPLIT[q], i);
        if (q <= 21) {
            if (mv % 5 == 0) {
                vr_zeros = multiple_of_pow5(mv, q);
            }
            else if (accept_bounds) {
                vm_zeros = multiple_of_pow5(mv - 1 - mm_shift, q);
            }
            else {
                vp -= (uint64_t)multiple_of_pow5(mv + 2, q);
            }
        }
    }
    else {
        const uint32_t q = log10_pow5(-e2) - (-e2 > 1);
        e10 = (int32_t)q + e2;
        const int32_t i = -e2 - (int32_t)q;
        const int32_t k = pow5bits(i) - POW5_BITCOUNT;
        const int32_t j = (int32_t)q - k;
        vr = mul_shift(mv, POW5_SPLIT[i], j);
        vp = mul_shift(mv + 2, POW5_SPLIT[i], j);
        vm = mul_shift(mv - 1 - mm_shift, POW5_SPLIT[i], j);
        if (q <= 1) {
            vr_zeros = 1;
            if (accept_bounds) {
                vm_zeros = mm_shift == 1;
            }
            else {
                --vp;
            }
        }
        else if (q < 63) {
            vr_zeros = multiple_of_pow2(mv, q);
        }
    }
    int32_t removed = 0;
    uint64_t output;
    if (vm_zeros || vr_zeros) {
        uint32_t last = 0;
        while (vp / 10 > vm / 10) {
            vm_zeros &= vm % 10 == 0;
            vr_zeros &= last == 0;
            last = (uint32_t)(vr % 10);
            vr /= 10;
            vp /= 10;
            vm /= 10;
            removed++;
        }
        if (vm_zeros) {
            while (vm % 10 == 0) {
                vr_zeros &= last == 0;
                last = (uint32_t)(vr % 10);
                vr /= 10;
                vp /= 10;
                vm /= 10;
                removed++;
            }
        }
        if (vr_zeros && last == 5 && vr % 2 == 0) {
            last = 4; /* exactly halfway: round to even */
        }
        output = vr + ((vr == vm && (!accept_bounds || !vm_zeros)) || last >= 5);
    }
    else {
        int round_up = 0;
        if (vp / 100 > vm / 100) {
            round_up = vr % 100 >= 50;
            vr /= 100;
            vp /= 100;
            vm /= 100;
            removed += 2;
        }
        while (vp / 10 > vm / 10) {
            round_up = vr % 10 >= 5;
            vr /= 10;
            vp /= 10;
            vm /= 10;
            removed++;
        }
        output = vr + (vr == vm || round_up);
    }
    *exponent = e10 + removed;
    return output;
}
#endif

/*
 * ECMAScript Number::toString for a finite double (RFC 8785 section 3.2.2.3).
 * The digits are the shortest that round-trip, nearest on ties (Ryu above, or
 * Python's repr where 128-bit integers are missing); only the layout is ECMAScript's.
 */
static int
encode_float(Buffer *buf, double value)
{
    if (!isfinite(value)) {
        return BAIL;
    }
    if (value == 0.0) {
        return put(buf, "0", 1);
    }
    if (value >= -9007199254740991.0 && value <= 9007199254740991.0
        && value == (double)(long long)value) {
        /* an integral double below 2**53 prints as that integer (its shortest digits) */
        char tmp[24];
        int pos = 24;
        long long v = (long long)value;
        unsigned long long u = v < 0 ? (unsigned long long)(-v) : (unsigned long long)v;
        do {
            tmp[--pos] = (char)('0' + (u % 10));
            u /= 10;
        } while (u);
        if (v < 0) {
            tmp[--pos] = '-';
        }
        return put(buf, tmp + pos, (size_t)(24 - pos));
    }
    char digits[32];
    int k = 0;
    int start = 0;
    long point;
#ifdef HAVE_RYU
    {
        int32_t exponent;
        uint64_t mantissa = ryu_digits(value < 0 ? -value : value, &exponent);
        char tmp[24];
        int pos = 24;
        do {
            tmp[--pos] = (char)('0' + (mantissa % 10));
            mantissa /= 10;
        } while (mantissa);
        k = 24 - pos;
        memcpy(digits, tmp + pos, (size_t)k);
        point = k + exponent;
    }
#else
    {
        char *repr = PyOS_double_to_string(value < 0 ? -value : value, 'r', 0, 0, NULL);
        if (repr == NULL) {
            return FAIL;
        }
        /* repr is [digits][.digits][e(+|-)digits] */
        int int_len = 0;
        int seen_point = 0;
        long exponent = 0;
        const char *p = repr;
        for (; *p && *p != 'e'; p++) {
            if (*p == '.') {
                seen_point = 1;
            }
            else {
                if (k >= 30) {
                    PyMem_Free(repr);
                    return BAIL;
                }
                digits[k++] = *p;
                if (!seen_point) {
                    int_len++;
                }
            }
        }
        if (*p == 'e') {
            exponent = strtol(p + 1, NULL, 10);
        }
        PyMem_Free(repr);
        point = int_len + exponent;
    }
#endif
    while (start < k && digits[start] == '0') {
        start++;
        point--;
    }
    while (k > start && digits[k - 1] == '0') {
        k--;
    }
    if (start == k) {
        return BAIL; /* cannot happen for a non-zero double */
    }
    const char *d = digits + start;
    int n = k - start;
    char out[64];
    int len = 0;
    if (value < 0) {
        out[len++] = '-';
    }
    if (n <= point && point <= 21) {
        memcpy(out + len, d, (size_t)n);
        len += n;
        for (long i = n; i < point; i++) {
            out[len++] = '0';
        }
    }
    else if (0 < point && point <= 21) {
        memcpy(out + len, d, (size_t)point);
        len += (int)point;
        out[len++] = '.';
        memcpy(out + len, d + point, (size_t)(n - point));
        len += n - (int)point;
    }
    else if (-6 < point && point <= 0) {
        out[len++] = '0';
        out[len++] = '.';
        for (long i = 0; i < -point; i++) {
            out[len++] = '0';
        }
        memcpy(out + len, d, (size_t)n);
        len += n;
    }
    else {
        long e = point - 1;
        out[len++] = d[0];
        if (n > 1) {
            out[len++] = '.';
            memcpy(out + len, d + 1, (size_t)(n - 1));
            len += n - 1;
        }
        len += snprintf(out + len, sizeof(out) - (size_t)len, "e%c%ld", e < 0 ? '-' : '+',
                        e < 0 ? -e : e);
    }
    return put(buf, out, (size_t)len);
}

/* Order of two different code points by their UTF-16 code units (RFC 8785 3.2.3). */
static inline int
utf16_order(Py_UCS4 a, Py_UCS4 b)
{
    Py_UCS4 ua = a >= 0x10000 ? 0xD800 + ((a - 0x10000) >> 10) : a;
    Py_UCS4 ub = b >= 0x10000 ? 0xD800 + ((b - 0x10000) >> 10) : b;
    if (ua != ub) {
        return ua < ub ? -1 : 1;
    }
    return a < b ? -1 : 1;
}

typedef struct {
    PyObject *key;
    PyObject *value;
} Member;

/* <0, 0, >0 as key x sorts before, with, after key y by UTF-16 code units. */
static int
compare_keys(PyObject *x, PyObject *y)
{
    Py_ssize_t lx = PyUnicode_GET_LENGTH(x);
    Py_ssize_t ly = PyUnicode_GET_LENGTH(y);
    Py_ssize_t n = lx < ly ? lx : ly;
    int kx = PyUnicode_KIND(x);
    int ky = PyUnicode_KIND(y);
    const void *dx = PyUnicode_DATA(x);
    const void *dy = PyUnicode_DATA(y);
    if (kx == PyUnicode_1BYTE_KIND && ky == PyUnicode_1BYTE_KIND) {
        int c = memcmp(dx, dy, (size_t)n);
        if (c != 0) {
            return c;
        }
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 a = PyUnicode_READ(kx, dx, i);
            Py_UCS4 b = PyUnicode_READ(ky, dy, i);
            if (a != b) {
                return utf16_order(a, b);
            }
        }
    }
    return (lx > ly) - (lx < ly);
}

static int
compare_members(const void *left, const void *right)
{
    return compare_keys(((const Member *)left)->key, ((const Member *)right)->key);
}

static int encode_value(Buffer *buf, PyObject *value, int depth);

static int
encode_dict(Buffer *buf, PyObject *value, int depth)
{
    Py_ssize_t n = PyDict_GET_SIZE(value);
    if (n == 0) {
        return put(buf, "{}", 2);
    }
    Member small[32];
    Member *members = small;
    if (n > 32) {
        members = PyMem_Malloc(sizeof(Member) * (size_t)n);
        if (members == NULL) {
            PyErr_NoMemory();
            return FAIL;
        }
    }
    Py_ssize_t pos = 0;
    Py_ssize_t count = 0;
    PyObject *key;
    PyObject *item;
    int rc = OK;
    while (count < n && PyDict_Next(value, &pos, &key, &item)) {
        if (!PyUnicode_CheckExact(key)) {
            rc = BAIL;
            goto done;
        }
        members[count].key = key;
        members[count].value = item;
        count++;
    }
    if (count != n) {
        rc = BAIL; /* cannot happen: nothing runs that could resize the dict */
        goto done;
    }
    if (n <= 16) {
        for (Py_ssize_t i = 1; i < n; i++) { /* insertion sort: few keys, mostly ASCII */
            Member m = members[i];
            Py_ssize_t j = i;
            while (j > 0 && compare_keys(members[j - 1].key, m.key) > 0) {
                members[j] = members[j - 1];
                j--;
            }
            members[j] = m;
        }
    }
    else {
        qsort(members, (size_t)n, sizeof(Member), compare_members);
    }
    rc = put(buf, "{", 1);
    for (Py_ssize_t i = 0; i < n && rc == OK; i++) {
        if (i > 0) {
            rc = put(buf, ",", 1);
            if (rc != OK) {
                break;
            }
        }
        rc = encode_string(buf, members[i].key);
        if (rc == OK) {
            rc = put(buf, ":", 1);
        }
        if (rc == OK) {
            rc = encode_value(buf, members[i].value, depth + 1);
        }
    }
    if (rc == OK) {
        rc = put(buf, "}", 1);
    }
done:
    if (members != small) {
        PyMem_Free(members);
    }
    return rc;
}

static int
encode_list(Buffer *buf, PyObject *value, int depth)
{
    Py_ssize_t n = PyList_GET_SIZE(value);
    if (n == 0) {
        return put(buf, "[]", 2);
    }
    int rc = put(buf, "[", 1);
    for (Py_ssize_t i = 0; i < n && rc == OK; i++) {
        if (i > 0) {
            rc = put(buf, ",", 1);
            if (rc != OK) {
                break;
            }
        }
        rc = encode_value(buf, PyList_GET_ITEM(value, i), depth + 1);
    }
    if (rc == OK) {
        rc = put(buf, "]", 1);
    }
    return rc;
}

static int
encode_value(Buffer *buf, PyObject *value, int depth)
{
    if (PyUnicode_CheckExact(value)) {
        return encode_string(buf, value);
    }
    if (PyDict_CheckExact(value)) {
        return depth >= MAX_DEPTH ? BAIL : encode_dict(buf, value, depth);
    }
    if (PyList_CheckExact(value)) {
        return depth >= MAX_DEPTH ? BAIL : encode_list(buf, value, depth);
    }
    if (PyLong_CheckExact(value)) {
        return encode_int(buf, value);
    }
    if (value == Py_True) {
        return put(buf, "true", 4);
    }
    if (value == Py_False) {
        return put(buf, "false", 5);
    }
    if (value == Py_None) {
        return put(buf, "null", 4);
    }
    if (PyFloat_CheckExact(value)) {
        return encode_float(buf, PyFloat_AS_DOUBLE(value));
    }
    return BAIL;
}

static PyObject *
jcs_encode(PyObject *module, PyObject *value)
{
    (void)module;
    Buffer buf = {NULL, 0, 0};
    int rc = encode_value(&buf, value, 0);
    PyObject *result;
    if (rc == OK) {
        result = PyBytes_FromStringAndSize(buf.data, (Py_ssize_t)buf.len);
    }
    else if (rc == BAIL) {
        result = Py_NewRef(Py_None);
    }
    else {
        result = NULL;
    }
    PyMem_Free(buf.data);
    return result;
}

/*
 * One-shot SHA-256 (FIPS 180-4) of a bytes-like object, as 64 lowercase hex ASCII
 * digits: the per-line digest of the trace chain and the call and evidence ids, where
 * hashlib's object and EVP-context setup cost more than the hashing itself.
 *
 * Two block functions share the padding and the hex output: a portable C one, and on
 * x86-64 one built on the SHA extensions (SHA-NI), chosen once at module init by
 * CPUID (define TOOLPROOF_NO_SHA_NI to build the portable one alone). The tests
 * compare both with hashlib on random and boundary-length inputs.
 */
#define SHA256_BLOCK 64
#define SHA256_RELEASE_GIL 4096 /* from this many bytes on, hash without the GIL */

static const uint32_t SHA256_INIT[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

/* FIPS 180-4 section 4.2.2: cube roots of the first 64 primes, first 32 fraction bits. */
static const uint32_t SHA256_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5,
    0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
    0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
    0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

typedef void (*sha256_blocks_fn)(uint32_t state[8], const unsigned char *data, size_t blocks);

static inline uint32_t
rotr32(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t
load_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* One round of section 6.2.2 step 3; the caller rotates the names of a..h instead of the values. */
#define SHA256_ROUND(a, b, c, d, e, f, g, h, i)                                                  \
    do {                                                                                     \
        uint32_t t1 = h + (rotr32(e, 6) ^ rotr32(e, 11) ^ rotr32(e, 25))                     \
                      + ((e & f) ^ (~e & g)) + SHA256_K[i] + w[(i) & 15];                    \
        uint32_t t2 = (rotr32(a, 2) ^ rotr32(a, 13) ^ rotr32(a, 22))                         \
                      + ((a & b) ^ (a & c) ^ (b & c));                                       \
        d += t1;                                                                             \
        h = t1 + t2;                                                                         \
    } while (0)

/* W[i] for i >= 16 (section 6.2.2 step 1), in a ring of the last 16 words. */
#define SHA256_SCHEDULE(i)                                                                   \
    do {                                                                                     \
        uint32_t x = w[((i) - 15) & 15];                                                     \
        uint32_t y = w[((i) - 2) & 15];                                                      \
        w[(i) & 15] += (rotr32(y, 17) ^ rotr32(y, 19) ^ (y >> 10)) + w[((i) - 7) & 15]       \
                       + (rotr32(x, 7) ^ rotr32(x, 18) ^ (x >> 3));                          \
    } while (0)

static void
sha256_blocks_portable(uint32_t state[8], const unsigned char *data, size_t blocks)
{
    uint32_t w[16];
    for (; blocks > 0; blocks--, data += SHA256_BLOCK) {
        uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
        uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
        for (int i = 0; i < 16; i++) {
            w[i] = load_be32(data + 4 * i);
        }
        for (int i = 0; i < 64; i += 8) {
            if (i >= 16) {
                for (int j = i; j < i + 8; j++) {
                    SHA256_SCHEDULE(j);
                }
            }
            SHA256_ROUND(a, b, c, d, e, f, g, h, i);
            SHA256_ROUND(h, a, b, c, d, e, f, g, i + 1);
            SHA256_ROUND(g, h, a, b, c, d, e, f, i + 2);
            SHA256_ROUND(f, g, h, a, b, c, d, e, i + 3);
            SHA256_ROUND(e, f, g, h, a, b, c, d, i + 4);
            SHA256_ROUND(d, e, f, g, h, a, b, c, i + 5);
            SHA256_ROUND(c, d, e, f, g, h, a, b, i + 6);
            SHA256_ROUND(b, c, d, e, f, g, h, a, i + 7);
        }
        state[0] += a;
        state[1] += b;
        state[2] += c;
        state[3] += d;
        state[4] += e;
        state[5] += f;
        state[6] += g;
        state[7] += h;
    }
}

static void
hex_portable(const uint32_t state[8], char *out)
{
    for (int i = 0; i < 8; i++) {
        for (int shift = 28; shift >= 0; shift -= 4) {
            *out++ = HEX[(state[i] >> shift) & 0xF];
        }
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TOOLPROOF_NO_SHA_NI)
#define HAVE_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>

#define SHA_NI_TARGET __attribute__((target("sha,sse4.1,ssse3")))

/*
 * The SHA extensions keep the state as two vectors, ABEF and CDGH (A in the top lane);
 * SHA256RNDS2 does two rounds from the low two words of (W + K), SHA256MSG1 and
 * SHA256MSG2 the two halves of the schedule of four words.
 */
#define SHA_NI_ROUNDS4(group, m)                                                            \
    do {                                                                                    \
        __m128i wk = _mm_add_epi32(m, _mm_loadu_si128((const __m128i *)&SHA256_K[4 * (group)])); \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);                                       \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));              \
    } while (0)

/* m0 = W[t-16..t-13] becomes W[t..t+3] from m1 = W[t-12..], m2 = W[t-8..], m3 = W[t-4..]. */
#define SHA_NI_SCHEDULE(m0, m1, m2, m3)                                                     \
    m0 = _mm_sha256msg2_epu32(                                                              \
        _mm_add_epi32(_mm_sha256msg1_epu32(m0, m1), _mm_alignr_epi8(m3, m2, 4)), m3)

SHA_NI_TARGET static void
sha256_blocks_sha_ni(uint32_t state[8], const unsigned char *data, size_t blocks)
{
    /* big-endian words: reverse the bytes inside each 32-bit lane */
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&state[0]); /* lanes A B C D */
    __m128i efgh = _mm_loadu_si128((const __m128i *)&state[4]); /* lanes E F G H */
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);               /* B A D C */
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);               /* H G F E */
    __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);              /* F E B A */
    __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);           /* H G D C */
    for (; blocks > 0; blocks--, data += SHA256_BLOCK) {
        const __m128i abef_in = abef;
        const __m128i cdgh_in = cdgh;
        __m128i m0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 0)), bswap);
        __m128i m1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16)), bswap);
        __m128i m2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 32)), bswap);
        __m128i m3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 48)), bswap);
        SHA_NI_ROUNDS4(0, m0);
        SHA_NI_ROUNDS4(1, m1);
        SHA_NI_ROUNDS4(2, m2);
        SHA_NI_ROUNDS4(3, m3);
        for (int group = 4; group < 16; group += 4) {
            SHA_NI_SCHEDULE(m0, m1, m2, m3);
            SHA_NI_ROUNDS4(group, m0);
            SHA_NI_SCHEDULE(m1, m2, m3, m0);
            SHA_NI_ROUNDS4(group + 1, m1);
            SHA_NI_SCHEDULE(m2, m3, m0, m1);
            SHA_NI_ROUNDS4(group + 2, m2);
            SHA_NI_SCHEDULE(m3, m0, m1, m2);
            SHA_NI_ROUNDS4(group + 3, m3);
        }
        abef = _mm_add_epi32(abef, abef_in);
        cdgh = _mm_add_epi32(cdgh, cdgh_in);
    }
    __m128i abef_rev = _mm_shuffle_epi32(abef, 0x1B); /* A B E F */
    __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xB1);      /* G H C D */
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(abef_rev, ghcd, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(ghcd, abef_rev, 8));
}

/* 16 digest bytes as 32 hex digits: split the nibbles, then look each up with PSHUFB. */
SHA_NI_TARGET static inline void
hex16_ssse3(__m128i bytes, char *out)
{
    const __m128i digits = _mm_setr_epi8('0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a',
                                         'b', 'c', 'd', 'e', 'f');
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4);
    __m128i low = _mm_and_si128(bytes, low4);
    _mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(digits, _mm_unpacklo_epi8(high, low)));
    _mm_storeu_si128((__m128i *)(out + 16),
                     _mm_shuffle_epi8(digits, _mm_unpackhi_epi8(high, low)));
}

SHA_NI_TARGET static void
hex_sha_ni(const uint32_t state[8], char *out)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    hex16_ssse3(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)&state[0]), bswap), out);
    hex16_ssse3(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)&state[4]), bswap), out + 32);
}

/* CPUID.(EAX=7,ECX=0):EBX bit 29 (SHA), CPUID.1:ECX bits 19 (SSE4.1) and 9 (SSSE3). */
static int
cpu_has_sha_ni(void)
{
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    if (!(ecx & (1u << 19)) || !(ecx & (1u << 9))) {
        return 0;
    }
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    return (ebx & (1u << 29)) != 0;
}
#endif

typedef void (*sha256_hex_fn)(const uint32_t state[8], char *out);

static sha256_blocks_fn sha256_blocks = sha256_blocks_portable;
static sha256_hex_fn sha256_hex_out = hex_portable;

/* SHA-256 of data[0:len] as 64 hex digits into out (section 5.1.1 padding, 6.2 hashing). */
static void
sha256_hex_digest(const unsigned char *data, size_t len, char *out, sha256_blocks_fn blocks,
                  sha256_hex_fn hex)
{
    uint32_t state[8];
    memcpy(state, SHA256_INIT, sizeof state);
    size_t full = len / SHA256_BLOCK;
    blocks(state, data, full);
    size_t rest = len - full * SHA256_BLOCK;
    unsigned char tail[2 * SHA256_BLOCK];
    memcpy(tail, data + full * SHA256_BLOCK, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest < SHA256_BLOCK - 8 ? SHA256_BLOCK : 2 * SHA256_BLOCK;
    memset(tail + rest + 1, 0, tail_len - 8 - rest - 1);
    uint64_t bits = (uint64_t)len << 3;
    for (size_t i = 0; i < 8; i++) {
        tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
    }
    blocks(state, tail, tail_len / SHA256_BLOCK);
    hex(state, out);
}

static PyObject *
sha256_hex_with(PyObject *data, sha256_blocks_fn blocks, sha256_hex_fn hex)
{
    PyObject *result = PyBytes_FromStringAndSize(NULL, 64);
    if (result == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(result);
    if (PyBytes_CheckExact(data)) { /* immutable: no buffer export needed */
        size_t len = (size_t)PyBytes_GET_SIZE(data);
        const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(data);
        if (len < SHA256_RELEASE_GIL) {
            sha256_hex_digest(bytes, len, out, blocks, hex);
        }
        else {
            Py_BEGIN_ALLOW_THREADS
            sha256_hex_digest(bytes, len, out, blocks, hex);
            Py_END_ALLOW_THREADS
        }
        return result;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) != 0) {
        Py_DECREF(result);
        return NULL;
    }
    /* the export keeps a bytearray from resizing while the GIL is released */
    if ((size_t)view.len < SHA256_RELEASE_GIL) {
        sha256_hex_digest(view.buf, (size_t)view.len, out, blocks, hex);
    }
    else {
        Py_BEGIN_ALLOW_THREADS
        sha256_hex_digest(view.buf, (size_t)view.len, out, blocks, hex);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
jcs_sha256_hex(PyObject *module, PyObject *data)
{
    (void)module;
    return sha256_hex_with(data, sha256_blocks, sha256_hex_out);
}

static PyObject *
jcs_sha256_hex_portable(PyObject *module, PyObject *data)
{
    (void)module;
    return sha256_hex_with(data, sha256_blocks_portable, hex_portable);
}

/*
 * chain(prev_json, idx, lines): trace lines spliced from compiled shapes and hash-chained.
 *
 * Each item of lines is a tuple (code, v0, v1, ...); code is a tuple (kinds, f0, ..., fn)
 * of bytes: kinds names the n slots in order (b'i': the decimal idx, b'p': prev, b'v': the
 * next value), f0..fn the fixed fragments around them. Line k is f0 s0 f1 s1 ... fn, its
 * idx slot idx + k, its prev slot prev_json for k = 0 and "sha256:<hex of line k-1>" after.
 * Everything is validated and measured first (pass 1), then copied into the result with
 * the chained prev slots left blank (pass 2), then hashed line by line, each digest filling
 * the next line's prev slots (pass 3: no Python object is touched, so a large block is
 * hashed without the GIL). The hash is SHA-NI when available, else the portable C code.
 */
#define CHAIN_PREV_LEN 73 /* "sha256:<64 hex>" with its quotes */
#define CHAIN_STACK 64

static int
chain_error(PyObject *type, Py_ssize_t item, const char *message)
{
    PyErr_Format(type, "chain: lines[%zd]: %s", item, message);
    return -1;
}

static inline size_t
decimal_len(unsigned long long v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static inline char *
put_decimal(char *out, unsigned long long v)
{
    char digits[20];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) {
        *out++ = digits[--n];
    }
    return out;
}

/* Validate item i of lines; add its length (chained prev slots: CHAIN_PREV_LEN) to *total
   and its chained prev slots to *prevs. first: the first line (prev slots prev_len long). */
static int
chain_measure(PyObject *item, Py_ssize_t i, unsigned long long idx, Py_ssize_t prev_len,
              size_t *total, size_t *prevs)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 1) {
        return chain_error(PyExc_TypeError, i, "not a tuple (code, value...)");
    }
    PyObject *code = PyTuple_GET_ITEM(item, 0);
    if (!PyTuple_Check(code) || PyTuple_GET_SIZE(code) < 2) {
        return chain_error(PyExc_TypeError, i, "code is not a tuple (kinds, fragment...)");
    }
    PyObject *kinds = PyTuple_GET_ITEM(code, 0);
    if (!PyBytes_Check(kinds)) {
        return chain_error(PyExc_TypeError, i, "code's kinds is not bytes");
    }
    Py_ssize_t slots = PyBytes_GET_SIZE(kinds);
    if (PyTuple_GET_SIZE(code) != slots + 2) {
        return chain_error(PyExc_ValueError, i, "code does not hold one fragment more than slots");
    }
    const char *kind = PyBytes_AS_STRING(kinds);
    size_t len = 0;
    Py_ssize_t values = 0;
    for (Py_ssize_t s = 0; s <= slots; s++) {
        PyObject *fragment = PyTuple_GET_ITEM(code, s + 1);
        if (!PyBytes_Check(fragment)) {
            return chain_error(PyExc_TypeError, i, "a fragment of code is not bytes");
        }
        len += (size_t)PyBytes_GET_SIZE(fragment);
        if (s == slots) {
            break;
        }
        if (kind[s] == 'i') {
            len += decimal_len(idx);
        }
        else if (kind[s] == 'p') {
            if (i == 0) {
                len += (size_t)prev_len;
            }
            else {
                len += CHAIN_PREV_LEN;
                (*prevs)++;
            }
        }
        else if (kind[s] == 'v') {
            values++;
            if (values >= PyTuple_GET_SIZE(item)) {
                return chain_error(PyExc_ValueError, i, "fewer values than the code's slots");
            }
            PyObject *value = PyTuple_GET_ITEM(item, values);
            if (!PyBytes_Check(value)) {
                return chain_error(PyExc_TypeError, i, "a value is not bytes");
            }
            len += (size_t)PyBytes_GET_SIZE(value);
        }
        else {
            return chain_error(PyExc_ValueError, i, "a slot kind is not b'i', b'p' or b'v'");
        }
    }
    if (values + 1 != PyTuple_GET_SIZE(item)) {
        return chain_error(PyExc_ValueError, i, "more values than the code's slots");
    }
    if (len > (size_t)PY_SSIZE_T_MAX - *total - 1) {
        PyErr_SetString(PyExc_OverflowError, "chain: the lines are too long");
        return -1;
    }
    *total += len + 1;
    return 0;
}

static PyObject *
jcs_chain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "chain() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *prev_json = args[0], *idx_obj = args[1], *lines = args[2];
    if (!PyBytes_Check(prev_json)) {
        PyErr_SetString(PyExc_TypeError, "chain: prev_json is not bytes");
        return NULL;
    }
    if (!PyLong_Check(idx_obj) || PyBool_Check(idx_obj)) {
        PyErr_SetString(PyExc_TypeError, "chain: idx is not an int");
        return NULL;
    }
    if (!PyList_Check(lines)) {
        PyErr_SetString(PyExc_TypeError, "chain: lines is not a list");
        return NULL;
    }
    int overflow = 0;
    long long first_idx = PyLong_AsLongLongAndOverflow(idx_obj, &overflow);
    if (first_idx == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(lines);
    if (overflow || first_idx < 0 || first_idx > LLONG_MAX - n) {
        PyErr_SetString(PyExc_ValueError, "chain: idx is not in 0 .. 2**63 - 1 - len(lines)");
        return NULL;
    }
    Py_ssize_t prev_len = PyBytes_GET_SIZE(prev_json);
    size_t total = 0, prevs = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (chain_measure(PyList_GET_ITEM(lines, i), i, (unsigned long long)first_idx + i,
                          prev_len, &total, &prevs) != 0) {
            return NULL;
        }
    }
    if (n == 0) {
        PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
        if (empty == NULL) {
            return NULL;
        }
        return Py_BuildValue("(NO)", empty, prev_json);
    }
    /* ends[k]: where line k ends (its newline); slot[at[k] .. at[k + 1]]: its prev slots */
    size_t stack[CHAIN_STACK];
    size_t need = 2 * (size_t)n + 1 + prevs;
    size_t *ends = need <= CHAIN_STACK ? stack : PyMem_Malloc(need * sizeof(size_t));
    if (ends == NULL) {
        return PyErr_NoMemory();
    }
    size_t *at = ends + n, *slot = at + n + 1;
    PyObject *joined = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (joined == NULL) {
        if (ends != stack) {
            PyMem_Free(ends);
        }
        return NULL;
    }
    char *base = PyBytes_AS_STRING(joined), *out = base;
    size_t p = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(lines, i);
        PyObject *code = PyTuple_GET_ITEM(item, 0);
        const char *kind = PyBytes_AS_STRING(PyTuple_GET_ITEM(code, 0));
        Py_ssize_t slots = PyTuple_GET_SIZE(code) - 2, values = 0;
        at[i] = p;
        for (Py_ssize_t s = 0;; s++) {
            PyObject *fragment = PyTuple_GET_ITEM(code, s + 1);
            memcpy(out, PyBytes_AS_STRING(fragment), (size_t)PyBytes_GET_SIZE(fragment));
            out += PyBytes_GET_SIZE(fragment);
            if (s == slots) {
                break;
            }
            if (kind[s] == 'i') {
                out = put_decimal(out, (unsigned long long)first_idx + (unsigned long long)i);
            }
            else if (kind[s] == 'p') {
                if (i == 0) {
                    memcpy(out, PyBytes_AS_STRING(prev_json), (size_t)prev_len);
                    out += prev_len;
                }
                else {
                    slot[p++] = (size_t)(out - base);
                    memcpy(out, "\"sha256:", 8);
                    out[CHAIN_PREV_LEN - 1] = '"';
                    out += CHAIN_PREV_LEN;
                }
            }
            else {
                PyObject *value = PyTuple_GET_ITEM(item, ++values);
                memcpy(out, PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value));
                out += PyBytes_GET_SIZE(value);
            }
        }
        ends[i] = (size_t)(out - base);
        *out++ = '\n';
    }
    at[n] = p;
    char hex[64];
    int release = total >= SHA256_RELEASE_GIL;
    PyThreadState *state = release ? PyEval_SaveThread() : NULL;
    size_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        sha256_hex_digest((const unsigned char *)base + start, ends[i] - start, hex,
                          sha256_blocks, sha256_hex_out);
        if (i + 1 < n) {
            for (size_t q = at[i + 1]; q < at[i + 2]; q++) {
                memcpy(base + slot[q] + 8, hex, 64);
            }
        }
        start = ends[i] + 1;
    }
    if (release) {
        PyEval_RestoreThread(state);
    }
    if (ends != stack) {
        PyMem_Free(ends);
    }
    PyObject *last = PyBytes_FromStringAndSize(NULL, CHAIN_PREV_LEN);
    if (last == NULL) {
        Py_DECREF(joined);
        return NULL;
    }
    char *l = PyBytes_AS_STRING(last);
    memcpy(l, "\"sha256:", 8);
    memcpy(l + 8, hex, 64);
    l[CHAIN_PREV_LEN - 1] = '"';
    PyObject *result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(joined);
        Py_DECREF(last);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, joined);
    PyTuple_SET_ITEM(result, 1, last);
    return result;
}

static PyMethodDef jcs_methods[] = {
    {"encode", jcs_encode, METH_O,
     "encode(value, /) -> bytes | None\n\nRFC 8785 bytes of a plain JSON value, or None "
     "when the exact encoder must decide."},
    {"sha256_hex", jcs_sha256_hex, METH_O,
     "sha256_hex(data, /) -> bytes\n\nSHA-256 (FIPS 180-4) of a bytes-like object as 64 "
     "lowercase hex ASCII digits (SHA-NI when SHA_NI is True, else portable C)."},
    {"sha256_hex_portable", jcs_sha256_hex_portable, METH_O,
     "sha256_hex_portable(data, /) -> bytes\n\nsha256_hex on the portable C path always "
     "(for tests and benchmarks)."},
    {"chain", (PyCFunction)(void (*)(void))jcs_chain, METH_FASTCALL,
     "chain(prev_json, idx, lines, /) -> tuple[bytes, bytes]\n\nThe trace lines of lines "
     "(tuples (code, value...)) at idx, idx + 1... each chained to the one before, "
     "newline-terminated and joined, and the last line's digest as a prev field."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef jcs_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_jcs",
    .m_doc = "Fast paths of toolproof.identity and bundle.lines: canonical_json, one-shot "
               "SHA-256, chained trace lines.",
    .m_size = -1,
    .m_methods = jcs_methods,
};

PyMODINIT_FUNC
PyInit__jcs(void)
{
    int sha_ni = 0;
#ifdef HAVE_SHA_NI
    sha_ni = cpu_has_sha_ni();
    if (sha_ni) {
        sha256_blocks = sha256_blocks_sha_ni;
        sha256_hex_out = hex_sha_ni;
    }
#endif
    PyObject *module = PyModule_Create(&jcs_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "SHA_NI", sha_ni ? Py_True : Py_False) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
