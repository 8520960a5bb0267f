/* One pass over a batch of Chrome-trace events (a JSON list of objects), straight into columns.
 *
 * The Python path (decode.py) builds one msgspec struct per event and then reads its fields back one event at a
 * time; on a trace of millions of events that per-event Python work, and freeing it, is most of the time. This
 * scanner reads the same bytes once and writes only what the analysis keeps: for each timed ("ph": "X") event its
 * category and name (as indexes into per-batch tables of distinct byte strings), ts and dur as exact integer
 * nanoseconds, pid, tid, and args.stream, args.correlation, args.bytes and args["Call stack"].
 *
 * It is a fast path, never a second definition of the format. It accepts a batch only when the batch is valid JSON
 * that msgspec also accepts (it is stricter: a byte msgspec would refuse is never let through) and when every field
 * it reads has the plain form Kineto writes; anything else (an exponent in a time, a float pid, an escaped key,
 * duplicate keys, deep nesting, a NaN token) returns None, and the caller decodes that batch with the Python path,
 * which decides. So a result from here always equals the Python path's, and a successful scan still proves that a
 * cut between events was right (reader.py relies on that).
 *
 * Every read is bounds-checked against the end of the buffer; memory grows with the batch (a few words per event
 * plus the distinct names' offsets), never with what a value claims.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 64           /* deeper nesting is left to the Python path (msgspec's own limit is about 1000) */
#define MAX_TIME_CHARS 64      /* numbers.py: a longer time takes its slow path */
#define MAX_TIME_INT_DIGITS 16 /* numbers.py: more integer digits take its slow path */
#define MAX_INT_DIGITS 18      /* an id with more digits might not fit int64: left to the Python path */

/* What each id field of a row holds: two bits per field, at the shifts below. An id is absent (or null), a plain
 * integer (the column holds it), a string without escapes (the column holds its index in the batch's table of id
 * texts, which Python reads exactly as the Python path does: "0x0" as a stream, "1890023232" as a thread), or
 * something else, which only pid and tid may be (the row is then the caller's to decline, if it needs them). */
enum { ID_ABSENT = 0, ID_INT = 1, ID_TEXT = 2, ID_OTHER = 3 };
enum { SHIFT_PID = 0, SHIFT_TID = 2, SHIFT_STREAM = 4, SHIFT_CORR = 6, SHIFT_BYTES = 8, SHIFT_STACK = 10 };

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Cursor;

typedef struct {
    Py_ssize_t start, len;
} Span;

/* ---- growable columns */

typedef struct {
    Py_ssize_t rows, cap;
    int32_t *cat, *name;
    int64_t *ts, *dur, *pid, *tid, *stream, *corr, *nbytes, *stack;
    uint16_t *flags;
} Columns;

static void columns_free(Columns *c) {
    PyMem_RawFree(c->cat);
    PyMem_RawFree(c->name);
    PyMem_RawFree(c->ts);
    PyMem_RawFree(c->dur);
    PyMem_RawFree(c->pid);
    PyMem_RawFree(c->tid);
    PyMem_RawFree(c->stream);
    PyMem_RawFree(c->corr);
    PyMem_RawFree(c->nbytes);
    PyMem_RawFree(c->stack);
    PyMem_RawFree(c->flags);
    memset(c, 0, sizeof(*c));
}

#define GROW(field, type)                                                          \
    do {                                                                           \
        void *grown = PyMem_RawRealloc(c->field, (size_t)cap * sizeof(type));        \
        if (grown == NULL) return -1;                                              \
        c->field = (type *)grown;                                                  \
    } while (0)

static int columns_reserve(Columns *c) {
    if (c->rows < c->cap) return 0;
    Py_ssize_t cap = c->cap ? c->cap * 2 : 1024;
    if (cap > PY_SSIZE_T_MAX / 8) return -1;
    GROW(cat, int32_t);
    GROW(name, int32_t);
    GROW(ts, int64_t);
    GROW(dur, int64_t);
    GROW(pid, int64_t);
    GROW(tid, int64_t);
    GROW(stream, int64_t);
    GROW(corr, int64_t);
    GROW(nbytes, int64_t);
    GROW(stack, int64_t);
    GROW(flags, uint16_t);
    c->cap = cap;
    return 0;
}

/* ---- distinct byte strings (names, categories), in order of first appearance */

typedef struct {
    const unsigned char *base;
    Span *items;   /* by index */
    int32_t *slots; /* open addressing: index + 1, 0 = empty */
    Py_ssize_t count, items_cap, slots_cap;
} Table;

static uint64_t hash_bytes(const unsigned char *s, Py_ssize_t n) {
    /* Eight bytes at a time (kernel names run to hundreds of bytes); any decent mixing will do for a table that is
     * compared byte for byte on every hit. */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    memcpy(&tail, s + i, (size_t)(n - i));
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static void table_free(Table *t) {
    PyMem_RawFree(t->items);
    PyMem_RawFree(t->slots);
    t->items = NULL;
    t->slots = NULL;
}

static int table_rehash(Table *t, Py_ssize_t slots_cap) {
    int32_t *slots = PyMem_RawCalloc((size_t)slots_cap, sizeof(int32_t));
    if (slots == NULL) return -1;
    for (Py_ssize_t i = 0; i < t->count; i++) {
        Span s = t->items[i];
        uint64_t h = hash_bytes(t->base + s.start, s.len) & (uint64_t)(slots_cap - 1);
        while (slots[h]) h = (h + 1) & (uint64_t)(slots_cap - 1);
        slots[h] = (int32_t)(i + 1);
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->slots_cap = slots_cap;
    return 0;
}

/* The index of the string s in the table, added if new; -1 on memory error. */
static int32_t table_index(Table *t, Span s) {
    if (t->count >= INT32_MAX - 1) return -1;
    if ((t->count + 1) * 2 > t->slots_cap && table_rehash(t, t->slots_cap ? t->slots_cap * 2 : 256) < 0) return -1;
    const unsigned char *text = t->base + s.start;
    uint64_t mask = (uint64_t)(t->slots_cap - 1);
    uint64_t h = hash_bytes(text, s.len) & mask;
    while (t->slots[h]) {
        Span seen = t->items[t->slots[h] - 1];
        if (seen.len == s.len && memcmp(t->base + seen.start, text, (size_t)s.len) == 0) return t->slots[h] - 1;
        h = (h + 1) & mask;
    }
    if (t->count == t->items_cap) {
        Py_ssize_t cap = t->items_cap ? t->items_cap * 2 : 64;
        Span *grown = PyMem_RawRealloc(t->items, (size_t)cap * sizeof(Span));
        if (grown == NULL) return -1;
        t->items = grown;
        t->items_cap = cap;
    }
    t->items[t->count] = s;
    t->slots[h] = (int32_t)(t->count + 1);
    return (int32_t)t->count++;
}

/* ---- JSON syntax (RFC 8259), as strict as msgspec or stricter. Functions return 0 on success, -1 to refuse. */

static void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

static int hex_value(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Bytes that end the plain run of a string: its closing quote, an escape, or a control character (refused). */
static unsigned char string_stop[256];

static void init_tables(void) {
    for (int i = 0; i < 0x20; i++) string_stop[i] = 1;
    string_stop['"'] = string_stop['\\'] = 1;
}

/* A string at c->p (on its opening quote); *escaped says whether it held an escape. Control characters and bad
 * escapes are refused, as msgspec refuses them; so are \u escapes of surrogates (msgspec refuses lone ones). */
static int scan_string(Cursor *c, Span *out, const unsigned char *base, int *escaped) {
    *escaped = 0;
    const unsigned char *p = c->p + 1, *end = c->end, *start = p;
    for (;;) {
        while (p + 4 <= end && !(string_stop[p[0]] | string_stop[p[1]] | string_stop[p[2]] | string_stop[p[3]])) p += 4;
        while (p < end && !string_stop[*p]) p++;
        if (p >= end || *p < 0x20) return -1;
        if (*p == '"') break;
        *escaped = 1; /* a backslash */
        if (p + 1 >= end) return -1;
        unsigned char e = p[1];
        if (e == 'u') {
            if (p + 5 >= end) return -1;
            int v = 0;
            for (int k = 2; k < 6; k++) {
                int h = hex_value(p[k]);
                if (h < 0) return -1;
                v = v * 16 + h;
            }
            if (v >= 0xD800 && v <= 0xDFFF) return -1;
            p += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
            p += 2;
        } else {
            return -1;
        }
    }
    out->start = start - base;
    out->len = p - start;
    c->p = p + 1;
    return 0;
}

typedef struct {
    Span text;
    int has_frac, has_exp, negative;
} Number;

static int scan_number(Cursor *c, Number *n, const unsigned char *base) {
    const unsigned char *start = c->p;
    n->negative = n->has_frac = n->has_exp = 0;
    if (c->p < c->end && *c->p == '-') {
        n->negative = 1;
        c->p++;
    }
    if (c->p >= c->end) return -1;
    if (*c->p == '0') {
        c->p++;
    } else if (*c->p >= '1' && *c->p <= '9') {
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    } else {
        return -1;
    }
    if (c->p < c->end && *c->p == '.') {
        n->has_frac = 1;
        c->p++;
        const unsigned char *digits = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
        if (c->p == digits) return -1;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        n->has_exp = 1;
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        const unsigned char *digits = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
        if (c->p == digits) return -1;
    }
    n->text.start = start - base;
    n->text.len = c->p - start;
    return 0;
}

static int scan_literal(Cursor *c, const char *word, size_t len) {
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0) return -1;
    c->p += len;
    return 0;
}

static int skip_value(Cursor *c, const unsigned char *base, int depth);

/* Past the opening bracket at c->p: 1 when the container closes at once (it is empty), 0 when a member follows. */
static int open_container(Cursor *c, unsigned char close) {
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 1;
    }
    return 0;
}

/* After a member: 1 when the container closes here, 0 after a comma (another member follows), -1 otherwise. */
static int after_member(Cursor *c, unsigned char close) {
    skip_ws(c);
    if (c->p >= c->end) return -1;
    if (*c->p == close) {
        c->p++;
        return 1;
    }
    if (*c->p != ',') return -1;
    c->p++;
    skip_ws(c);
    return 0;
}

/* A member's key and its colon, leaving c->p on the value. -1 for bad syntax, or for a key with an escape when
 * plain_only: a field read by its name could hide behind one ("t\u0073" is "ts"). */
static int member_key(Cursor *c, const unsigned char *base, Span *key, int plain_only) {
    int escaped;
    if (c->p >= c->end || *c->p != '"' || scan_string(c, key, base, &escaped) < 0 || (escaped && plain_only)) return -1;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return -1;
    c->p++;
    skip_ws(c);
    return c->p < c->end ? 0 : -1;
}

static int skip_container(Cursor *c, const unsigned char *base, int depth, int object) {
    if (depth > MAX_DEPTH) return -1;
    unsigned char close = object ? '}' : ']';
    int closed = open_container(c, close);
    while (!closed) {
        Span key;
        if (object && member_key(c, base, &key, 0) < 0) return -1;
        if (skip_value(c, base, depth + 1) < 0 || (closed = after_member(c, close)) < 0) return -1;
    }
    return 0;
}

static int skip_value(Cursor *c, const unsigned char *base, int depth) {
    if (c->p >= c->end) return -1;
    switch (*c->p) {
    case '"': {
        Span s;
        int escaped;
        return scan_string(c, &s, base, &escaped);
    }
    case '{':
        return skip_container(c, base, depth, 1);
    case '[':
        return skip_container(c, base, depth, 0);
    case 't':
        return scan_literal(c, "true", 4);
    case 'f':
        return scan_literal(c, "false", 5);
    case 'n':
        return scan_literal(c, "null", 4);
    default: {
        Number n;
        return scan_number(c, &n, base);
    }
    }
}

/* ---- the fields that are read */

/* A time in µs as exact ns, as numbers.py's fast path reads it: a plain decimal, digits below 1 ns truncated toward
 * zero. Anything its fast path would not take (an exponent, too many digits, out of int64) is refused. */
static int time_ns(const unsigned char *base, Number *n, int64_t *out) {
    if (n->has_exp || n->text.len > MAX_TIME_CHARS) return -1;
    const unsigned char *s = base + n->text.start, *end = s + n->text.len;
    if (n->negative) s++;
    uint64_t value = 0;
    int int_digits = 0;
    while (s < end && *s != '.') {
        value = value * 10 + (uint64_t)(*s++ - '0');
        if (++int_digits > MAX_TIME_INT_DIGITS) return -1;
    }
    int frac_digits = 0;
    if (s < end) s++; /* the dot */
    while (frac_digits < 3) {
        value = value * 10 + (s < end ? (uint64_t)(*s++ - '0') : 0);
        frac_digits++;
    }
    if (value > (uint64_t)INT64_MAX) return -1;
    *out = n->negative ? -(int64_t)value : (int64_t)value;
    return 0;
}

/* An id: a plain integer (no fraction, no exponent) of at most MAX_INT_DIGITS digits. */
static int plain_int(const unsigned char *base, Number *n, int64_t *out) {
    if (n->has_frac || n->has_exp || n->text.len - n->negative > MAX_INT_DIGITS) return -1;
    const unsigned char *s = base + n->text.start, *end = s + n->text.len;
    if (n->negative) s++;
    int64_t value = 0;
    while (s < end) value = value * 10 + (*s++ - '0');
    *out = n->negative ? -value : value;
    return 0;
}

/* A string value that Python reads (a name, a category, an id text): its span, or, when it holds an escape, its span
 * with both quotes, which Python decodes as the JSON literal it is (msgspec, as the Python path reads it). A plain
 * string never starts with a quote, so the quote tells the two apart. */
static int text_span(Cursor *c, const unsigned char *base, Span *out) {
    int escaped;
    if (c->p >= c->end || *c->p != '"' || scan_string(c, out, base, &escaped) < 0) return -1;
    if (escaped) {
        out->start -= 1;
        out->len += 2;
    }
    return 0;
}

/* An id at c->p, into *out, with its kind (see ID_*); -1 for a value that is none of those kinds. */
static int id_value(Cursor *c, const unsigned char *base, Table *texts, int64_t *out, unsigned *kind) {
    if (c->p >= c->end) return -1;
    if (*c->p == 'n') {
        *kind = ID_ABSENT;
        return scan_literal(c, "null", 4);
    }
    if (*c->p == '"') {
        Span text;
        if (text_span(c, base, &text) < 0) return -1;
        int32_t index = table_index(texts, text);
        if (index < 0) return -1;
        *out = index;
        *kind = ID_TEXT;
        return 0;
    }
    if (!(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return -1;
    Number n;
    if (scan_number(c, &n, base) < 0 || plain_int(base, &n, out) < 0) return -1;
    *kind = ID_INT;
    return 0;
}

static int key_is(const unsigned char *base, Span key, const char *word) {
    size_t len = strlen(word);
    return (size_t)key.len == len && memcmp(base + key.start, word, len) == 0;
}

typedef struct {
    int timed, has_cat, has_name, time_ok;
    Span cat, name;
    int64_t ts, dur, pid, tid, stream, corr, nbytes, stack;
    uint16_t flags;
} Event;

/* The args object: stream, correlation, bytes, and the "Call stack" older traces write (a string, kept as an id text:
 * Python finds the user's frame in it once per distinct stack); every other key is skipped. */
static int scan_args(Cursor *c, const unsigned char *base, Table *texts, Event *ev) {
    if (*c->p == 'n') return scan_literal(c, "null", 4);
    if (*c->p != '{') return -1; /* not an object: the Python path decides */
    unsigned seen = 0;
    int closed = open_container(c, '}');
    while (!closed) {
        Span key;
        if (member_key(c, base, &key, 1) < 0) return -1;
        unsigned bit = key_is(base, key, "stream") ? 1u : key_is(base, key, "correlation") ? 2u
                     : key_is(base, key, "bytes")  ? 4u : key_is(base, key, "Call stack") ? 8u : 0u;
        if (bit & seen) return -1; /* a duplicate key: msgspec keeps the last, the Python path decides */
        seen |= bit;
        if (bit) {
            int64_t *field = bit == 1 ? &ev->stream : bit == 2 ? &ev->corr : bit == 4 ? &ev->nbytes : &ev->stack;
            unsigned shift = bit == 1 ? SHIFT_STREAM : bit == 2 ? SHIFT_CORR : bit == 4 ? SHIFT_BYTES : SHIFT_STACK;
            unsigned kind;
            if (id_value(c, base, texts, field, &kind) < 0) return -1;
            ev->flags |= (uint16_t)(kind << shift);
        } else if (skip_value(c, base, 2) < 0) {
            return -1;
        }
        if ((closed = after_member(c, '}')) < 0) return -1;
    }
    return 0;
}

/* A string field that may be null or absent: 1 when a string (see text_span), 0 when null, -1 otherwise. */
static int string_or_null(Cursor *c, const unsigned char *base, Span *out) {
    if (c->p < c->end && *c->p == 'n') return scan_literal(c, "null", 4) < 0 ? -1 : 0;
    return text_span(c, base, out) < 0 ? -1 : 1;
}

enum { K_PH = 1, K_CAT = 2, K_NAME = 4, K_PID = 8, K_TID = 16, K_TS = 32, K_DUR = 64, K_ARGS = 128 };

static unsigned key_bit(const unsigned char *base, Span key) {
    switch (key.len) {
    case 2:
        return key_is(base, key, "ph") ? K_PH : key_is(base, key, "ts") ? K_TS : 0;
    case 3:
        return key_is(base, key, "cat") ? K_CAT : key_is(base, key, "pid") ? K_PID : key_is(base, key, "tid") ? K_TID
             : key_is(base, key, "dur") ? K_DUR : 0;
    case 4:
        return key_is(base, key, "name") ? K_NAME : key_is(base, key, "args") ? K_ARGS : 0;
    default:
        return 0;
    }
}

/* A time written as a string ("ts": "1704161511420306.491", as torch_npu writes it): taken when the whole string is a
 * plain JSON number, which numbers.py reads to the same value; anything else in quotes is not a number here. */
static int quoted_number(Cursor *c, const unsigned char *base, Number *n) {
    Span text;
    int escaped;
    if (scan_string(c, &text, base, &escaped) < 0) return -1;
    Cursor inner = {base + text.start, base + text.start + text.len};
    if (escaped || scan_number(&inner, n, base) < 0 || inner.p != inner.end) n->text.len = -1;
    return 0;
}

static int scan_field(Cursor *c, const unsigned char *base, Table *texts, Event *ev, unsigned bit, Number *ts,
                      Number *dur) {
    int set;
    switch (bit) {
    case K_PH: {
        if (*c->p != '"') return -1; /* not a string: the Python path counts the event as dropped */
        Span ph;
        int escaped;
        if (scan_string(c, &ph, base, &escaped) < 0 || escaped) return -1;
        ev->timed = ph.len == 1 && base[ph.start] == 'X';
        return 0;
    }
    case K_CAT:
        if ((set = string_or_null(c, base, &ev->cat)) < 0) return -1;
        ev->has_cat = set;
        return 0;
    case K_NAME:
        if ((set = string_or_null(c, base, &ev->name)) < 0) return -1;
        ev->has_name = set;
        return 0;
    case K_PID:
    case K_TID: {
        unsigned kind;
        Cursor probe = *c;
        int64_t *field = bit == K_PID ? &ev->pid : &ev->tid;
        if (id_value(&probe, base, texts, field, &kind) < 0) {
            kind = ID_OTHER; /* a float, a list: the row is flagged, the caller decides */
            if (skip_value(c, base, 1) < 0) return -1;
        } else {
            *c = probe;
        }
        ev->flags |= (uint16_t)(kind << (bit == K_PID ? SHIFT_PID : SHIFT_TID));
        return 0;
    }
    case K_TS:
    case K_DUR: {
        Number *n = bit == K_TS ? ts : dur;
        if (*c->p == '"') return quoted_number(c, base, n);
        if (!(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) {
            n->text.len = -1; /* not a number */
            return skip_value(c, base, 1);
        }
        return scan_number(c, n, base);
    }
    case K_ARGS:
        return scan_args(c, base, texts, ev);
    default:
        return skip_value(c, base, 1);
    }
}

/* One event object at c->p. Fills ev; -1 refuses the batch. */
static int scan_event(Cursor *c, const unsigned char *base, Table *texts, Event *ev) {
    memset(ev, 0, sizeof(*ev));
    Number ts = {{0, -1}, 0, 0, 0}, dur = {{0, -1}, 0, 0, 0};
    if (c->p >= c->end || *c->p != '{') return -1;
    unsigned seen = 0;
    int closed = open_container(c, '}');
    while (!closed) {
        Span key;
        if (member_key(c, base, &key, 1) < 0) return -1;
        unsigned bit = key_bit(base, key);
        if (bit & seen) return -1; /* a duplicate key */
        seen |= bit;
        if (scan_field(c, base, texts, ev, bit, &ts, &dur) < 0 || (closed = after_member(c, '}')) < 0) return -1;
    }
    if (!(seen & K_PH) && ev->has_cat) return -1; /* no phase: the Python path counts a kept family's as dropped */
    if (ev->timed) {
        /* A timed event's times must be plain numbers (a missing or odd one is the Python path's to count). */
        if (ts.text.len < 0 || dur.text.len < 0) return -1;
        if (time_ns(base, &ts, &ev->ts) < 0 || time_ns(base, &dur, &ev->dur) < 0) return -1;
    }
    return 0;
}

static PyObject *bytes_of(const void *data, Py_ssize_t size) {
    return PyBytes_FromStringAndSize((const char *)data, size);
}

static PyObject *table_list(Table *t) {
    PyObject *list = PyList_New(t->count);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < t->count; i++) {
        PyObject *item = bytes_of(t->base + t->items[i].start, t->items[i].len);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *result_of(Py_ssize_t events, Columns *c, Table *cats, Table *names, Table *texts) {
    Py_ssize_t n = c->rows;
    return Py_BuildValue(
        "(nnNNNNNNNNNNNNNN)", events, n, bytes_of(c->cat, n * 4), bytes_of(c->name, n * 4), bytes_of(c->ts, n * 8),
        bytes_of(c->dur, n * 8), bytes_of(c->pid, n * 8), bytes_of(c->tid, n * 8), bytes_of(c->stream, n * 8),
        bytes_of(c->corr, n * 8), bytes_of(c->nbytes, n * 8), bytes_of(c->stack, n * 8), bytes_of(c->flags, n * 2),
        table_list(cats), table_list(names), table_list(texts));
}

static int store_event(Columns *c, Table *cats, Table *names, Event *ev) {
    if (columns_reserve(c) < 0) return -1;
    Py_ssize_t r = c->rows;
    c->cat[r] = ev->has_cat ? table_index(cats, ev->cat) : -1;
    c->name[r] = ev->has_name ? table_index(names, ev->name) : -1;
    if ((ev->has_cat && c->cat[r] < 0) || (ev->has_name && c->name[r] < 0)) return -1;
    c->ts[r] = ev->ts;
    c->dur[r] = ev->dur;
    c->pid[r] = ev->pid;
    c->tid[r] = ev->tid;
    c->stream[r] = ev->stream;
    c->corr[r] = ev->corr;
    c->nbytes[r] = ev->nbytes;
    c->stack[r] = ev->stack;
    c->flags[r] = ev->flags;
    c->rows++;
    return 0;
}

typedef struct {
    Columns cols;
    Table cats, names, texts;
    Py_ssize_t events;
    int nomem;
} Scan;

/* The whole list; 1 when it is a valid list of events to the end of the buffer. Touches no Python object, so it
 * runs without the GIL (threads may scan batches side by side). */
static int scan_list(Cursor *c, const unsigned char *base, Scan *out) {
    Event ev;
    skip_ws(c);
    if (c->p >= c->end || *c->p != '[') return 0;
    int closed = open_container(c, ']');
    while (!closed) {
        if (scan_event(c, base, &out->texts, &ev) < 0) return 0;
        out->events++;
        if (ev.timed && store_event(&out->cols, &out->cats, &out->names, &ev) < 0) {
            out->nomem = 1;
            return 0;
        }
        if ((closed = after_member(c, ']')) < 0) return 0;
    }
    skip_ws(c);
    return c->p == c->end;
}

/* scan(payload) -> None, or (events, rows, cat, name, ts, dur, pid, tid, stream, corr, nbytes, stack, flags, cats,
 * names, texts): the columns as bytes of native int32/int64/uint16, and the three tables of distinct strings as bytes. */
static PyObject *scan(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *base = view.buf;
    Cursor c = {base, base + view.len};
    Scan out;
    memset(&out, 0, sizeof(out));
    out.cats.base = out.names.base = out.texts.base = base;
    int ok;
    Py_BEGIN_ALLOW_THREADS;
    ok = scan_list(&c, base, &out);
    Py_END_ALLOW_THREADS;
    PyObject *result = NULL;
    if (out.nomem) {
        PyErr_NoMemory();
    } else if (ok) {
        result = result_of(out.events, &out.cols, &out.cats, &out.names, &out.texts);
    } else {
        result = Py_NewRef(Py_None);
    }
    columns_free(&out.cols);
    table_free(&out.cats);
    table_free(&out.names);
    table_free(&out.texts);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, "Scan a JSON list of trace events into columns; None when the Python path must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) {
    init_tables();
    return PyModule_Create(&module);
}
