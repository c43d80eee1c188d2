/* vdsmd/net/persist.c - the persisted conf: its JSON format (VDSM's
 * attribute names, read back through the setupNetworks parser) and its files,
 * written as storage metadata is (tmp, fsync, rename, fsync dir). */
#include "net_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"

static void kstr_if(struct vd_writer *w, const char *k, const char *v)
{
	if (v[0])
		vw_kstr(w, k, v);
}

void net_conf_write(const struct net_conf *c, const char *bootid, struct vd_writer *w)
{
	vw_begin_object(w);
	vw_kint(w, "version", 1);
	if (bootid)
		vw_kstr(w, "bootid", bootid);
	vw_keyz(w, "networks");
	vw_begin_object(w);
	for (unsigned i = 0; i < c->nnets; i++) {
		const struct net_net *n = &c->nets[i];
		vw_keyz(w, n->name);
		vw_begin_object(w);
		kstr_if(w, "nic", n->nic);
		kstr_if(w, "bonding", n->bonding);
		if (n->vlan >= 0)
			vw_kint(w, "vlan", n->vlan);
		vw_kbool(w, "bridged", n->bridged);
		vw_kbool(w, "stp", n->stp);
		vw_kint(w, "mtu", n->mtu);
		vw_kstr(w, "bootproto", n->bootproto);
		kstr_if(w, "ipaddr", n->ipaddr);
		if (n->ipaddr[0])
			vw_kint(w, "prefix", n->prefix);
		kstr_if(w, "gateway", n->gateway);
		vw_kbool(w, "defaultRoute", n->defroute);
		kstr_if(w, "ipv6addr", n->ipv6addr);
		kstr_if(w, "ipv6gateway", n->ipv6gateway);
		vw_kbool(w, "ipv6autoconf", n->ipv6autoconf);
		vw_kstr(w, "switch", "legacy");
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "bondings");
	vw_begin_object(w);
	for (unsigned i = 0; i < c->nbonds; i++) {
		const struct net_bond *b = &c->bonds[i];
		vw_keyz(w, b->name);
		vw_begin_object(w);
		vw_keyz(w, "nics");
		vw_begin_array(w);
		for (unsigned j = 0; j < b->nnics; j++)
			vw_strz(w, b->nics[j]);
		vw_end_array(w);
		vw_kstr(w, "options", b->options);
		vw_kstr(w, "switch", "legacy");
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "baseline");
	vw_begin_object(w);
	for (unsigned i = 0; i < c->nbase; i++) {
		const struct net_base *b = &c->base[i];
		vw_keyz(w, b->nic);
		vw_begin_object(w);
		vw_kint(w, "mtu", b->mtu);
		vw_kbool(w, "up", b->up);
		vw_keyz(w, "addrs");
		vw_begin_array(w);
		for (unsigned j = 0; j < b->naddrs; j++)
			vw_strz(w, b->addrs[j]);
		vw_end_array(w);
		kstr_if(w, "gateway", b->gw4);
		kstr_if(w, "accept_ra", b->accept_ra);
		kstr_if(w, "autoconf", b->autoconf);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_end_object(w);
}

int net_conf_read(const struct vd_value *v, struct net_conf *out, char *bootid,
		  size_t bootidlen, struct net_err *e)
{
	struct net_conf empty;
	memset(&empty, 0, sizeof(empty));
	memset(out, 0, sizeof(*out));
	if (!v || v->type != VD_OBJECT)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "persisted conf is not an object");
	const struct vd_value *ver = vd_obj_get(v, "version");
	if (!ver || ver->type != VD_INT || ver->v.i != 1)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "persisted conf: unknown version");
	if (bootid && bootidlen) {
		bootid[0] = '\0';
		if (net_attr_str(v, "bootid", bootid, bootidlen, e))
			return VD_EINVAL;
	}
	int rc = net_conf_request(&empty, vd_obj_get(v, "networks"), vd_obj_get(v, "bondings"),
				  NULL, NULL, out, e);
	if (rc)
		return rc;
	const struct vd_value *base = vd_obj_get(v, "baseline");
	if (base && base->type != VD_OBJECT)
		return net_fail(e, RPC_E_NET_BAD_PARAMS, "persisted conf: baseline is not an object");
	for (size_t i = 0; base && i < base->v.obj.n; i++) {
		const struct vd_member *m = &base->v.obj.members[i];
		if (out->nbase == NET_MAX_NETS || !net_ifname_ok(m->key, m->klen))
			return net_fail(e, RPC_E_NET_BAD_PARAMS, "persisted conf: bad baseline entry");
		struct net_base *b = &out->base[out->nbase];
		memset(b, 0, sizeof(*b));
		memcpy(b->nic, m->key, m->klen);
		long x;
		if (net_attr_int(&m->val, "mtu", 1500, 68, 65535, RPC_E_NET_BAD_PARAMS, &x, e) ||
		    net_attr_bool(&m->val, "up", true, &b->up, e) ||
		    net_attr_str(&m->val, "gateway", b->gw4, sizeof(b->gw4), e) ||
		    net_attr_str(&m->val, "accept_ra", b->accept_ra, sizeof(b->accept_ra), e) ||
		    net_attr_str(&m->val, "autoconf", b->autoconf, sizeof(b->autoconf), e))
			return VD_EINVAL;
		b->mtu = (unsigned)x;
		const struct vd_value *ad = vd_obj_get(&m->val, "addrs");
		for (size_t j = 0; ad && ad->type == VD_ARRAY && j < ad->v.arr.n; j++) {
			const struct vd_value *s = &ad->v.arr.items[j];
			if (s->type != VD_STRING || s->v.s.len >= NET_IP_STR || b->naddrs == NET_MAX_ADDRS)
				return net_fail(e, RPC_E_NET_BAD_PARAMS, "persisted conf: bad baseline address");
			memcpy(b->addrs[b->naddrs++], s->v.s.ptr, s->v.s.len);
		}
		if (net_conf_uses_nic(out, b->nic))
			out->nbase++;
	}
	return 0;
}

/* ---- files ------------------------------------------------------------------ */

static int mkdir_p(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return VD_EIO;
			*s = '/';
		}
	return mkdir(p, 0755) < 0 && errno != EEXIST ? VD_EIO : 0;
}

/* tmp, fsync, rename, fsync dir: a reader sees the old file or the new one. */
int net_file_write(const char *dir, const char *name, const struct vd_buf *b)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	if (mkdir_p(dir))
		return VD_EIO;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return VD_EIO;
	size_t off = 0;
	while (off < b->len) {
		ssize_t w = write(fd, b->data + off, b->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			return VD_EIO;
		}
		off += (size_t)w;
	}
	if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return VD_EIO;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* Serialized conf (JSON through the yajl/fallback codec). */
void net_conf_encode(const struct net_conf *c, const char *bootid, struct vd_buf *out)
{
	const struct vd_codec *k = codec_find("yajl");
	if (!k)
		k = codec_find("fallback");
	struct vd_writer w;
	k->writer_init(&w, out);
	net_conf_write(c, bootid, &w);
}

/* 0 and *c filled; VD_ENOENT when the file does not exist; VD_EPROTO when it
 * is unreadable (logged). */
int net_file_read(const char *dir, const char *name, struct net_conf *c, char *bootid,
		  size_t bootidlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? VD_ENOENT : VD_EIO;
	struct vd_buf b = VD_BUF_INIT;
	int rc = 0;
	for (;;) {
		buf_reserve(&b, 65536);
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = VD_EIO;
			break;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > (4u << 20)) {
			rc = VD_ETOOBIG;
			break;
		}
	}
	close(fd);
	if (rc == 0) {
		struct vd_arena a;
		arena_init(&a, 16384);
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		struct vd_value *v = NULL;
		struct vd_codec_error ce;
		struct net_err e = { 0 };
		const struct vd_codec *k = codec_find("yajl");
		if (!k)
			k = codec_find("fallback");
		if (k->decode(&a, b.data, b.len, &lim, &v, &ce) < 0) {
			log_error("net: %s: not JSON at byte %zu: %s", path, ce.offset, ce.reason);
			rc = VD_EPROTO;
		} else if (net_conf_read(v, c, bootid, bootidlen, &e) < 0) {
			log_error("net: %s: %s", path, e.msg);
			rc = VD_EPROTO;
		}
		arena_free(&a);
	}
	buf_free(&b);
	return rc;
}

int net_persist(struct net_state *ns, const char *name, const struct net_conf *c)
{
	struct vd_buf b = VD_BUF_INIT;
	net_conf_encode(c, ns->bootid, &b);
	int rc = net_file_write(ns->dir, name, &b);
	buf_free(&b);
	if (rc)
		log_error("net: cannot write %s/%s: %s", ns->dir, name, strerror(errno));
	return rc;
}

bool net_conf_same(const struct net_conf *a, const struct net_conf *b)
{
	struct vd_buf x = VD_BUF_INIT, y = VD_BUF_INIT;
	net_conf_encode(a, NULL, &x);
	net_conf_encode(b, NULL, &y);
	bool same = x.len == y.len && memcmp(x.data, y.data, x.len) == 0;
	buf_free(&x);
	buf_free(&y);
	return same;
}

