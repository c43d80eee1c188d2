/* codecs/fmt_double.c - the shortest round-trip text of a double between
 * 1e-4 and 1e15, in integers: the text "%.15g", "%.16g" or "%.17g" would
 * print (the first that reads back), found without printf or strtod.
 *
 * d = m * 2^e exactly (m < 2^53).  Scaled by 10^k * 2^s with s = -(k + e),
 * d is N = m * 5^k, an integer below 2^128 in this range; its 17 leading
 * digits are D = N >> s, the rest of N the exact remainder.  Rounding D to
 * P digits is then exact (ties to even, as printf), and the candidate reads
 * back to d when it lies within half a unit in the last place of d, which
 * in these units is 5^k / 2 (5^k / 4 below a power of two), with ties
 * going to an even m, as strtod rounds. */
#include "codec_int.h"

#include <string.h>

typedef unsigned __int128 u128;

static const uint64_t pow5[21] = {
	1ull, 5ull, 25ull, 125ull, 625ull, 3125ull, 15625ull, 78125ull, 390625ull,
	1953125ull, 9765625ull, 48828125ull, 244140625ull, 1220703125ull,
	6103515625ull, 30517578125ull, 152587890625ull, 762939453125ull,
	3814697265625ull, 19073486328125ull, 95367431640625ull,
};

#define E16 10000000000000000ull
#define E17 100000000000000000ull

/* The 17 leading digits of m * 2^e for the decimal exponent x (the
 * position of its first digit): *ok false when x was wrong. */
static uint64_t lead17(uint64_t m, int e, int x, u128 *n, int *s, unsigned *k, bool *ok)
{
	*k = (unsigned)(16 - x);
	*s = -((int)*k + e);
	*n = (u128)m * pow5[*k];
	u128 dd = *n >> *s;
	*ok = dd >= E16 && dd < E17;
	return (uint64_t)dd;
}

/* Writes P (<= 17) significant digits q (exactly P digits) with the
 * decimal exponent x (-4 <= x < P) as %g would: fixed notation, trailing
 * zeros of the fraction dropped.  Returns the length. */
static size_t put_fixed(char *o, bool neg, uint64_t q, unsigned p, int x)
{
	char dig[17] = { 0 };
	for (unsigned i = p; i-- > 0;) {
		dig[i] = (char)('0' + q % 10);
		q /= 10;
	}
	unsigned used = p;
	while (used > 1 && dig[used - 1] == '0')
		used--;
	char *w = o;
	if (neg)
		*w++ = '-';
	if (x >= 0) {
		memcpy(w, dig, (size_t)x + 1);
		w += x + 1;
		if (used > (unsigned)x + 1) {
			*w++ = '.';
			memcpy(w, dig + x + 1, used - ((unsigned)x + 1));
			w += used - ((unsigned)x + 1);
		}
	} else {
		*w++ = '0';
		*w++ = '.';
		for (int i = -1; i > x; i--)
			*w++ = '0';
		memcpy(w, dig, used);
		w += used;
	}
	return (size_t)(w - o);
}

size_t cj_fmt_double_mid(double d, char *buf)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	bool neg = bits >> 63;
	unsigned be = (unsigned)(bits >> 52) & 0x7ff;
	if (be == 0 || be == 0x7ff)
		return 0;   /* zero, subnormal, infinite, NaN */
	uint64_t m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
	int e = (int)be - 1075;
	double ad = neg ? -d : d;
	if (!(ad >= 1e-4 && ad < 1e15))
		return 0;
	/* the decimal exponent: an estimate from the double, then checked
	 * (and corrected once) on the exact digits */
	static const double p10[] = { 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5,
				      1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14 };
	int x = -4;
	while (x < 14 && ad >= p10[x + 5])
		x++;
	u128 n;
	int s;
	unsigned k;
	bool ok;
	uint64_t dd = lead17(m, e, x, &n, &s, &k, &ok);
	if (!ok) {
		x += dd >= E17 ? 1 : -1;
		if (x < -4 || x > 14)
			return 0;
		dd = lead17(m, e, x, &n, &s, &k, &ok);
		if (!ok)
			return 0;
	}
	if (s <= 0 || s > 100)
		return 0;
	u128 rem = n & (((u128)1 << s) - 1);
	u128 half_ulp2 = pow5[k];   /* twice half an ulp: 5^k */
	bool pow2 = m == (1ull << 52);
	static const uint64_t div10[3] = { 100, 10, 1 };
	for (unsigned p = 15; p <= 17; p++) {
		uint64_t div = div10[p - 15];
		uint64_t q = dd / div, r = dd % div;
		/* round q at the exact value: compare 2 * fraction with div */
		u128 frac2 = (((u128)r << s) + rem) << 1, whole = (u128)div << s;
		if (frac2 > whole || (frac2 == whole && (q & 1)))
			q++;
		uint64_t top = p == 15 ? 1000000000000000ull : p == 16 ? E16 : E17;
		if (q >= top)
			return 0;   /* rounded up to one more digit: printf's exponent changes */
		u128 c = ((u128)(q * div)) << s;
		bool below = c < n;
		u128 diff = below ? n - c : c - n;
		bool back;
		if (below && pow2) /* the gap below a power of two is half as wide */
			back = (diff << 2) < half_ulp2 || (diff << 2) == half_ulp2;
		else
			back = (diff << 1) < half_ulp2 || ((diff << 1) == half_ulp2 && !(m & 1));
		if (back)
			return put_fixed(buf, neg, q, p, x);
	}
	return 0;
}
