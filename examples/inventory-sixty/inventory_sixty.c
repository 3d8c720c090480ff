/*
 * inventory-sixty — stock reconciliation for two warehouses.
 *
 * The program loads the product catalog (built in below), imports the
 * movement journals of the north and south warehouses in parallel (one
 * importer thread per journal), reconciles the resulting stock with the
 * warehouses' physical count sheets, and renders a stock-value report.
 * The import is all or nothing: each importer first checks its whole
 * journal (every record's CRC and syntax, the trailer's totals), and the
 * movements are applied only when both journals have checked out.
 *
 * The journals and count sheets are the built-in sample data set: a
 * quarter of business for both warehouses, generated from fixed seeds
 * (sample_journal, sample_count_sheet), identical in every run.
 *
 * Journal record:  DATE;KIND;SKU;QTY;REFERENCE*CRC32
 *                  2026-01-05;RCV;PMP-210-L;24;PO-000123*1a2b3c4d
 * Trailer:         END;RECORDS;NET-QUANTITY*CRC32
 * Count sheet:     SKU;QUANTITY  (one per line)
 *
 * Exit status: 0 if stock and counts agree, 1 (one line on stderr) on a
 * discrepancy, 2 on bad input.  The report goes to stdout only with -v.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -Werror -o inventory-sixty inventory_sixty.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NWAREHOUSES 2
#define SKU_MAX     16

/* ======================================================================
 * util
 * ====================================================================== */

static void die(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("inventory-sixty: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        die(2, "out of memory");
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        die(2, "out of memory");
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p)
        die(2, "out of memory");
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* Copy at most n bytes of src into dst (size dstsize), NUL-terminated. */
static void str_copy(char *dst, size_t dstsize, const char *src, size_t n)
{
    if (n >= dstsize)
        n = dstsize - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A growable text buffer. */
struct textbuf {
    char *data;
    size_t len, cap;
};

static void textbuf_append(struct textbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void textbuf_printf(struct textbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        die(2, "line too long");
    textbuf_append(b, tmp, (size_t)n);
}

/* ======================================================================
 * crc32 (IEEE 802.3, bytewise table)
 * ====================================================================== */

static uint32_t crc_table[256];

void crc32_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t crc32_update(uint32_t crc, unsigned char byte)
{
    return crc_table[(crc ^ byte) & 0xff] ^ (crc >> 8);
}

uint32_t crc32_buf(const char *s, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        crc = crc32_update(crc, (unsigned char)s[i]);
    return crc ^ 0xffffffffu;
}

/* ======================================================================
 * pseudo-random numbers for the sample data (fixed seeds)
 * ====================================================================== */

struct rng {
    uint64_t s;
};

static void rng_seed(struct rng *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

static uint64_t rng_next(struct rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static unsigned rng_below(struct rng *r, unsigned n)
{
    return (unsigned)(rng_next(r) % n);
}

/* ======================================================================
 * dates
 * ====================================================================== */

/* Days since 2000-01-01 for a proleptic Gregorian date. */
long date_to_days(int y, int m, int d)
{
    y -= m <= 2;
    long era = y / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 730425;
}

static void days_to_date(long days, int *y, int *m, int *d)
{
    days += 730425;
    long era = days / 146097;
    long doe = days - era * 146097;
    long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

/* "YYYY-MM-DD" → days since 2000-01-01, or -1. */
long date_parse(const char *s, size_t n)
{
    int y, m, d;
    if (n != 10 || s[4] != '-' || s[7] != '-')
        return -1;
    if (sscanf(s, "%4d-%2d-%2d", &y, &m, &d) != 3 || m < 1 || m > 12 || d < 1 || d > 31)
        return -1;
    return date_to_days(y, m, d);
}

static void date_format(long days, char out[11])
{
    int y, m, d;
    days_to_date(days, &y, &m, &d);
    snprintf(out, 11, "%04u-%02u-%02u", (unsigned)y % 10000u, (unsigned)m % 100u, (unsigned)d % 100u);
}

/* ======================================================================
 * product catalog
 * ====================================================================== */

/* Product families; a SKU is FAMILY-SIZE, e.g. PMP-210-L. */
static const char catalog_text[] =
    "BRG-101;Ball bearing 6201;mech;pc;1.85\n"
    "BRG-102;Ball bearing 6203;mech;pc;2.40\n"
    "BRG-115;Taper roller bearing;mech;pc;7.90\n"
    "BLT-130;V-belt A section;mech;pc;6.35\n"
    "BLT-131;Timing belt HTD 5M;mech;pc;11.20\n"
    "CBL-140;Control cable 4x0.75;elec;m;1.12\n"
    "CBL-141;Power cable 3x2.5;elec;m;2.05\n"
    "CBL-150;Shielded cable 2x0.5;elec;m;1.48\n"
    "CNT-160;Contactor 9A;elec;pc;18.90\n"
    "CNT-161;Contactor 25A;elec;pc;31.50\n"
    "FLT-170;Air filter element;fluid;pc;14.75\n"
    "FLT-171;Oil filter spin-on;fluid;pc;9.60\n"
    "FLT-175;Hydraulic return filter;fluid;pc;38.00\n"
    "FUS-180;Fuse gG 10A;elec;pc;0.95\n"
    "FUS-181;Fuse gG 32A;elec;pc;1.35\n"
    "GSK-190;Flange gasket DN50;fluid;pc;2.10\n"
    "GSK-191;Flange gasket DN100;fluid;pc;3.75\n"
    "HOS-200;Hydraulic hose 1/2in;fluid;m;8.40\n"
    "HOS-201;Suction hose 2in;fluid;m;12.60\n"
    "LMP-205;LED panel 40W;elec;pc;27.30\n"
    "LMP-206;Signal lamp 24V;elec;pc;6.80\n"
    "PMP-210;Centrifugal pump 0.75kW;fluid;pc;289.00\n"
    "PMP-211;Dosing pump;fluid;pc;412.00\n"
    "RLY-220;Relay 24VDC 2CO;elec;pc;7.45\n"
    "RLY-221;Timer relay;elec;pc;22.90\n"
    "SCR-230;Hex screw M8x30;fast;box;4.20\n"
    "SCR-231;Hex screw M10x40;fast;box;6.10\n"
    "SCR-235;Countersunk screw M6x20;fast;box;3.30\n"
    "NUT-240;Hex nut M8;fast;box;1.90\n"
    "NUT-241;Lock nut M10;fast;box;2.80\n"
    "SNS-250;Inductive sensor M18;elec;pc;24.50\n"
    "SNS-251;Pressure transmitter;elec;pc;96.00\n"
    "SNS-255;PT100 probe;elec;pc;41.20\n"
    "VLV-260;Ball valve 1in;fluid;pc;19.80\n"
    "VLV-261;Check valve 1in;fluid;pc;15.40\n"
    "VLV-265;Solenoid valve 24V;fluid;pc;58.00\n"
    "WSH-270;Flat washer M8;fast;box;0.85\n"
    "WSH-271;Spring washer M10;fast;box;1.05\n";

static const char *const sizes[] = { "S", "M", "L", "XL" };
#define NSIZES 4

struct product {
    char code[8];
    char name[40];
    char category[8];
    char unit[4];
    long price_cents;
};

struct catalog {
    struct product *items;
    int n;
};

/* "name;...;12.34" field → cents, or -1. */
static long parse_price(const char *s, size_t n)
{
    char tmp[16];
    long whole, frac;
    str_copy(tmp, sizeof tmp, s, n);
    if (sscanf(tmp, "%ld.%2ld", &whole, &frac) != 2)
        return -1;
    return whole * 100 + frac;
}

/* Split line (n bytes, no newline) at sep into at most max fields. */
int split_fields(const char *line, size_t n, char sep, const char **f, size_t *len, int max)
{
    int k = 0;
    const char *start = line, *end = line + n;
    for (const char *p = line; p <= end && k < max; p++)
        if (p == end || *p == sep) {
            f[k] = start;
            len[k++] = (size_t)(p - start);
            start = p + 1;
        }
    return k;
}

static int catalog_parse_line(const char *line, size_t n, struct product *p)
{
    const char *f[5];
    size_t len[5];
    if (split_fields(line, n, ';', f, len, 5) != 5)
        return -1;
    str_copy(p->code, sizeof p->code, f[0], len[0]);
    str_copy(p->name, sizeof p->name, f[1], len[1]);
    str_copy(p->category, sizeof p->category, f[2], len[2]);
    str_copy(p->unit, sizeof p->unit, f[3], len[3]);
    p->price_cents = parse_price(f[4], len[4]);
    return p->price_cents < 0 ? -1 : 0;
}

void catalog_load(struct catalog *c)
{
    const char *p = catalog_text;
    int cap = 16;
    c->items = xmalloc((size_t)cap * sizeof *c->items);
    c->n = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (c->n == cap) {
            cap *= 2;
            c->items = xrealloc(c->items, (size_t)cap * sizeof *c->items);
        }
        if (catalog_parse_line(p, (size_t)(nl - p), &c->items[c->n]) < 0)
            die(2, "bad catalog line: %.*s", (int)(nl - p), p);
        c->n++;
        p = nl + 1;
    }
}

/* The product family of a SKU, or NULL. */
const struct product *catalog_find(const struct catalog *c, const char *sku)
{
    for (int i = 0; i < c->n; i++) {
        size_t n = strlen(c->items[i].code);
        if (strncmp(c->items[i].code, sku, n) == 0 && sku[n] == '-')
            return &c->items[i];
    }
    return NULL;
}

static int size_index(const char *size)
{
    for (int i = 0; i < NSIZES; i++)
        if (strcmp(sizes[i], size) == 0)
            return i;
    return -1;
}

/* Describe a SKU for the stock record: name with size, unit, unit price
 * (larger sizes cost more).  0 on success, -1 for an unknown SKU. */
int catalog_describe(const struct catalog *c, const char *sku, char *name, size_t namesize,
                     const char **unit, long *price_cents)
{
    const struct product *p = catalog_find(c, sku);
    if (!p)
        return -1;
    int s = size_index(sku + strlen(p->code) + 1);
    if (s < 0)
        return -1;
    snprintf(name, namesize, "%s, size %s", p->name, sizes[s]);
    *unit = p->unit;
    *price_cents = p->price_cents * (100 + 15 * s) / 100;
    return 0;
}

static void catalog_destroy(struct catalog *c)
{
    free(c->items);
    c->items = NULL;
    c->n = 0;
}

/* ======================================================================
 * SKU map: chained hash table from SKU to stock item
 * ====================================================================== */

struct item;

struct skumap_entry {
    struct skumap_entry *next;
    struct item *item;
    uint32_t hash;
};

struct skumap {
    struct skumap_entry **slots;
    size_t nslots, count;
};

uint32_t sku_hash(const char *sku)
{
    uint32_t h = 2166136261u;
    for (; *sku; sku++)
        h = (h ^ (unsigned char)*sku) * 16777619u;
    return h;
}

static void skumap_init(struct skumap *m, size_t nslots)
{
    m->slots = xcalloc(nslots, sizeof *m->slots);
    m->nslots = nslots;
    m->count = 0;
}

static const char *item_sku(const struct item *it);

struct item *skumap_find(const struct skumap *m, const char *sku)
{
    uint32_t h = sku_hash(sku);
    for (struct skumap_entry *e = m->slots[h % m->nslots]; e; e = e->next)
        if (e->hash == h && strcmp(item_sku(e->item), sku) == 0)
            return e->item;
    return NULL;
}

static void skumap_grow(struct skumap *m)
{
    size_t n = m->nslots * 2;
    struct skumap_entry **slots = xcalloc(n, sizeof *slots);
    for (size_t i = 0; i < m->nslots; i++) {
        struct skumap_entry *e = m->slots[i], *next;
        for (; e; e = next) {
            next = e->next;
            e->next = slots[e->hash % n];
            slots[e->hash % n] = e;
        }
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = n;
}

/* Add item under its SKU (the caller knows it is not there yet). */
static void skumap_insert(struct skumap *m, struct item *it)
{
    if (m->count + 1 > m->nslots)
        skumap_grow(m);
    struct skumap_entry *e = xmalloc(sizeof *e);
    e->item = it;
    e->hash = sku_hash(item_sku(it));
    e->next = m->slots[e->hash % m->nslots];
    m->slots[e->hash % m->nslots] = e;
    m->count++;
}

static void skumap_each(const struct skumap *m, void (*fn)(struct item *, void *), void *arg)
{
    for (size_t i = 0; i < m->nslots; i++)
        for (struct skumap_entry *e = m->slots[i]; e; e = e->next)
            fn(e->item, arg);
}

static void skumap_destroy(struct skumap *m)
{
    for (size_t i = 0; i < m->nslots; i++) {
        struct skumap_entry *e = m->slots[i], *next;
        for (; e; e = next) {
            next = e->next;
            free(e);
        }
    }
    free(m->slots);
}

/* ======================================================================
 * stock (shared by the importer threads)
 * ====================================================================== */

struct item {
    char sku[SKU_MAX];
    char name[64];
    const char *unit;
    long price_cents;
    long on_hand[NWAREHOUSES];
    long received, shipped;
    long last_day;
};

struct stock {
    pthread_mutex_t lock;
    struct skumap items;
    const struct catalog *catalog;
};

static const char *item_sku(const struct item *it)
{
    return it->sku;
}

void stock_init(struct stock *s, const struct catalog *c)
{
    pthread_mutex_init(&s->lock, NULL);
    skumap_init(&s->items, 64);
    s->catalog = c;
}

struct item *stock_find(struct stock *s, const char *sku)
{
    pthread_mutex_lock(&s->lock);
    struct item *it = skumap_find(&s->items, sku);
    pthread_mutex_unlock(&s->lock);
    return it;
}

struct item *stock_add(struct stock *s, struct item *it)
{
    pthread_mutex_lock(&s->lock);
    skumap_insert(&s->items, it);
    pthread_mutex_unlock(&s->lock);
    return it;
}

/* The stock item for sku, created from the catalog on its first movement;
 * NULL if the catalog does not know the SKU. */
struct item *stock_item(struct stock *s, const char *sku)
{
    struct item *it = stock_find(s, sku);
    if (it)
        return it;

    it = xcalloc(1, sizeof *it);
    str_copy(it->sku, sizeof it->sku, sku, strlen(sku));
    if (catalog_describe(s->catalog, sku, it->name, sizeof it->name, &it->unit,
                         &it->price_cents) < 0) {
        free(it);
        return NULL;
    }
    return stock_add(s, it);
}

enum kind { MOVE_RECEIPT, MOVE_SHIPMENT, MOVE_ADJUST };

struct movement {
    long day;
    enum kind kind;
    char sku[SKU_MAX];
    long qty;               /* signed for adjustments */
    char ref[16];
};

/* Apply one movement in warehouse w; 0, or -1 if it would make the stock
 * negative. */
int item_apply(struct stock *s, struct item *it, int w, const struct movement *m)
{
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    switch (m->kind) {
    case MOVE_RECEIPT:
        it->on_hand[w] += m->qty;
        it->received += m->qty;
        break;
    case MOVE_SHIPMENT:
        if (it->on_hand[w] < m->qty)
            rc = -1;
        else {
            it->on_hand[w] -= m->qty;
            it->shipped += m->qty;
        }
        break;
    case MOVE_ADJUST:
        if (it->on_hand[w] + m->qty < 0)
            rc = -1;
        else
            it->on_hand[w] += m->qty;
        break;
    }
    if (m->day > it->last_day)
        it->last_day = m->day;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Quantity on hand of sku in warehouse w; -1 if there is no such item. */
long stock_on_hand(struct stock *s, const char *sku, int w)
{
    struct item *it = stock_find(s, sku);
    return it ? it->on_hand[w] : -1;
}

static void free_item(struct item *it, void *arg)
{
    (void)arg;
    free(it);
}

static void stock_destroy(struct stock *s)
{
    skumap_each(&s->items, free_item, NULL);
    skumap_destroy(&s->items);
    pthread_mutex_destroy(&s->lock);
}

/* ======================================================================
 * sample data: a quarter of movements for one warehouse
 * ====================================================================== */

#define FIRST_DAY 9497      /* 2026-01-01 */
#define NDAYS     90

struct sample {
    const struct catalog *catalog;
    struct textbuf journal;
    struct textbuf counts;
    long (*on_hand)[NSIZES];        /* [family][size] as the generator tracks it */
};

/* The day a SKU is first stocked: most of the range from the start, the
 * rest introduced during the quarter (the same day in every warehouse). */
static long sample_launch_day(int family, int size)
{
    unsigned h = (unsigned)(family * 7 + size * 13) % 10;
    return h < 6 ? 0 : (long)((family * 37 + size * 11) % NDAYS);
}

static void sample_write_record(struct textbuf *b, long day, const char *kind, int family,
                                const struct catalog *c, int size, long qty, const char *ref)
{
    char line[96], date[11];
    date_format(FIRST_DAY + day, date);
    int n = snprintf(line, sizeof line, "%s;%s;%s-%s;%ld;%s", date, kind,
                     c->items[family].code, sizes[size], qty, ref);
    textbuf_append(b, line, (size_t)n);
    textbuf_printf(b, "*%08x\n", crc32_buf(line, (size_t)n));
}

/* Generate the day's movements of one SKU (receipt first, then shipments
 * as stock allows, now and then a count adjustment). */
static int sample_movements(struct sample *smp, struct rng *r, long day, int family, int size)
{
    long *oh = &smp->on_hand[family][size];
    char ref[16];
    int n = 0;

    if (*oh < 5 || rng_below(r, 6) == 0) {
        long qty = 10 + rng_below(r, 60);
        snprintf(ref, sizeof ref, "PO-%06u", rng_below(r, 1000000));
        sample_write_record(&smp->journal, day, "RCV", family, smp->catalog, size, qty, ref);
        *oh += qty;
        n++;
    }
    for (unsigned k = rng_below(r, 3); k > 0 && *oh > 0; k--) {
        long qty = 1 + rng_below(r, (unsigned)(*oh < 12 ? *oh : 12));
        snprintf(ref, sizeof ref, "SO-%06u", rng_below(r, 1000000));
        sample_write_record(&smp->journal, day, "SHP", family, smp->catalog, size, qty, ref);
        *oh -= qty;
        n++;
    }
    if (rng_below(r, 40) == 0 && *oh > 2) {
        sample_write_record(&smp->journal, day, "ADJ", family, smp->catalog, size, -1, "CYCLECOUNT");
        *oh -= 1;
        n++;
    }
    return n;
}

/* The journal of warehouse w as its export would look, with trailer. */
void sample_journal(struct sample *smp, int w)
{
    struct rng r;
    int records = 0;
    long net = 0, before = 0;
    rng_seed(&r, 1000 + (uint64_t)w);

    for (long day = 0; day < NDAYS; day++)
        for (int f = 0; f < smp->catalog->n; f++)
            for (int s = 0; s < NSIZES; s++) {
                if (day < sample_launch_day(f, s) || rng_below(&r, 5) != 0)
                    continue;
                before = smp->on_hand[f][s];
                records += sample_movements(smp, &r, day, f, s);
                net += smp->on_hand[f][s] - before;
            }
    char line[64];
    int n = snprintf(line, sizeof line, "END;%d;%ld", records, net);
    textbuf_append(&smp->journal, line, (size_t)n);
    textbuf_printf(&smp->journal, "*%08x\n", crc32_buf(line, (size_t)n));
}

/* The physical count at the end of the quarter, as the scanners report it. */
void sample_count_sheet(struct sample *smp)
{
    for (int f = 0; f < smp->catalog->n; f++)
        for (int s = 0; s < NSIZES; s++)
            if (smp->on_hand[f][s] > 0)
                textbuf_printf(&smp->counts, "%s-%s;%ld\n", smp->catalog->items[f].code, sizes[s],
                               smp->on_hand[f][s]);
}

/* ======================================================================
 * journal parsing
 * ====================================================================== */

struct reader {
    const char *p, *end;
    int lineno;
};

static void reader_init(struct reader *rd, const char *text, size_t len)
{
    rd->p = text;
    rd->end = text + len;
    rd->lineno = 0;
}

/* Next line (without its newline) into line and len; 0 at the end. */
static int reader_next_line(struct reader *rd, const char **line, size_t *len)
{
    if (rd->p >= rd->end)
        return 0;
    const char *nl = memchr(rd->p, '\n', (size_t)(rd->end - rd->p));
    if (!nl)
        nl = rd->end;
    *line = rd->p;
    *len = (size_t)(nl - rd->p);
    rd->p = nl < rd->end ? nl + 1 : nl;
    rd->lineno++;
    return 1;
}

/* Check "payload*crc32hex"; 0 and the payload length in *n, or -1. */
int record_crc_ok(const char *line, size_t len, size_t *n)
{
    const char *star = memchr(line, '*', len);
    if (!star || line + len - star != 9)
        return -1;
    char hex[9];
    str_copy(hex, sizeof hex, star + 1, 8);
    char *endp;
    unsigned long want = strtoul(hex, &endp, 16);
    if (*endp)
        return -1;
    *n = (size_t)(star - line);
    return crc32_buf(line, *n) == (uint32_t)want ? 0 : -1;
}

static int parse_long(const char *s, size_t n, long *out)
{
    char tmp[24], *endp;
    if (n == 0 || n >= sizeof tmp)
        return -1;
    str_copy(tmp, sizeof tmp, s, n);
    *out = strtol(tmp, &endp, 10);
    return *endp ? -1 : 0;
}

static int parse_kind(const char *s, size_t n, enum kind *k)
{
    if (n != 3)
        return -1;
    if (memcmp(s, "RCV", 3) == 0)
        *k = MOVE_RECEIPT;
    else if (memcmp(s, "SHP", 3) == 0)
        *k = MOVE_SHIPMENT;
    else if (memcmp(s, "ADJ", 3) == 0)
        *k = MOVE_ADJUST;
    else
        return -1;
    return 0;
}

/* Parse a checked record payload; 0 or -1. */
int parse_movement(const char *s, size_t n, struct movement *m)
{
    const char *f[5];
    size_t len[5];
    if (split_fields(s, n, ';', f, len, 5) != 5)
        return -1;
    if ((m->day = date_parse(f[0], len[0])) < 0 || parse_kind(f[1], len[1], &m->kind) < 0 ||
        len[2] == 0 || len[2] >= SKU_MAX || parse_long(f[3], len[3], &m->qty) < 0)
        return -1;
    if (m->kind != MOVE_ADJUST && m->qty <= 0)
        return -1;
    str_copy(m->sku, sizeof m->sku, f[2], len[2]);
    str_copy(m->ref, sizeof m->ref, f[4], len[4]);
    return 0;
}

static int parse_trailer(const char *s, size_t n, long *records, long *net)
{
    const char *f[3];
    size_t len[3];
    if (split_fields(s, n, ';', f, len, 3) != 3 || len[0] != 3 || memcmp(f[0], "END", 3) != 0)
        return -1;
    return parse_long(f[1], len[1], records) < 0 || parse_long(f[2], len[2], net) < 0 ? -1 : 0;
}

/* ======================================================================
 * import (one thread per warehouse journal)
 * ====================================================================== */

struct import_job {
    struct stock *stock;
    int warehouse;
    const char *journal;
    size_t len;
    pthread_barrier_t *checked;     /* every importer has checked its journal */
    int *abort;                     /* set by an importer whose journal is bad */
    /* results */
    struct movement *moves;
    size_t nmoves;
    long records, net;
    int error_line;
    char error[96];
};

static int import_fail(struct import_job *job, int line, const char *what)
{
    job->error_line = line;
    snprintf(job->error, sizeof job->error, "%s", what);
    return -1;
}

int apply_movement(struct stock *s, int w, const struct movement *m)
{
    struct item *it = stock_item(s, m->sku);
    if (!it)
        return -2;
    return item_apply(s, it, w, m);
}

/* Check and parse a whole journal into job->moves; 0, or -1 with
 * job->error set.  Changes no stock. */
int load_journal(struct import_job *job)
{
    struct reader rd;
    const char *line;
    size_t len, n, cap = 0;
    long trailer_records = -1, trailer_net = 0;

    reader_init(&rd, job->journal, job->len);
    while (reader_next_line(&rd, &line, &len)) {
        if (record_crc_ok(line, len, &n) < 0)
            return import_fail(job, rd.lineno, "CRC mismatch");
        if (n >= 4 && memcmp(line, "END;", 4) == 0) {
            if (parse_trailer(line, n, &trailer_records, &trailer_net) < 0)
                return import_fail(job, rd.lineno, "bad trailer");
            break;
        }
        if (job->nmoves == cap) {
            cap = cap ? cap * 2 : 256;
            job->moves = xrealloc(job->moves, cap * sizeof *job->moves);
        }
        struct movement *m = &job->moves[job->nmoves];
        if (parse_movement(line, n, m) < 0)
            return import_fail(job, rd.lineno, "malformed record");
        job->nmoves++;
        job->records++;
        job->net += m->kind == MOVE_SHIPMENT ? -m->qty : m->qty;
    }
    if (trailer_records != job->records || trailer_net != job->net)
        return import_fail(job, rd.lineno, "trailer totals do not match the records");
    return 0;
}

/* Apply the loaded movements to the stock; 0, or -1 with job->error set. */
int apply_journal(struct import_job *job)
{
    for (size_t i = 0; i < job->nmoves; i++) {
        int rc = apply_movement(job->stock, job->warehouse, &job->moves[i]);
        if (rc == -2)
            return import_fail(job, (int)i + 1, "SKU not in the catalog");
        if (rc < 0)
            return import_fail(job, (int)i + 1, "stock would go negative");
    }
    return 0;
}

/* All or nothing: no journal is applied unless every journal checks out. */
static void *importer_main(void *arg)
{
    struct import_job *job = arg;
    int rc = load_journal(job);
    if (rc < 0)
        __atomic_store_n(job->abort, 1, __ATOMIC_RELAXED);
    pthread_barrier_wait(job->checked);
    if (rc == 0 && !__atomic_load_n(job->abort, __ATOMIC_RELAXED))
        apply_journal(job);
    return NULL;
}

/* ======================================================================
 * reconciliation with the count sheets
 * ====================================================================== */

static const char *const warehouse_names[NWAREHOUSES] = { "north", "south" };

/* Compare the stock of warehouse w with its count sheet; 0 if they agree,
 * otherwise -1 with the first discrepancy described in msg. */
int reconcile_counts(struct stock *s, int w, const struct textbuf *counts, char *msg, size_t msgsize)
{
    struct reader rd;
    const char *line;
    size_t len;

    reader_init(&rd, counts->data, counts->len);
    while (reader_next_line(&rd, &line, &len)) {
        const char *f[2];
        size_t flen[2];
        long counted;
        char sku[SKU_MAX];
        if (split_fields(line, len, ';', f, flen, 2) != 2 || flen[0] >= SKU_MAX ||
            parse_long(f[1], flen[1], &counted) < 0) {
            snprintf(msg, msgsize, "%s count sheet line %d is malformed", warehouse_names[w], rd.lineno);
            return -1;
        }
        str_copy(sku, sizeof sku, f[0], flen[0]);
        long booked = stock_on_hand(s, sku, w);
        if (booked != counted) {
            snprintf(msg, msgsize, "%s: %s counted %ld, books say %ld", warehouse_names[w], sku,
                     counted, booked);
            return -1;
        }
    }
    return 0;
}

/* ======================================================================
 * report
 * ====================================================================== */

struct report_row {
    const struct item *item;
    long qty;
    long value_cents;
};

struct report {
    struct report_row *rows;
    size_t n, cap;
    long total_cents;
};

static void report_add_item(struct item *it, void *arg)
{
    struct report *r = arg;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->rows = xrealloc(r->rows, r->cap * sizeof *r->rows);
    }
    struct report_row *row = &r->rows[r->n++];
    row->item = it;
    row->qty = 0;
    for (int w = 0; w < NWAREHOUSES; w++)
        row->qty += it->on_hand[w];
    row->value_cents = row->qty * it->price_cents;
    r->total_cents += row->value_cents;
}

static int row_cmp_value(const void *a, const void *b)
{
    const struct report_row *x = a, *y = b;
    if (x->value_cents != y->value_cents)
        return x->value_cents < y->value_cents ? 1 : -1;
    return strcmp(x->item->sku, y->item->sku);
}

void report_build(struct report *r, struct stock *s)
{
    memset(r, 0, sizeof *r);
    skumap_each(&s->items, report_add_item, r);
    qsort(r->rows, r->n, sizeof *r->rows, row_cmp_value);
}

static void money_format(long cents, char *out, size_t n)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%ld", cents / 100);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    snprintf(out + o, n - o, ".%02ld", cents % 100);
}

static void category_totals(const struct report *r, const struct catalog *c, struct textbuf *out)
{
    static const char *const cats[] = { "mech", "elec", "fluid", "fast" };
    for (size_t k = 0; k < sizeof cats / sizeof cats[0]; k++) {
        long total = 0;
        for (size_t i = 0; i < r->n; i++) {
            const struct product *p = catalog_find(c, r->rows[i].item->sku);
            if (p && strcmp(p->category, cats[k]) == 0)
                total += r->rows[i].value_cents;
        }
        char money[32];
        money_format(total, money, sizeof money);
        textbuf_printf(out, "  %-8s %16s\n", cats[k], money);
    }
}

/* Render the report; returns a checksum of the rendered text. */
uint32_t report_render(const struct report *r, const struct catalog *c, struct textbuf *out)
{
    char money[32], date[11];
    textbuf_printf(out, "%-12s %-40s %6s %4s %14s %10s\n", "SKU", "ITEM", "QTY", "UNIT", "VALUE",
                   "LAST MOVE");
    for (size_t i = 0; i < r->n; i++) {
        const struct report_row *row = &r->rows[i];
        money_format(row->value_cents, money, sizeof money);
        date_format(row->item->last_day, date);
        textbuf_printf(out, "%-12s %-40.40s %6ld %4s %14s %10s\n", row->item->sku, row->item->name,
                       row->qty, row->item->unit, money, date);
    }
    money_format(r->total_cents, money, sizeof money);
    textbuf_printf(out, "%d items, stock value %s\nby category:\n", (int)r->n, money);
    category_totals(r, c, out);
    return crc32_buf(out->data, out->len);
}

static void report_destroy(struct report *r)
{
    free(r->rows);
}

/* ======================================================================
 * main
 * ====================================================================== */

static double elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - since->tv_sec) * 1e3 + (double)(now.tv_nsec - since->tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    struct timespec start;
    struct catalog catalog;
    struct sample samples[NWAREHOUSES];
    struct import_job jobs[NWAREHOUSES];
    pthread_t tid[NWAREHOUSES];
    struct stock stock;
    char msg[160];

    clock_gettime(CLOCK_MONOTONIC, &start);
    crc32_init();
    catalog_load(&catalog);

    for (int w = 0; w < NWAREHOUSES; w++) {
        memset(&samples[w], 0, sizeof samples[w]);
        samples[w].catalog = &catalog;
        samples[w].on_hand = xcalloc((size_t)catalog.n, sizeof *samples[w].on_hand);
        sample_journal(&samples[w], w);
        sample_count_sheet(&samples[w]);
    }

    pthread_barrier_t checked;
    int abort_import = 0;
    pthread_barrier_init(&checked, NULL, NWAREHOUSES);
    stock_init(&stock, &catalog);
    for (int w = 0; w < NWAREHOUSES; w++) {
        jobs[w] = (struct import_job){ .stock = &stock, .warehouse = w,
                                       .journal = samples[w].journal.data,
                                       .len = samples[w].journal.len,
                                       .checked = &checked, .abort = &abort_import };
        if (pthread_create(&tid[w], NULL, importer_main, &jobs[w]) != 0)
            die(2, "cannot start the importer for %s", warehouse_names[w]);
    }
    for (int w = 0; w < NWAREHOUSES; w++)
        pthread_join(tid[w], NULL);
    pthread_barrier_destroy(&checked);
    for (int w = 0; w < NWAREHOUSES; w++)
        if (jobs[w].error[0])
            die(1, "%s journal line %d: %s", warehouse_names[w], jobs[w].error_line, jobs[w].error);

    for (int w = 0; w < NWAREHOUSES; w++)
        if (reconcile_counts(&stock, w, &samples[w].counts, msg, sizeof msg) < 0)
            die(1, "stock does not match the count: %s", msg);

    struct report report;
    struct textbuf text = { 0 };
    report_build(&report, &stock);
    uint32_t sum = report_render(&report, &catalog, &text);
    if (verbose) {
        fputs(text.data, stdout);
        printf("report checksum %08x, %ld + %ld records, %.1f ms\n", sum, jobs[0].records,
               jobs[1].records, elapsed_ms(&start));
    }

    free(text.data);
    report_destroy(&report);
    stock_destroy(&stock);
    for (int w = 0; w < NWAREHOUSES; w++) {
        free(samples[w].journal.data);
        free(samples[w].counts.data);
        free(samples[w].on_hand);
        free(jobs[w].moves);
    }
    catalog_destroy(&catalog);
    return 0;
}
