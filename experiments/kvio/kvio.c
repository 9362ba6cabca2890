/*
 * kvio: seed 001 (Mel Gorman, "Reduce system disruption due to kswapd",
 * 3.9-rc2) with vmlab records. The seed ran memcached + memcachetest while
 * `dd` wrote 0 / 749 / 2498 / 4246 MB in the background: an in-memory
 * service should not notice a large copy, but kswapd swapped it out. Here: a
 * small in-memory key-value server of ours, and client processes talking
 * to it over pipes (the guest kernel has no networking), measured in ops/s
 * at each IO level while a dd-like writer fills the page cache with a file
 * of level x guest RAM on the data disk. Per level: ops/s, IO duration and
 * what reclaim did (the seed's table).
 */
#include "vmlab.h"
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

static const char *PROG = "kvio";

struct req {
	uint32_t op; /* 0 get, 1 set */
	uint32_t key;
};

static size_t full_io(int fd, void *buf, size_t n, int rd)
{
	size_t off = 0;
	while (off < n) {
		ssize_t r = rd ? read(fd, (char *)buf + off, n - off) : write(fd, (char *)buf + off, n - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return off;
		off += (size_t)r;
	}
	return off;
}

/* The server: one anonymous store of nkeys values, filled up front (the
 * service's memory is resident before the IO starts), answering requests on
 * every client's pipe until all of them close. */
static void server(int nclients, int *req_fd, int *rep_fd, size_t nkeys, size_t vbytes)
{
	char *store = mmap(NULL, nkeys * vbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (store == MAP_FAILED)
		_exit(3);
	for (size_t k = 0; k < nkeys; k++)
		memset(store + k * vbytes, (int)(k & 0xff) | 1, vbytes);
	char *val = malloc(vbytes);
	struct pollfd *pf = calloc((size_t)nclients, sizeof *pf);
	for (int c = 0; c < nclients; c++)
		pf[c].fd = req_fd[c], pf[c].events = POLLIN;
	int open_fds = nclients;
	char ready = 1;
	/* tell the driver the store is loaded */
	if (write(rep_fd[nclients], &ready, 1) != 1)
		_exit(3);
	while (open_fds > 0) {
		if (poll(pf, (nfds_t)nclients, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(3);
		}
		for (int c = 0; c < nclients; c++) {
			if (pf[c].fd < 0 || !(pf[c].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			struct req r;
			if (full_io(pf[c].fd, &r, sizeof r, 1) != sizeof r) {
				close(pf[c].fd);
				pf[c].fd = -1;
				open_fds--;
				continue;
			}
			char *slot = store + (size_t)(r.key % nkeys) * vbytes;
			if (r.op == 1) {
				if (full_io(pf[c].fd, val, vbytes, 1) != vbytes)
					_exit(3);
				memcpy(slot, val, vbytes);
				full_io(rep_fd[c], &ready, 1, 0);
			} else {
				full_io(rep_fd[c], slot, vbytes, 0);
			}
		}
	}
	_exit(0);
}

/* A client: uniform random keys, 90 % gets, until the driver says stop. */
static void client(int id, int req, int rep, size_t nkeys, size_t vbytes, volatile int *stop,
		   volatile long long *ops, unsigned long long seed)
{
	char *val = malloc(vbytes);
	unsigned long long s = seed * 7919 + (unsigned long long)id + 1;
	memset(val, id + 1, vbytes);
	while (!*stop) {
		unsigned long long x = vl_rand(&s);
		struct req r = {(x % 10) == 0, (uint32_t)((x >> 8) % nkeys)};
		if (full_io(req, &r, sizeof r, 0) != sizeof r)
			break;
		if (r.op == 1) {
			char ack;
			if (full_io(req, val, vbytes, 0) != vbytes || full_io(rep, &ack, 1, 1) != 1)
				break;
		} else if (full_io(rep, val, vbytes, 1) != vbytes) {
			break;
		}
		ops[id]++;
	}
	_exit(0);
}

/* dd if=/dev/zero of=FILE bs=1M count=MIB: writes, no sync, like the seed's. */
static void writer(const char *path, long mib, volatile double *io_ms)
{
	static char block[1 << 20];
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		_exit(3);
	for (long i = 0; i < mib; i++)
		if (full_io(fd, block, sizeof block, 0) != sizeof block)
			_exit(3);
	close(fd);
	*io_ms = vl_now_ms(CLOCK_MONOTONIC) - t0;
	_exit(0);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	long store_mib = 16, clients = 2, duration_ms = 2000, ram_mib = 0, vbytes = 1024, seed = 0, sample_ms = 500;
	const char *levels = "0/0.2/0.6/1.0", *dir = "/data";
	static struct option lo[] = {
		{"store-mib", 1, 0, 'm'}, {"clients", 1, 0, 'c'}, {"duration-ms", 1, 0, 'd'},
		{"ram-mib", 1, 0, 'r'}, {"levels", 1, 0, 'l'}, {"dir", 1, 0, 'D'}, {"value-bytes", 1, 0, 'v'},
		{"seed", 1, 0, 's'}, {"sample-ms", 1, 0, 'i'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'm': store_mib = vl_opt_long(PROG, "store-mib", optarg); break;
		case 'c': clients = vl_opt_long(PROG, "clients", optarg); break;
		case 'd': duration_ms = vl_opt_long(PROG, "duration-ms", optarg); break;
		case 'r': ram_mib = vl_opt_long(PROG, "ram-mib", optarg); break;
		case 'l': levels = optarg; break;
		case 'D': dir = optarg; break;
		case 'v': vbytes = vl_opt_long(PROG, "value-bytes", optarg); break;
		case 's': seed = vl_opt_long(PROG, "seed", optarg); break;
		case 'i': sample_ms = vl_opt_long(PROG, "sample-ms", optarg); break;
		default: return 2;
		}
	}
	if (!store_mib || !clients || !ram_mib || vbytes < 8 || !sample_ms) {
		fprintf(stderr, "%s: store-mib, clients, ram-mib, sample-ms must be positive, value-bytes >= 8\n", PROG);
		return 2;
	}
	double lv[16];
	int nlv = 0;
	for (const char *p = levels; *p && nlv < 16;) {
		char *end;
		lv[nlv] = strtod(p, &end);
		if (end == p || lv[nlv] < 0) {
			fprintf(stderr, "%s: --levels expects fractions of RAM separated by '/', got '%s'\n", PROG, levels);
			return 2;
		}
		nlv++;
		p = (*end == '/' || *end == ',') ? end + 1 : end;
		if (*end && *end != '/' && *end != ',') {
			fprintf(stderr, "%s: --levels expects fractions of RAM separated by '/', got '%s'\n", PROG, levels);
			return 2;
		}
	}
	size_t nkeys = ((size_t)store_mib << 20) / (size_t)vbytes;
	long tck = sysconf(_SC_CLK_TCK);
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	vl_buf b = vl_record("kvio_start");
	vl_kint(&b, "store_mib", store_mib);
	vl_kint(&b, "keys", (long long)nkeys);
	vl_kint(&b, "value_bytes", vbytes);
	vl_kint(&b, "clients", clients);
	vl_kint(&b, "duration_ms", duration_ms);
	vl_kint(&b, "ram_mib", ram_mib);
	vl_kint(&b, "levels", nlv);
	vl_emit(&b);

	/* pipes: request and reply per client, plus the server's "loaded" pipe */
	int nc = (int)clients;
	int (*rq)[2] = calloc((size_t)nc, sizeof *rq), (*rp)[2] = calloc((size_t)nc + 1, sizeof *rp);
	for (int c = 0; c < nc; c++)
		if (pipe(rq[c]) || pipe(rp[c]))
			return 1;
	if (pipe(rp[nc]))
		return 1;
	int *srv_req = calloc((size_t)nc, sizeof(int)), *srv_rep = calloc((size_t)nc + 1, sizeof(int));
	for (int c = 0; c < nc; c++)
		srv_req[c] = rq[c][0], srv_rep[c] = rp[c][1];
	srv_rep[nc] = rp[nc][1];
	pid_t srv = fork();
	if (srv == 0) {
		for (int c = 0; c < nc; c++)
			close(rq[c][1]), close(rp[c][0]);
		close(rp[nc][0]);
		server(nc, srv_req, srv_rep, nkeys, (size_t)vbytes);
	}
	for (int c = 0; c < nc; c++)
		close(rq[c][0]), close(rp[c][1]);
	close(rp[nc][1]);
	char ready;
	if (read(rp[nc][0], &ready, 1) != 1) {
		fprintf(stderr, "%s: the server did not start\n", PROG);
		return 1;
	}

	/* shared with the clients and the writer */
	struct shared {
		int stop;
		double io_ms;
		long long ops[256];
	} *sh = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (nc > 256) {
		fprintf(stderr, "%s: at most 256 clients\n", PROG);
		return 2;
	}
	vl_lockstat_clear(VL_LOCK_STAT);
	pid_t sampler = vl_kswapd_sampler(sample_ms);
	double ops_s0 = 0, worst_ratio = 1;
	long long tot_scan = 0, tot_swpout = 0;
	int levels_ok = 0;
	char path[512];
	snprintf(path, sizeof path, "%s/ddfile", dir);
	for (int l = 0; l < nlv; l++) {
		long io_mib = (long)(lv[l] * ram_mib + 0.5);
		long long v0[VL_NRECLAIM], v1[VL_NRECLAIM];
		sh->stop = 0;
		sh->io_ms = -1;
		memset((void *)sh->ops, 0, sizeof sh->ops);
		vl_vmstat_many(VL_RECLAIM, v0);
		long long ks0 = vl_kswapd_ticks(NULL, 0);
		double t0 = vl_now_ms(CLOCK_MONOTONIC);
		pid_t *cp = calloc((size_t)nc, sizeof *cp);
		for (int c = 0; c < nc; c++) {
			cp[c] = fork();
			if (cp[c] == 0) {
				if (ncpu > 1)
					vl_pin(1 + c % (ncpu - 1)); /* the server and the writer share CPU 0's side */
				client(c, rq[c][1], rp[c][0], nkeys, (size_t)vbytes, &sh->stop, sh->ops, (unsigned long long)seed);
			}
		}
		pid_t wr = -1;
		if (io_mib > 0) {
			wr = fork();
			if (wr == 0)
				writer(path, io_mib, &sh->io_ms);
		}
		/* the level lasts at least duration_ms, and as long as the IO runs */
		int wr_status = 0;
		for (;;) {
			sleep_ms(50);
			if (wr > 0 && waitpid(wr, &wr_status, WNOHANG) == wr)
				wr = 0;
			if (wr <= 0 && vl_now_ms(CLOCK_MONOTONIC) - t0 >= duration_ms)
				break;
		}
		sh->stop = 1;
		for (int c = 0; c < nc; c++)
			waitpid(cp[c], NULL, 0);
		double el = vl_now_ms(CLOCK_MONOTONIC) - t0;
		long long ks1 = vl_kswapd_ticks(NULL, 0);
		vl_vmstat_many(VL_RECLAIM, v1);
		long long ops = 0;
		for (int c = 0; c < nc; c++)
			ops += sh->ops[c];
		double ops_s = el > 0 ? ops / (el / 1e3) : 0;
		int io_ok = io_mib == 0 || (WIFEXITED(wr_status) && WEXITSTATUS(wr_status) == 0 && sh->io_ms >= 0);

		b = vl_record("kvio_level");
		vl_kint(&b, "level", l);
		vl_kdbl(&b, "io_frac", lv[l]);
		vl_kint(&b, "io_mib", io_mib);
		vl_kint(&b, "io_ok", io_ok);
		vl_kdbl(&b, "io_ms", io_mib ? sh->io_ms : 0);
		vl_kint(&b, "ops", ops);
		vl_kdbl(&b, "elapsed_ms", el);
		vl_kdbl(&b, "ops_s", ops_s);
		vl_kdbl(&b, "kswapd_s", (double)(ks1 - ks0) / tck);
		vl_reclaim_delta(&b, "vmstat", v0, v1);
		vl_emit(&b);

		char name[64];
		snprintf(name, sizeof name, "kvio.ops_per_s.io%d", l);
		vl_metric(name, ops_s, "ops/s");
		snprintf(name, sizeof name, "kvio.io_s.io%d", l);
		vl_metric(name, io_mib ? sh->io_ms / 1e3 : 0, "s");
		if (l == 0)
			ops_s0 = ops_s;
		else if (ops_s0 > 0 && ops_s / ops_s0 < worst_ratio)
			worst_ratio = ops_s / ops_s0;
		tot_scan += (v1[0] - v0[0]) + (v1[1] - v0[1]);
		tot_swpout += v1[5] - v0[5];
		levels_ok += ops > 0 && io_ok;
		/* the next level starts from a page cache without this file */
		unlink(path);
		free(cp);
	}
	vl_sampler_stop(sampler);
	for (int c = 0; c < nc; c++)
		close(rq[c][1]);
	waitpid(srv, NULL, 0);
	vl_lockstat("run", VL_LOCK_STAT, 10);
	vl_metric("kvio.worst_ops_ratio", worst_ratio, "ratio");

	vl_sanity sc = vl_sanity_begin(PROG);
	vl_sanity_check(&sc, "levels", levels_ok == nlv, levels_ok, "every IO level ran, served ops and wrote its IO");
	vl_sanity_check(&sc, "ops_no_io", ops_s0 > 0, ops_s0, "> 0 ops/s without IO");
	vl_sanity_check(&sc, "pgscan", tot_scan > 0, (double)tot_scan, "> 0: the IO put memory under reclaim");
	vl_sanity_end(&sc);
	(void)tot_swpout;
	return levels_ok == nlv ? 0 : 1;
}
