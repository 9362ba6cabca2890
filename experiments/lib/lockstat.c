/* vmlab guest library: /proc/lock_stat (kernels with CONFIG_LOCK_STAT). */
#include "vmlab.h"

static int lockclass_cmp(const void *a, const void *b)
{
	double x = ((const vl_lockclass *)a)->v[1], y = ((const vl_lockclass *)b)->v[1];
	return x < y ? 1 : x > y ? -1 : strcmp(((const vl_lockclass *)a)->name, ((const vl_lockclass *)b)->name);
}

/* Class lines are "name: 12 numbers"; the lines of call sites under each
 * class carry no such run of numbers. */
vl_lockclass *vl_lockstat_parse(const char *text, int *count)
{
	int n = 0, cap = 64;
	vl_lockclass *out = malloc(sizeof *out * (size_t)cap);
	char *s = strdup(text ? text : "");
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
		char *colon = strrchr(line, ':');
		if (!colon)
			continue;
		vl_lockclass c;
		int got = sscanf(colon + 1, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &c.v[0], &c.v[1],
				 &c.v[2], &c.v[3], &c.v[4], &c.v[5], &c.v[6], &c.v[7], &c.v[8], &c.v[9], &c.v[10],
				 &c.v[11]);
		if (got != 12)
			continue;
		char *st = line;
		while (*st == ' ' || *st == '\t')
			st++;
		size_t len = (size_t)(colon - st);
		if (!len)
			continue;
		if (len >= sizeof c.name)
			len = sizeof c.name - 1;
		memcpy(c.name, st, len);
		c.name[len] = 0;
		if (n == cap)
			out = realloc(out, sizeof *out * (size_t)(cap *= 2));
		out[n++] = c;
	}
	free(s);
	qsort(out, (size_t)n, sizeof *out, lockclass_cmp);
	*count = n;
	return out;
}

/* Zero the statistics so a report covers the experiment only. */
int vl_lockstat_clear(const char *path)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return 0;
	int ok = write(fd, "0\n", 2) == 2;
	close(fd);
	return ok;
}

int vl_lockstat(const char *phase, const char *path, int top)
{
	char *text = vl_slurp(path);
	if (!text)
		return 0;
	int n;
	vl_lockclass *c = vl_lockstat_parse(text, &n);
	free(text);
	vl_buf b = vl_record("lockstat");
	vl_kstr(&b, "phase", phase);
	vl_kint(&b, "classes", n);
	vl_open(&b, "top", '[');
	for (int i = 0; i < n && i < top; i++) {
		vl_open(&b, NULL, '{');
		vl_kstr(&b, "class", c[i].name);
		vl_kint(&b, "con_bounces", (long long)c[i].v[0]);
		vl_kint(&b, "contentions", (long long)c[i].v[1]);
		vl_kdbl(&b, "wait_max_us", c[i].v[3]);
		vl_kdbl(&b, "wait_total_us", c[i].v[4]);
		vl_kint(&b, "acquisitions", (long long)c[i].v[7]);
		vl_kdbl(&b, "hold_total_us", c[i].v[10]);
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_emit(&b);
	free(c);
	return n;
}

void vl_lockstat_match(vl_buf *b, const char *k, const char *path, const char **needles)
{
	char *text = vl_slurp(path);
	if (!text)
		return;
	int n;
	vl_lockclass *c = vl_lockstat_parse(text, &n);
	free(text);
	vl_open(b, k, '{');
	for (const char **nd = needles; *nd; nd++) {
		double con = 0, wait = 0;
		for (int i = 0; i < n; i++)
			if (strstr(c[i].name, *nd))
				con += c[i].v[1], wait += c[i].v[4];
		vl_open(b, *nd, '{');
		vl_kint(b, "contentions", (long long)con);
		vl_kdbl(b, "wait_total_us", wait);
		vl_close(b, '}');
	}
	vl_close(b, '}');
	free(c);
}
