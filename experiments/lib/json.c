/* vmlab guest library: a growing JSON line, and records written whole. */
#include "vmlab.h"

void vl_raw(vl_buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->s && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		b->cap = (b->cap + (size_t)n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			abort();
	}
}

void vl_sep(vl_buf *b)
{
	if (b->need_comma)
		vl_raw(b, ",");
	b->need_comma = 1;
}

void vl_str(vl_buf *b, const char *v)
{
	vl_raw(b, "\"");
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		if (c == '"' || c == '\\')
			vl_raw(b, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			vl_raw(b, "\\u%04x", c);
		else
			vl_raw(b, "%c", c);
	}
	vl_raw(b, "\"");
}

void vl_key(vl_buf *b, const char *k)
{
	vl_sep(b);
	vl_str(b, k);
	vl_raw(b, ":");
}

void vl_kint(vl_buf *b, const char *k, long long v) { vl_key(b, k); vl_raw(b, "%lld", v); }
void vl_kdbl(vl_buf *b, const char *k, double v) { vl_key(b, k); vl_raw(b, "%.3f", v); }
void vl_kstr(vl_buf *b, const char *k, const char *v) { vl_key(b, k); vl_str(b, v); }

void vl_open(vl_buf *b, const char *k, char br)
{
	if (k)
		vl_key(b, k);
	else
		vl_sep(b);
	vl_raw(b, "%c", br);
	b->need_comma = 0;
}

void vl_close(vl_buf *b, char br) { vl_raw(b, "%c", br); b->need_comma = 1; }

vl_buf vl_record(const char *type)
{
	vl_buf b = {0};
	vl_raw(&b, "%s{", VMLAB_TAG);
	vl_kstr(&b, "type", type);
	return b;
}

void vl_emit(vl_buf *b)
{
	vl_raw(b, "}\n");
	size_t off = 0;
	while (off < b->len) {
		ssize_t n = write(1, b->s + off, b->len - off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		off += (size_t)n;
	}
	free(b->s);
	b->s = NULL;
}
