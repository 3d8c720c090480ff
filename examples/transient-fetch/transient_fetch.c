/*
 * transient-fetch — invoices a day's orders.
 *
 * Each order (built in below, as the order service exports them: number,
 * total quoted to the customer at checkout in cents, then SKUxQUANTITY
 * lines) is priced line by line with the current unit price from the
 * pricing service, and the invoice total is checked against the quoted
 * total before the invoice is issued.  When the pricing service does not
 * answer, the unit price is taken from the local catalog snapshot (last
 * night's export) so that one slow request does not stop the run.
 *
 * The pricing service is simulated in-process: it answers from the current
 * price list, but like a remote service it sometimes times out (about one
 * request in a hundred).
 *
 * Exit status: 0 if every invoice matched its quote, 1 (one line on stderr)
 * otherwise.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -Werror -o transient-fetch transient_fetch.c
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

struct price {
    const char *sku;
    long cents;
};

/* ---- the pricing service (simulated) ---------------------------------- */

static const struct price current_prices[] = {
    { "BRK-174", 2269 },
    { "BRK-326", 1430 },
    { "BRK-619", 645 },
    { "BRK-670", 1168 },
    { "BRK-690", 2254 },
    { "BRK-946", 152 },
    { "CBL-544", 790 },
    { "CBL-660", 608 },
    { "CBL-695", 1176 },
    { "FLT-396", 137 },
    { "FLT-815", 168 },
    { "GSK-138", 1435 },
    { "GSK-183", 620 },
    { "GSK-192", 5012 },
    { "GSK-481", 2281 },
    { "GSK-745", 2301 },
    { "GSK-913", 1154 },
    { "LMP-254", 180 },
    { "LMP-406", 485 },
    { "LMP-576", 5032 },
    { "LMP-696", 123 },
    { "NUT-171", 5034 },
    { "NUT-247", 496 },
    { "NUT-766", 2293 },
    { "PMP-796", 1168 },
    { "RLY-196", 5014 },
    { "RLY-220", 3521 },
    { "RLY-534", 155 },
    { "RLY-537", 1172 },
    { "RLY-935", 288 },
    { "SCR-161", 151 },
    { "SCR-226", 108 },
    { "SCR-310", 463 },
    { "SCR-415", 5005 },
    { "SCR-506", 805 },
    { "SCR-564", 1155 },
    { "SCR-754", 277 },
    { "SNS-285", 815 },
    { "SNS-696", 511 },
    { "VLV-164", 301 },
};

static uint64_t net_state;

static void net_init(void)
{
    if (getrandom(&net_state, sizeof net_state, 0) != (ssize_t)sizeof net_state)
        net_state = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL);
    net_state |= 1;
}

/* 1 if the network drops this request (about 1 % of requests). */
static int network_blip(void)
{
    net_state ^= net_state << 13;
    net_state ^= net_state >> 7;
    net_state ^= net_state << 17;
    return net_state % 100 == 0;
}

/* Current unit price of sku in cents; -1 if the service timed out, -2 if
 * it does not know the SKU. */
long pricing_fetch(const char *sku)
{
    if (network_blip())
        return -1;
    for (size_t i = 0; i < sizeof current_prices / sizeof current_prices[0]; i++)
        if (strcmp(current_prices[i].sku, sku) == 0)
            return current_prices[i].cents;
    return -2;
}

/* ---- local catalog snapshot (last night's export) ---------------------- */

static const struct price catalog_snapshot[] = {
    { "BRK-174", 2269 },
    { "BRK-326", 1430 },
    { "BRK-619", 645 },
    { "BRK-670", 1168 },
    { "BRK-690", 2366 },
    { "BRK-946", 139 },
    { "CBL-544", 790 },
    { "CBL-660", 577 },
    { "CBL-695", 1176 },
    { "FLT-396", 130 },
    { "FLT-815", 168 },
    { "GSK-138", 1435 },
    { "GSK-183", 620 },
    { "GSK-192", 5012 },
    { "GSK-481", 2052 },
    { "GSK-745", 2301 },
    { "GSK-913", 1154 },
    { "LMP-254", 165 },
    { "LMP-406", 485 },
    { "LMP-576", 5032 },
    { "LMP-696", 123 },
    { "NUT-171", 5034 },
    { "NUT-247", 520 },
    { "NUT-766", 2293 },
    { "PMP-796", 1226 },
    { "RLY-196", 5014 },
    { "RLY-220", 3344 },
    { "RLY-534", 147 },
    { "RLY-537", 1172 },
    { "RLY-935", 288 },
    { "SCR-161", 151 },
    { "SCR-226", 113 },
    { "SCR-310", 463 },
    { "SCR-415", 5005 },
    { "SCR-506", 805 },
    { "SCR-564", 1039 },
    { "SCR-754", 277 },
    { "SNS-285", 815 },
    { "SNS-696", 511 },
    { "VLV-164", 301 },
};

long snapshot_price(const char *sku)
{
    for (size_t i = 0; i < sizeof catalog_snapshot / sizeof catalog_snapshot[0]; i++)
        if (strcmp(catalog_snapshot[i].sku, sku) == 0)
            return catalog_snapshot[i].cents;
    return -2;
}

/* Unit price for an invoice line: the live price, or the snapshot's when
 * the pricing service is unavailable. */
long unit_price(const char *sku)
{
    long cents = pricing_fetch(sku);
    if (cents == -1)
        cents = snapshot_price(sku);
    return cents;
}

/* ---- orders and invoices ------------------------------------------------ */

static const char orders_export[] =
    "1040 65866 VLV-164x11 BRK-670x8 SCR-564x7 RLY-196x7 RLY-196x2\n"
    "1041 46686 RLY-196x1 GSK-183x2 GSK-192x8 FLT-815x2\n"
    "1042 2132 SNS-696x1 CBL-544x1 SCR-754x3\n"
    "1043 17671 CBL-544x6 VLV-164x1 BRK-690x4 VLV-164x7 FLT-396x11\n"
    "1044 24520 NUT-247x10 NUT-766x8 CBL-660x2\n"
    "1045 12995 RLY-935x8 SCR-161x5 BRK-946x3 CBL-544x12\n"
    "1046 16464 GSK-913x8 FLT-815x9 BRK-326x4\n"
    "1047 44919 NUT-766x3 SCR-506x1 SCR-415x5 BRK-946x12 GSK-913x9\n"
    "1048 28782 FLT-815x6 GSK-481x9 SCR-506x9\n"
    "1049 85458 GSK-481x10 GSK-183x4 RLY-196x12\n"
    "1050 6228 GSK-183x9 SCR-226x6\n"
    "1051 7150 BRK-326x5\n"
    "1052 24722 GSK-913x4 SNS-696x6 RLY-537x12 NUT-247x6\n"
    "1053 4562 GSK-481x2\n"
    "1054 20740 SCR-161x4 NUT-171x4\n"
    "1055 28290 VLV-164x10 BRK-174x8 NUT-247x11 BRK-946x11\n"
    "1056 14016 PMP-796x12\n"
    "1057 2158 SCR-161x3 RLY-534x11\n"
    "1058 102104 BRK-946x12 RLY-196x8 RLY-196x12\n"
    "1059 504 FLT-815x3\n"
    "1060 10810 BRK-326x3 SNS-285x8\n"
    "1061 4671 VLV-164x10 SCR-161x11\n"
    "1062 6128 FLT-396x9 SCR-564x3 BRK-326x1\n"
    "1063 60060 SCR-415x12\n"
    "1064 5632 RLY-534x4 GSK-192x1\n"
    "1065 31802 GSK-192x5 SCR-310x4 SNS-285x6\n"
    "1066 10779 SCR-506x7 CBL-695x1 NUT-247x8\n"
    "1067 95324 SCR-415x7 SCR-310x3 SCR-506x3 SCR-415x9 BRK-326x8\n"
    "1068 922 SNS-696x1 FLT-396x3\n"
    "1069 6982 SCR-161x10 CBL-660x9\n"
    ;

#define MAX_LINES 8

struct line {
    char sku[12];
    int qty;
    long unit_cents;
};

struct order {
    int number;
    long quoted_cents;
    int nlines;
    struct line lines[MAX_LINES];
};

/* Parse one export line into o; 0 on success, -1 if malformed. */
int parse_order(const char *text, struct order *o)
{
    int used;
    memset(o, 0, sizeof *o);
    if (sscanf(text, "%d %ld%n", &o->number, &o->quoted_cents, &used) != 2)
        return -1;
    text += used;
    while (*text == ' ') {
        struct line *l = &o->lines[o->nlines];
        if (o->nlines == MAX_LINES ||
            sscanf(text, " %11[^x]x%d%n", l->sku, &l->qty, &used) != 2 || l->qty <= 0)
            return -1;
        o->nlines++;
        text += used;
    }
    return *text == '\0' ? 0 : -1;
}

/* Price every line; the invoice total in cents, or -1 if a SKU is unknown. */
long price_order(struct order *o)
{
    long total = 0;
    for (int i = 0; i < o->nlines; i++) {
        struct line *l = &o->lines[i];
        l->unit_cents = unit_price(l->sku);
        if (l->unit_cents < 0)
            return -1;
        total += l->unit_cents * l->qty;
    }
    return total;
}

/* 0 if the invoice total is what the customer was quoted, -1 if not. */
int validate_invoice(const struct order *o, long total)
{
    return total == o->quoted_cents ? 0 : -1;
}

int main(void)
{
    char buf[256];
    const char *p = orders_export;
    int issued = 0;

    net_init();
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        struct order o;

        if (n >= sizeof buf) {
            fprintf(stderr, "transient-fetch: export line too long\n");
            return 2;
        }
        memcpy(buf, p, n);
        buf[n] = '\0';
        p += nl ? n + 1 : n;
        if (parse_order(buf, &o) < 0) {
            fprintf(stderr, "transient-fetch: malformed order: %s\n", buf);
            return 2;
        }
        long total = price_order(&o);
        if (total < 0) {
            fprintf(stderr, "transient-fetch: order %d: unknown SKU\n", o.number);
            return 1;
        }
        if (validate_invoice(&o, total) < 0) {
            fprintf(stderr, "transient-fetch: order %d: invoice total %ld.%02ld differs from quoted %ld.%02ld\n",
                    o.number, total / 100, total % 100, o.quoted_cents / 100, o.quoted_cents % 100);
            return 1;
        }
        issued++;
    }
    return issued > 0 ? 0 : 2;
}
