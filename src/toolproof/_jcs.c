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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
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

/*
 * ECMAScript Number::toString for a finite double (RFC 8785 section 3.2.2.3).
 * The digits are Python's repr digits (the shortest that round-trip, nearest on
 * ties), the same digits ECMAScript requires; only the layout differs.
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
    char *repr = PyOS_double_to_string(value < 0 ? -value : value, 'r', 0, 0, NULL);
    if (repr == NULL) {
        return FAIL;
    }
    /* repr is [digits][.digits][e(+|-)digits] */
    char digits[32];
    int k = 0;
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
    long point = int_len + exponent;
    int start = 0;
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

static int
compare_keys(const void *left, const void *right)
{
    PyObject *x = *(PyObject *const *)left;
    PyObject *y = *(PyObject *const *)right;
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

static int encode_value(Buffer *buf, PyObject *value, int depth);

static int
encode_dict(Buffer *buf, PyObject *value, int depth)
{
    Py_ssize_t n = PyDict_GET_SIZE(value);
    if (n == 0) {
        return put(buf, "{}", 2);
    }
    PyObject *small[32];
    PyObject **keys = small;
    if (n > 32) {
        keys = PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
        if (keys == NULL) {
            PyErr_NoMemory();
            return FAIL;
        }
    }
    Py_ssize_t pos = 0;
    Py_ssize_t i = 0;
    PyObject *key;
    PyObject *item;
    int rc = OK;
    while (PyDict_Next(value, &pos, &key, &item)) {
        if (!PyUnicode_CheckExact(key)) {
            rc = BAIL;
            goto done;
        }
        keys[i++] = key;
    }
    qsort(keys, (size_t)n, sizeof(PyObject *), compare_keys);
    rc = put(buf, "{", 1);
    for (i = 0; i < n && rc == OK; i++) {
        if (i > 0) {
            rc = put(buf, ",", 1);
            if (rc != OK) {
                break;
            }
        }
        rc = encode_string(buf, keys[i]);
        if (rc == OK) {
            rc = put(buf, ":", 1);
        }
        if (rc == OK) {
            item = PyDict_GetItemWithError(value, keys[i]);
            if (item == NULL) {
                rc = PyErr_Occurred() ? FAIL : BAIL;
                break;
            }
            rc = encode_value(buf, item, depth + 1);
        }
    }
    if (rc == OK) {
        rc = put(buf, "}", 1);
    }
done:
    if (keys != small) {
        PyMem_Free(keys);
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

static PyMethodDef jcs_methods[] = {
    {"encode", jcs_encode, METH_O,
     "encode(value, /) -> bytes | None\n\nRFC 8785 bytes of a plain JSON value, or None "
     "when the exact encoder must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef jcs_module = {
    PyModuleDef_HEAD_INIT, "_jcs", "Fast path of toolproof.identity.canonical_json.", -1,
    jcs_methods,
};

PyMODINIT_FUNC
PyInit__jcs(void)
{
    return PyModule_Create(&jcs_module);
}
