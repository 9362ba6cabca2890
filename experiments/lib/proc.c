/* vmlab guest library: /proc and /sys readers. */
#include "vmlab.h"

char *vl_slurp(const char *path)
{
	int fd = path ? open(path, O_RDONLY) : -1;
	if (fd < 0)
		return NULL;
	size_t cap = 8192, len = 0;
	char *s = malloc(cap);
	for (;;) {
		if (len + 4096 > cap)
			s = realloc(s, cap *= 2);
		ssize_t n = read(fd, s + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	s[len] = 0;
	return s;
}

int vl_numa(void)
{
	return access("/sys/devices/system/node/node0", F_OK) == 0;
}

int vl_nodes(void)
{
	int n = 0;
	char p[96];
	if (!vl_numa())
		return 1;
	for (;;) {
		snprintf(p, sizeof p, "/sys/devices/system/node/node%d", n);
		if (access(p, F_OK))
			return n;
		n++;
	}
}

const char *vl_node_file(char *p, size_t sz, int node, const char *file)
{
	if (!vl_numa()) {
		if (!strcmp(file, "meminfo"))
			return "/proc/meminfo";
		if (!strcmp(file, "vmstat"))
			return "/proc/vmstat";
		if (!strcmp(file, "cpulist"))
			return "/sys/devices/system/cpu/online";
		return NULL;
	}
	snprintf(p, sz, "/sys/devices/system/node/node%d/%s", node, file);
	return p;
}

long long vl_node_meminfo(const char *s, const char *field)
{
	const char *p = s;
	size_t fl = strlen(field);
	while ((p = strstr(p, field))) {
		if ((p == s || p[-1] == ' ' || p[-1] == '\n') && p[fl] == ':')
			return atoll(p + fl + 1);
		p += fl;
	}
	return -1;
}

void vl_cpu_ticks(long long t[7])
{
	char *s = vl_slurp("/proc/stat");
	memset(t, 0, 7 * sizeof *t);
	if (s)
		sscanf(s, "cpu %lld %lld %lld %lld %lld %lld %lld", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6]);
	free(s);
}

long long vl_meminfo(const char *field)
{
	char *s = vl_slurp("/proc/meminfo");
	long long v = s ? vl_node_meminfo(s, field) : -1;
	free(s);
	return v;
}

long long vl_vmstat_get(const char *name)
{
	char *s = vl_slurp("/proc/vmstat");
	long long v = -1;
	size_t nl = strlen(name);
	for (char *p = s; p && *p;) {
		if (!strncmp(p, name, nl) && p[nl] == ' ') {
			v = atoll(p + nl + 1);
			break;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	free(s);
	return v;
}

void vl_vmstat_many(const char **names, long long *out)
{
	char *s = vl_slurp("/proc/vmstat");
	for (int i = 0; names[i]; i++)
		out[i] = -1;
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char name[128];
		long long v;
		if (sscanf(line, "%127s %lld", name, &v) != 2)
			continue;
		for (int i = 0; names[i]; i++)
			if (!strcmp(names[i], name))
				out[i] = v;
	}
	free(s);
}
