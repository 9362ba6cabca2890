/* vmlab guest library: kswapd's CPU time per node, and the sampler process
 * that reports it over the run. */
#include "vmlab.h"

void vl_each_kswapd(void (*fn)(int node, long long ticks, void *arg), void *arg)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char p[300];
		snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
		char *s = vl_slurp(p);
		if (!s)
			continue;
		char *lp = strchr(s, '('), *rp = strrchr(s, ')');
		int node;
		if (lp && rp && sscanf(lp, "(kswapd%d)", &node) == 1) {
			/* fields after ")": state(3) ... utime(14) stime(15) */
			unsigned long long ut = 0, st = 0;
			char *f = rp + 2;
			for (int i = 3; i < 14 && f; i++)
				f = strchr(f, ' '), f = f ? f + 1 : NULL;
			if (f && sscanf(f, "%llu %llu", &ut, &st) == 2)
				fn(node, (long long)(ut + st), arg);
		}
		free(s);
	}
	if (d)
		closedir(d);
}

static void kswapd_emit(int node, long long ticks, void *arg)
{
	char k[16];
	snprintf(k, sizeof k, "%d", node);
	vl_kint((vl_buf *)arg, k, ticks);
}

void vl_kswapd(vl_buf *b)
{
	vl_kint(b, "clk_tck", sysconf(_SC_CLK_TCK));
	vl_open(b, "kswapd", '{');
	vl_each_kswapd(kswapd_emit, b);
	vl_close(b, '}');
}

struct kswapd_sum { long long sum, *per_node; int max; };

static void kswapd_add(int node, long long ticks, void *arg)
{
	struct kswapd_sum *t = arg;
	t->sum += ticks;
	if (t->per_node && node >= 0 && node < t->max)
		t->per_node[node] = ticks;
}

long long vl_kswapd_ticks(long long *per_node, int max)
{
	struct kswapd_sum t = {0, per_node, max};
	if (per_node)
		memset(per_node, 0, sizeof *per_node * (size_t)max);
	vl_each_kswapd(kswapd_add, &t);
	return t.sum;
}

pid_t vl_kswapd_sampler(long interval_ms)
{
	pid_t parent = getpid(), pid = fork();
	if (pid != 0)
		return pid;
	int nodes = vl_nodes();
	long long *per = calloc((size_t)nodes + 1, sizeof *per);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long seq = 0; getppid() == parent; seq++) {
		vl_kswapd_ticks(per, nodes);
		vl_buf b = vl_record("kswapd_sample");
		vl_kint(&b, "seq", seq);
		vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC) - t0);
		vl_kint(&b, "clk_tck", sysconf(_SC_CLK_TCK));
		vl_open(&b, "ticks", '[');
		for (int n = 0; n < nodes; n++) {
			vl_sep(&b);
			vl_raw(&b, "%lld", per[n]);
		}
		vl_close(&b, ']');
		vl_emit(&b);
		struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	_exit(0);
}

void vl_sampler_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
}
