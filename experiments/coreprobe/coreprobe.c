/*
 * coreprobe ("the core probe"): what one core's instructions, its L1, a
 * dependent load from memory, its branch predictor and three kernel paths
 * cost, by the guest's own clock (clock_gettime CLOCK_MONOTONIC around each
 * timed loop, as latprobe times its chase). One "core" record per test:
 *
 *   dep_add            one chain of dependent 64-bit ADDs: latency per add
 *   indep_add          four independent ADD chains interleaved: throughput
 *                      (1 / cycles_per_op = adds per cycle, at most 4 here)
 *   imul               dependent IMUL r64 chain (x *= m)
 *   div32, div64       dependent DIV r32 / DIV r64 chains: each divide
 *                      takes the last one's remainder:quotient as its
 *                      dividend (the remainder is below the divisor, so it
 *                      never overflows, and the pair never collapses to 0:0)
 *   fpadd, fpmul       dependent ADDSD / MULSD chains (x += 1, x *= 1+2^-40)
 *   l1_load            pointer chase `mov (%rax),%rax` round a 4 KiB ring of
 *                      64 lines in random order: L1 load-to-use
 *   branch_predictable a conditional branch per bit of an array, tested in a
 *                      register (bt; jnc): alternating 0,1,0,1
 *                      (--branch-pattern taken: all ones)
 *   branch_random      the same loop on xorshift random bits, one bit per
 *                      iteration of a pass (never repeated within it)
 *   branch_mispredict  derived: 2 x (random - predictable) per iteration,
 *                      since half the random branches mispredict
 *   index_chase        p = a[p] over --buf-mib (bound to this CPU's node):
 *                      one 8-byte index per 64-byte line, a random cyclic
 *                      permutation of the lines (Sattolo); a load whose
 *                      address is computed from the last one's value
 *   pointer_chase      the same lines and order, storing pointers (p = *p)
 *   scalar_sum         s += a[i] over the buffer, 8-byte loads, plain C
 *                      kept scalar (no-tree-vectorize): GB/s
 *   syscall            syscall(SYS_getppid) (Alpha: SYS_getxpid): ns/call
 *   page_fault         write one byte into each page of a fresh anonymous
 *                      mapping (MADV_NOHUGEPAGE: one fault per base page)
 *   fork               fork + child _exit(0) + waitpid: us per fork
 *
 * Exact instructions: on x86_64 every timed loop of the instruction, L1,
 * branch and chase tests is one inline asm statement, its operation repeated
 * 64 times (.rept; the branch test 8) per dec/jnz, so gcc -O2 can neither
 * fold, reorder nor vectorise it and the loop's own two instructions are 3 %
 * of it. Elsewhere (Alpha) portable C does the same, unrolled 64 times by
 * macro, its chains kept opaque to the compiler by an empty asm ("impl": "c"
 * in the record; Alpha has no divide instruction, so div32/div64 time
 * libgcc's software divide there). Every test runs one untimed warm-up pass,
 * then --reps timed passes: ns_per_op is the best pass, ns_mean their mean.
 * cycles_per_op = ns_per_op x --clock-ghz, the topology's clock (the
 * manifest passes it); without it (0) cycles_per_op is null.
 *
 * The process pins itself to --cpu and binds the buffer to that CPU's node
 * (vl_node_alloc: mbind, then first touch); natively, where either is not
 * allowed, it says so (pinned 0, on_node) and goes on. The buffer is
 * unmapped before the kernel tests, so fork copies a small process.
 *
 * Decisions (also in manifest.toml's help):
 *  - The predictable branch alternates by default, so that it runs exactly
 *    the random pattern's instructions (half the increments) and the
 *    difference is mispredictions alone; that needs a predictor with history
 *    (every real one, the model's gshare and tournament). All-taken is the
 *    other choice, for a predictor without history.
 *  - index_chase is the dependence the timing model's value rule of model
 *    2/3 misses (the address is computed from a small loaded integer, not a
 *    pointer): beside pointer_chase it shows whether the core follows
 *    registers. Its `mov (a,p,8)` is an indexed load, pointer_chase's and
 *    l1_load's a base-register one (Intel: 5 and 4 cycles to use).
 *  - div64 divides a 128-bit dividend (rdx nonzero): DIV r64's slow path on
 *    Intel, so hardware sits at the high end of the published 35-88 cycles.
 *  - page_fault's mmap, madvise and munmap are inside the timed span, as
 *    will-it-scale's page_fault1 loop has them (a fault's zeroing included).
 *  - The kernel paths are plain C on every ISA: their cost is the kernel's.
 */
#include "vmlab.h"
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define PROG "coreprobe"
#define U 64             /* operations per loop turn (asm .rept, C macros) */
#define RING (1 << 16)   /* the branch tests' iterations are a multiple of this */

#define R8(s) s s s s s s s s
#define R16(s) R8(s) R8(s)
#define R64(s) R8(R8(s))
/* an empty asm the C fallbacks put after each step of a chain: the compiler
 * must assume x changed, so it can neither fold nor combine the steps */
#define KEEP(x) __asm__ volatile("" : "+r"(x))

#if defined(__x86_64__)
#define IMPL "x86_64 asm"
#define REPT(insn) ".rept 64\n\t" insn "\n\t.endr\n\t"
#else
#define IMPL "c"
#endif

static volatile uint64_t sink;
static volatile double fsink;

/* ---- the tests: each does n operations (n a multiple of U) ------------- */
static void t_dep_add(long n)
{
	long k = n / U;
	uint64_t x = 1, one = 1;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("add %[one], %[x]") "dec %[k]\n\tjnz 1b"
				 : [x] "+r"(x), [k] "+r"(k) : [one] "r"(one) : "cc");
#else
	KEEP(one);  /* a register operand: addq, not an immediate's lda */
	for (; k; k--) {
		R64(x += one; KEEP(x);)
	}
#endif
	sink = x;
}

static void t_indep_add(long n)
{
	long k = n / U;
	uint64_t a = 1, b = 2, c = 3, d = 4, one = 1;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t"
				 ".rept 16\n\t"
				 "add %[one], %[a]\n\tadd %[one], %[b]\n\tadd %[one], %[c]\n\tadd %[one], %[d]\n\t"
				 ".endr\n\t"
				 "dec %[k]\n\tjnz 1b"
				 : [a] "+r"(a), [b] "+r"(b), [c] "+r"(c), [d] "+r"(d), [k] "+r"(k) : [one] "r"(one) : "cc");
#else
	KEEP(one);
	for (; k; k--) {
		R16(a += one; b += one; c += one; d += one; KEEP(a); KEEP(b); KEEP(c); KEEP(d);)
	}
#endif
	sink = a + b + c + d;
}

static void t_imul(long n)
{
	long k = n / U;
	uint64_t x = 0x9e3779b97f4a7c15ull, m = 0xff51afd7ed558ccdull;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("imul %[m], %[x]") "dec %[k]\n\tjnz 1b"
				 : [x] "+r"(x), [k] "+r"(k) : [m] "r"(m) : "cc");
#else
	KEEP(m);
	for (; k; k--) {
		R64(x *= m; KEEP(x);)
	}
#endif
	sink = x;
}

/* remainder:quotient of one divide is the next one's dividend */
static void t_div32(long n)
{
	long k = n / U;
	uint32_t q = 0x12345678u, r = 0x0badcafu % 0x7654321u, d = 0x7654321u;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("divl %[d]") "dec %[k]\n\tjnz 1b"
				 : "+a"(q), "+d"(r), [k] "+r"(k) : [d] "r"(d) : "cc");
#else
	KEEP(d);
	for (; k; k--) {
		R64({ uint64_t v = (uint64_t)r << 32 | q; q = (uint32_t)(v / d); r = (uint32_t)(v % d); KEEP(q); KEEP(r); })
	}
#endif
	sink = (uint64_t)q << 32 | r;
}

static void t_div64(long n)
{
	long k = n / U;
	uint64_t q = 0x123456789abcdefull, r = 0x0badcafe12345ull, d = 0x76543210fedcbull;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("divq %[d]") "dec %[k]\n\tjnz 1b"
				 : "+a"(q), "+d"(r), [k] "+r"(k) : [d] "r"(d) : "cc");
#else
	/* a 64-bit dividend made of the last remainder and quotient (no 128/64 divide in C) */
	KEEP(d);
	for (; k; k--) {
		R64({ uint64_t v = (r << 32) ^ q; q = v / d; r = v % d; KEEP(q); KEEP(r); })
	}
#endif
	sink = q ^ r;
}

static void t_fpadd(long n)
{
	long k = n / U;
	double x = 1.0, c = 1.0;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("addsd %[c], %[x]") "dec %[k]\n\tjnz 1b"
				 : [x] "+x"(x), [k] "+r"(k) : [c] "x"(c) : "cc");
#else
	/* no -ffast-math: the compiler must keep a dependent chain of FP adds in order */
	for (; k; k--) {
		R64(x += c;)
	}
#endif
	fsink = x;
}

static void t_fpmul(long n)
{
	long k = n / U;
	double x = 1.0, c = 1.0 + 1.0 / (1ull << 40);  /* stays near 1: no overflow, no denormals */
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("mulsd %[c], %[x]") "dec %[k]\n\tjnz 1b"
				 : [x] "+x"(x), [k] "+r"(k) : [c] "x"(c) : "cc");
#else
	for (; k; k--) {
		R64(x *= c;)
	}
#endif
	fsink = x;
}

/* ---- chases: a 4 KiB ring, and the big buffer as indices and as pointers - */
static void **ring_p;      /* where the L1 chase stands */
static void **chase_p;     /* where the pointer chase stands */
static uint64_t *idx_a;    /* the buffer as indices (element numbers) */
static uint64_t idx_p;     /* where the index chase stands */

static void *ptr_chase(void *p, long n)
{
	long k = n / U;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("mov (%[p]), %[p]") "dec %[k]\n\tjnz 1b"
				 : [p] "+r"(p), [k] "+r"(k) : : "cc", "memory");
#else
	void **q = p;
	for (; k; k--) {
		R64(q = *q;)
	}
	p = q;
#endif
	return p;
}

static void t_l1_load(long n) { ring_p = ptr_chase(ring_p, n); }
static void t_pointer_chase(long n) { chase_p = ptr_chase(chase_p, n); }

static void t_index_chase(long n)
{
	long k = n / U;
	uint64_t p = idx_p;
	const uint64_t *a = idx_a;
#if defined(__x86_64__)
	if (k > 0)
		__asm__ volatile("1:\n\t" REPT("mov (%[a],%[p],8), %[p]") "dec %[k]\n\tjnz 1b"
				 : [p] "+r"(p), [k] "+r"(k) : [a] "r"(a) : "cc", "memory");
#else
	for (; k; k--) {
		R64(p = a[p];)
	}
#endif
	idx_p = p;
}

/* plain C, kept scalar: one 8-byte load and one add per element */
static const uint64_t *sum_a;
__attribute__((noinline, optimize("no-tree-vectorize"))) static uint64_t scalar_sum(const uint64_t *a, long n)
{
	uint64_t s = 0;
	for (long i = 0; i < n; i++)
		s += a[i];
	return s;
}
static void t_scalar_sum(long n) { sink = scalar_sum(sum_a, n); }

/* ---- branches: one conditional branch per byte of a pattern ------------- */
static uint64_t *pattern;

/* len iterations (a multiple of 64), one per bit of the pattern; returns how
 * many bits were set. The bits come 64 at a time into a register, loaded
 * long before the branches that test them (bt; jnc): a branch resolves a
 * cycle after it issues, so a misprediction costs the core's redirect, not a
 * load's latency as well (as Agner Fog's penalty tests keep the condition
 * ready). */
__attribute__((noinline)) static long branch_pass(const uint64_t *a, long len)
{
	long c = 0;
#if defined(__x86_64__)
	long i = 0, end = len / 64;
	uint64_t w;
	__asm__ volatile("1:\n\t"
			 "mov (%[a],%[i],8), %[w]\n\t"
			 ".irp k,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,"
			 "32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63\n\t"
			 "bt $\\k, %[w]\n\t"
			 "jnc 2f\n\t"
			 "add $1, %[c]\n"
			 "2:\n\t"
			 ".endr\n\t"
			 "add $1, %[i]\n\t"
			 "cmp %[end], %[i]\n\t"
			 "jb 1b"
			 : [c] "+r"(c), [i] "+r"(i), [w] "=&r"(w) : [a] "r"(a), [end] "r"(end) : "cc", "memory");
#else
	for (long i = 0; i < len; i++)
		if (a[i / 64] >> (i % 64) & 1) {
			c++;
			__asm__ volatile("");  /* a side effect on one side: a branch, never a conditional move */
		}
#endif
	return c;
}

/* one pass over the whole pattern: n bytes, so a random pattern never repeats
 * within a pass (a predictor learns a short pattern that repeats: gshare with
 * 16 bits of history learned ~40 % of a 64 KiB one repeated) */
static long pattern_len;
static void t_branch(long n)
{
	(void)n;
	sink = (uint64_t)branch_pass(pattern, pattern_len);
}

/* ---- kernel paths -------------------------------------------------------- */
#if defined(SYS_getppid) && !defined(__alpha__)
#define NULL_CALL SYS_getppid
#define NULL_CALL_NAME "getppid"
#else
#define NULL_CALL SYS_getxpid  /* Alpha's getpid and getppid in one (its getppid number is newer than 6.1) */
#define NULL_CALL_NAME "getxpid"
#endif

static void t_syscall(long n)
{
	for (long i = 0; i < n; i++)
		syscall(NULL_CALL);
}

static long page_bytes, minflt_seen, fault_failed;

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* n pages of a fresh mapping, one write each; the mapping is set up and
 * unmapped inside the timed span, as will-it-scale's page_fault1 does it */
static void t_page_fault(long n)
{
	size_t size = (size_t)n * page_bytes;
	long f0 = minflt();
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		fault_failed = 1;
		return;
	}
	madvise(p, size, MADV_NOHUGEPAGE);  /* one fault per base page (EINVAL without THP: fine) */
	for (long i = 0; i < n; i++)
		((volatile char *)p)[(size_t)i * page_bytes] = 1;
	munmap(p, size);
	minflt_seen = minflt() - f0;
}

static long forks_failed;

static void t_fork(long n)
{
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0) {
			forks_failed++;
			continue;
		}
		waitpid(pid, NULL, 0);
	}
}

/* ---- timing and records -------------------------------------------------- */
static struct {
	int cpu, node, pinned;
	double ghz, on_node;
	long reps;
	int tests, skipped;
} C;

struct timing { double best, mean; };  /* ns per pass */

/* one untimed pass of `warm` operations, then reps timed passes of n */
static struct timing timed(void (*fn)(long), long n, long warm)
{
	struct timing t = {0, 0};
	if (warm)
		fn(warm);
	for (long r = 0; r < C.reps; r++) {
		double t0 = vl_now_ms(CLOCK_MONOTONIC);
		fn(n);
		double ns = (vl_now_ms(CLOCK_MONOTONIC) - t0) * 1e6;
		if (r == 0 || ns < t.best)
			t.best = ns;
		t.mean += ns / C.reps;
	}
	return t;
}

static void kfig(vl_buf *b, const char *k, double v)  /* a figure with 6 significant digits, or null */
{
	vl_key(b, k);
	if (v == v && v - v == 0)
		vl_raw(b, "%.6g", v);
	else
		vl_raw(b, "null");
}

/* a "core" record with what every test has; the caller adds its own and emits */
static vl_buf record(const char *name, long iters, double ns_per_op, double ns_mean, const char *impl)
{
	vl_buf b = vl_record("core");
	vl_kstr(&b, "name", name);
	vl_kint(&b, "iterations", iters);
	vl_kint(&b, "reps", C.reps);
	kfig(&b, "ns_per_op", ns_per_op);
	kfig(&b, "ns_mean", ns_mean);
	kfig(&b, "cycles_per_op", C.ghz > 0 ? ns_per_op * C.ghz : NAN);
	kfig(&b, "clock_ghz", C.ghz > 0 ? C.ghz : NAN);
	vl_kstr(&b, "impl", impl);
	vl_kint(&b, "cpu", C.cpu);
	vl_kint(&b, "node", C.node);
	vl_kint(&b, "pinned", C.pinned);
	vl_kint(&b, "skipped", 0);
	C.tests++;
	return b;
}

static void emit(const char *name, void (*fn)(long), long n, long warm, const char *impl)
{
	struct timing t = timed(fn, n, warm);
	vl_buf b = record(name, n, t.best / n, t.mean / n, impl);
	vl_emit(&b);
}

static void skipped(const char *name, const char *why)
{
	vl_buf b = vl_record("core");
	vl_kstr(&b, "name", name);
	vl_kint(&b, "skipped", 1);
	vl_kstr(&b, "note", why);
	vl_kint(&b, "cpu", C.cpu);
	vl_kint(&b, "node", C.node);
	vl_kint(&b, "pinned", C.pinned);
	vl_emit(&b);
	C.skipped++;
}

static long round_down(long n, long m) { return n < m ? m : n - n % m; }

static void usage_error(const char *what)
{
	fprintf(stderr, "%s: %s\n", PROG, what);
	exit(2);
}

int main(int argc, char **argv)
{
	long cpu = 0, iters = 1000000, reps = 3, buf_mib = 64, syscalls = 100000, fault_pages = 1024, forks = 200;
	double ghz = 0;
	int taken = 0;
	static struct option lo[] = {
		{"cpu", 1, 0, 'c'}, {"clock-ghz", 1, 0, 'g'}, {"iters", 1, 0, 'i'}, {"reps", 1, 0, 'r'},
		{"buf-mib", 1, 0, 'b'}, {"syscalls", 1, 0, 's'}, {"fault-pages", 1, 0, 'p'}, {"forks", 1, 0, 'f'},
		{"branch-pattern", 1, 0, 'P'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'c': cpu = vl_opt_long(PROG, "cpu", optarg); break;
		case 'g': {
			char *end;
			ghz = strtod(optarg, &end);
			if (!*optarg || *end || !(ghz >= 0 && ghz < 1000))
				usage_error("--clock-ghz expects the clock in GHz (0: unknown)");
			break;
		}
		case 'i': iters = vl_opt_long(PROG, "iters", optarg); break;
		case 'r': reps = vl_opt_long(PROG, "reps", optarg); break;
		case 'b': buf_mib = vl_opt_long(PROG, "buf-mib", optarg); break;
		case 's': syscalls = vl_opt_long(PROG, "syscalls", optarg); break;
		case 'p': fault_pages = vl_opt_long(PROG, "fault-pages", optarg); break;
		case 'f': forks = vl_opt_long(PROG, "forks", optarg); break;
		case 'P':
			if (strcmp(optarg, "alternating") && strcmp(optarg, "taken"))
				usage_error("--branch-pattern expects alternating or taken");
			taken = !strcmp(optarg, "taken");
			break;
		default: return 2;
		}
	}
	if (iters < U || reps < 1 || buf_mib < 1)
		usage_error("--iters must be at least 64, --reps and --buf-mib positive");
	C.ghz = ghz;
	C.reps = reps;
	C.pinned = vl_pin((int)cpu) == 0;
	if (!C.pinned)
		fprintf(stderr, "%s: cannot pin to CPU %ld (%s); measuring where the scheduler puts us\n", PROG, cpu,
			strerror(errno));
	unsigned gcpu = 0, home = 0;
	if (syscall(SYS_getcpu, &gcpu, &home, NULL))
		gcpu = (unsigned)sched_getcpu(), home = 0;
	C.cpu = (int)gcpu;
	C.node = (int)home;
	page_bytes = sysconf(_SC_PAGESIZE);
	iters = round_down(iters, U);

	/* the instruction chains */
	emit("dep_add", t_dep_add, iters, iters / 8 / U * U, IMPL);
	emit("indep_add", t_indep_add, iters, iters / 8 / U * U, IMPL);
	emit("imul", t_imul, iters, iters / 8 / U * U, IMPL);
	emit("div32", t_div32, iters, iters / 8 / U * U, IMPL);
	emit("div64", t_div64, iters, iters / 8 / U * U, IMPL);
	emit("fpadd", t_fpadd, iters, iters / 8 / U * U, IMPL);
	emit("fpmul", t_fpmul, iters, iters / 8 / U * U, IMPL);

	/* L1: 64 lines of one page, each pointing at the next in a random cycle */
	{
		static unsigned long long rng = 0x9e3779b97f4a7c15ull;
		char *ring = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint32_t order[64];
		if (ring == MAP_FAILED) {
			skipped("l1_load", "mmap of the 4 KiB ring failed");
		} else {
			vl_random_cycle(order, 64, &rng);
			for (int i = 0; i < 64; i++)
				*(void **)(ring + order[i] * 64) = ring + order[(i + 1) % 64] * 64;
			ring_p = (void **)ring;
			emit("l1_load", t_l1_load, iters, iters / 8 / U * U, IMPL);
			munmap(ring, 4096);
		}
	}

	/* branches: the same loop on a predictable and on a random pattern */
	{
		static unsigned long long rng = 0x2545f4914f6cdd1dull;
		long n = round_down(iters, RING);
		pattern_len = n;
		pattern = malloc(n / 8);
		for (long i = 0; i < n / 64; i++)
			pattern[i] = taken ? ~0ull : 0x5555555555555555ull;  /* alternating: bit 0 set, bit 1 clear, ... */
		struct timing p = timed(t_branch, n, RING);
		vl_buf b = record("branch_predictable", n, p.best / n, p.mean / n, IMPL);
		vl_kstr(&b, "pattern", taken ? "taken" : "alternating");
		vl_emit(&b);
		for (long i = 0; i < n / 64; i++)
			pattern[i] = vl_rand(&rng);
		struct timing r = timed(t_branch, n, RING);
		b = record("branch_random", n, r.best / n, r.mean / n, IMPL);
		vl_kstr(&b, "pattern", "random");
		vl_emit(&b);
		/* half the random branches mispredict: the penalty is twice the difference */
		double pen = 2 * (r.best - p.best) / n;
		b = record("branch_mispredict", n, pen, 2 * (r.mean - p.mean) / n, "derived");
		vl_kstr(&b, "derived_from", "2 x (branch_random - branch_predictable)");
		vl_kstr(&b, "pattern", taken ? "taken" : "alternating");
		vl_emit(&b);
		free(pattern);
	}

	/* memory: one buffer on this CPU's node, one random cycle through its lines */
	{
		static unsigned long long rng = 0x5851f42d4c957f2dull;
		size_t size = (size_t)buf_mib << 20, lines = size / 64;
		char *buf = vl_node_alloc(size, C.node);
		uint32_t *order = buf ? malloc(lines * sizeof *order) : NULL;
		if (!buf || !order) {
			skipped("index_chase", "cannot allocate the buffer");
			skipped("pointer_chase", "cannot allocate the buffer");
			skipped("scalar_sum", "cannot allocate the buffer");
		} else {
			C.on_node = vl_on_node(buf, size, C.node);
			vl_random_cycle(order, lines, &rng);
			long loads = round_down((long)lines, U);
			idx_a = (uint64_t *)buf;
			for (size_t i = 0; i < lines; i++)
				idx_a[(size_t)order[i] * 8] = (uint64_t)order[(i + 1) % lines] * 8;
			idx_p = (uint64_t)order[0] * 8;
			struct timing t = timed(t_index_chase, loads, loads);  /* a warm-up lap: TLB and caches steady */
			vl_buf b = record("index_chase", loads, t.best / loads, t.mean / loads, IMPL);
			vl_kint(&b, "buf_mib", buf_mib);
			vl_kdbl(&b, "on_node", C.on_node);
			vl_kint(&b, "end", (long long)(idx_p & 1));
			vl_emit(&b);

			for (size_t i = 0; i < lines; i++)
				*(void **)(buf + (size_t)order[i] * 64) = buf + (size_t)order[(i + 1) % lines] * 64;
			chase_p = (void **)(buf + (size_t)order[0] * 64);
			t = timed(t_pointer_chase, loads, loads);
			b = record("pointer_chase", loads, t.best / loads, t.mean / loads, IMPL);
			vl_kint(&b, "buf_mib", buf_mib);
			vl_kdbl(&b, "on_node", C.on_node);
			vl_kint(&b, "end", (long long)((uintptr_t)chase_p & 1));
			vl_emit(&b);
			free(order);

			long words = (long)(size / 8);
			sum_a = (const uint64_t *)buf;
			t = timed(t_scalar_sum, words, words);
			b = record("scalar_sum", words, t.best / words, t.mean / words, "c (no-tree-vectorize)");
			kfig(&b, "gbps", (double)size / t.best);
			kfig(&b, "gbps_mean", (double)size / t.mean);
			vl_kint(&b, "buf_mib", buf_mib);
			vl_kdbl(&b, "on_node", C.on_node);
			vl_emit(&b);
			munmap(buf, size);
		}
	}

	/* kernel paths */
	if (syscalls > 0) {
		struct timing t = timed(t_syscall, syscalls, syscalls / 8);
		vl_buf b = record("syscall", syscalls, t.best / syscalls, t.mean / syscalls, "c");
		vl_kstr(&b, "call", NULL_CALL_NAME);
		vl_emit(&b);
	}
	if (fault_pages > 0) {
		struct timing t = timed(t_page_fault, fault_pages, fault_pages);
		if (fault_failed) {
			skipped("page_fault", "mmap of the fault region failed");
		} else {
			vl_buf b = record("page_fault", fault_pages, t.best / fault_pages, t.mean / fault_pages, "c");
			vl_kint(&b, "page_bytes", page_bytes);
			vl_kint(&b, "minflt", minflt_seen);  /* of the last pass: one per page if every write faulted */
			vl_emit(&b);
		}
	}
	if (forks > 0) {
		struct timing t = timed(t_fork, forks, forks / 8 + 1);
		if (forks_failed) {
			skipped("fork", "fork failed");
		} else {
			vl_buf b = record("fork", forks, t.best / forks, t.mean / forks, "c");
			kfig(&b, "us_per_op", t.best / forks / 1e3);
			vl_emit(&b);
		}
	}

	vl_buf b = vl_record("coreprobe_done");
	vl_kint(&b, "tests", C.tests);
	vl_kint(&b, "skipped", C.skipped);
	vl_kint(&b, "cpu", C.cpu);
	vl_kint(&b, "node", C.node);
	vl_kint(&b, "pinned", C.pinned);
	vl_kstr(&b, "impl", IMPL);
	vl_emit(&b);
	return 0;
}
