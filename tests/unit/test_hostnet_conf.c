/* tests/unit/test_hostnet_conf.c - the pure parts of vdsmd/net/: a
 * setupNetworks request into a conf (VDSM's attributes, defaults, errors),
 * the transition plan and its reverse (the rollback plan), and the
 * persistence format (round trip, atomic file). */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "../../vdsmd/net/net_priv.h"

static struct vd_arena arena;

static void setup(void)
{
	arena_init(&arena, 4096);
}

static void teardown(void)
{
	arena_free(&arena);
}

static const struct vd_value *J(const char *text)
{
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error ce;
	ck_assert_int_eq(codec_find("fallback")->decode(&arena, text, strlen(text), &lim, &v, &ce), 0);
	return v;
}

/* nics that "exist": eth0..eth3 */
static bool fake_nics(void *ctx, const char *nic)
{
	(void)ctx;
	return strncmp(nic, "eth", 3) == 0 && nic[3] >= '0' && nic[3] <= '3' && !nic[4];
}

/* Apply a request to `old`; returns the net_err code (0 ok). */
static int req(const struct net_conf *old, const char *nets, const char *bonds,
	       struct net_conf *out, struct net_err *e)
{
	memset(e, 0, sizeof(*e));
	int rc = net_conf_request(old, J(nets), J(bonds), fake_nics, NULL, out, e);
	ck_assert_int_eq(rc != 0, e->code != RPC_OK);
	return (int)e->code;
}

START_TEST(defaults_and_coercions)
{
	static struct net_conf empty, c;
	struct net_err e;
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"nic\":\"eth1\",\"ipaddr\":\"192.0.2.65\","
			     "\"netmask\":\"255.255.255.224\"},"
			     "\"red\":{\"nic\":\"eth2\",\"vlan\":\"10\",\"bridged\":\"false\","
			     "\"mtu\":\"9000\",\"ipv6addr\":\"2001:db8::1\"}}", "{}", &c, &e), 0);
	ck_assert_uint_eq(c.nnets, 2);
	const struct net_net *b = net_conf_net(&c, "blue"), *r = net_conf_net(&c, "red");
	ck_assert_ptr_nonnull(b);
	ck_assert(b->bridged);          /* VDSM: bridged unless told otherwise */
	ck_assert_uint_eq(b->mtu, 1500);
	ck_assert_str_eq(b->bootproto, "none");
	ck_assert_uint_eq(b->prefix, 27);
	ck_assert_int_eq(b->vlan, -1);
	ck_assert(!r->bridged);
	ck_assert_int_eq(r->vlan, 10);
	ck_assert_uint_eq(r->mtu, 9000);
	ck_assert_str_eq(r->ipv6addr, "2001:db8::1/64");
	char top[NET_IFNAME];
	net_net_top(r, top);
	ck_assert_str_eq(top, "eth2.10");
	net_net_top(b, top);
	ck_assert_str_eq(top, "blue");
}
END_TEST

START_TEST(bond_options_normalized)
{
	static struct net_conf empty, c;
	struct net_err e;
	ck_assert_int_eq(req(&empty, "{}", "{\"bond0\":{\"nics\":[\"eth2\",\"eth1\"],"
			     "\"options\":\"miimon=100 mode=4\"}}", &c, &e), 0);
	const struct net_bond *b = net_conf_bond(&c, "bond0");
	ck_assert_ptr_nonnull(b);
	ck_assert_str_eq(b->options, "mode=802.3ad miimon=100");
	ck_assert_str_eq(b->nics[0], "eth1");   /* sorted: order does not matter */
	ck_assert_str_eq(b->nics[1], "eth2");
	ck_assert_int_eq(req(&empty, "{}", "{\"bond0\":{\"nics\":[\"eth1\"],"
			     "\"options\":\"mode=9\"}}", &c, &e), RPC_E_NET_BAD_BONDING);
	ck_assert_int_eq(req(&empty, "{}", "{\"bond0\":{\"nics\":[\"eth1\"],"
			     "\"options\":\"miimon=../x\"}}", &c, &e), RPC_E_NET_BAD_BONDING);
	ck_assert_int_eq(req(&empty, "{}", "{\"bnd0\":{\"nics\":[\"eth1\"]}}", &c, &e),
			 RPC_E_NET_BAD_BONDING);
}
END_TEST

START_TEST(errors_by_cause)
{
	static struct net_conf empty, c, one;
	struct net_err e;
	struct { const char *nets, *bonds; int code; } t[] = {
		{ "{\"blue\":{\"nic\":\"eth1\",\"ipaddr\":\"192.0.2.300\",\"prefix\":24}}", "{}", RPC_E_NET_BAD_ADDR },
		{ "{\"blue\":{\"nic\":\"eth1\",\"ipaddr\":\"192.0.2.3\",\"netmask\":\"255.0.255.0\"}}", "{}", RPC_E_NET_BAD_ADDR },
		{ "{\"blue\":{\"nic\":\"eth1\",\"ipaddr\":\"192.0.2.3\"}}", "{}", RPC_E_NET_BAD_ADDR },
		{ "{\"blue\":{\"nic\":\"eth1\",\"vlan\":5000}}", "{}", RPC_E_NET_BAD_VLAN },
		{ "{\"blue\":{\"nic\":\"eth1\",\"bonding\":\"bond0\"}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"hostQos\":{}}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"switch\":\"ovs\"}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"dhcpv6\":true}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"bootproto\":\"bootp\"}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"mtu\":20}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth9\"}}", "{}", RPC_E_NET_BAD_NIC },
		{ "{\"blue\":{\"nic\":\"a/b\"}}", "{}", RPC_E_NET_BAD_NIC },
		{ "{\"a very long network name\":{\"nic\":\"eth1\"}}", "{}", RPC_E_NET_BAD_BRIDGE },
		{ "{\"blue\":{\"bonding\":\"bond7\"}}", "{}", RPC_E_NET_BAD_BONDING },
		{ "{\"blue\":{\"nic\":\"eth1\"}}", "{\"bond0\":{\"nics\":[\"eth1\"]}}", RPC_E_NET_USED_NIC },
		{ "{}", "{\"bond0\":{\"nics\":[\"eth1\"]},\"bond1\":{\"nics\":[\"eth1\"]}}", RPC_E_NET_USED_NIC },
		{ "{\"blue\":{\"nic\":\"eth1\"},\"red\":{\"nic\":\"eth1\"}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"vlan\":3},\"red\":{\"nic\":\"eth1\",\"vlan\":3}}", "{}", RPC_E_NET_BAD_VLAN },
		{ "{\"blue\":{\"remove\":true}}", "{}", RPC_E_NET_BAD_BRIDGE },
		{ "{}", "{\"bond0\":{\"remove\":true}}", RPC_E_NET_BAD_BONDING },
		{ "[]", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"frobnicate\":1}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"nameservers\":[\"192.0.2.53\"]}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{\"blue\":{\"nic\":\"eth1\",\"custom\":{\"a\":\"b\"}}}", "{}", RPC_E_NET_BAD_PARAMS },
		{ "{}", "{\"bond0\":{\"nics\":[\"eth1\"],\"hwaddr\":\"02:00:00:00:00:01\"}}", RPC_E_NET_BAD_PARAMS },
		{ "{}", "{\"bond0\":{\"nics\":[\"eth1\"],\"switch\":\"ovs\"}}", RPC_E_NET_BAD_PARAMS },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(t); i++) {
		int got = req(&empty, t[i].nets, t[i].bonds, &c, &e);
		ck_assert_msg(got == t[i].code, "case %zu: got %d (%s), want %d", i, got, e.msg,
			      t[i].code);
		ck_assert(e.msg[0]);
	}
	/* empty nameservers / custom, as the engine may send them, are fine */
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"nic\":\"eth1\",\"nameservers\":[],"
			     "\"custom\":{},\"blockingdhcp\":\"true\",\"switch\":\"legacy\"}}", "{}", &c,
			     &e), 0);
	/* two networks on one nic: one untagged + tagged ones are fine */
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"nic\":\"eth1\"},\"red\":{\"nic\":\"eth1\","
			     "\"vlan\":3}}", "{}", &c, &e), 0);
	/* removing a bond a remaining network sits on */
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"bonding\":\"bond0\"}}",
			     "{\"bond0\":{\"nics\":[\"eth1\",\"eth2\"]}}", &one, &e), 0);
	ck_assert_int_eq(req(&one, "{}", "{\"bond0\":{\"remove\":true}}", &c, &e), RPC_E_NET_USED_BOND);
	/* both removed together is fine */
	ck_assert_int_eq(req(&one, "{\"blue\":{\"remove\":\"true\"}}", "{\"bond0\":{\"remove\":true}}",
			     &c, &e), 0);
	ck_assert_uint_eq(c.nnets + c.nbonds, 0);
}
END_TEST

/* One network's attributes on eth1 (an object text without braces);
 * returns the code and the parsed network in *out. */
static int net1(const char *attrs, struct net_net *out)
{
	static struct net_conf empty, c;
	struct net_err e;
	char nets[512];
	snprintf(nets, sizeof(nets), "{\"blue\":{\"nic\":\"eth1\"%s%s}}", attrs[0] ? "," : "",
		 attrs);
	int code = req(&empty, nets, "{}", &c, &e);
	if (code == 0)
		*out = *net_conf_net(&c, "blue");
	return code;
}

/* The forms ovirt-engine's HostSetupNetworksVDSCommand builds (bridged as
 * Boolean.toString, STP "yes"/"no", vlan as a string, ipv6gateway "::",
 * dhcpv6/ipv6autoconf as booleans, remove as "true") and the ones VDSM's
 * canonicalize.py / stp_booleanize / tobool take. */
START_TEST(engine_forms)
{
	static struct net_conf empty, c;
	struct net_err e;
	struct net_net n;
	ck_assert_int_eq(req(&empty, "{\"ovirtmgmt\":{\"nic\":\"eth0\",\"mtu\":1500,"
			     "\"bridged\":\"true\",\"STP\":\"no\",\"bootproto\":\"dhcp\","
			     "\"dhcpv6\":false,\"ipv6autoconf\":false,\"defaultRoute\":true,"
			     "\"switch\":\"legacy\"},\"red\":{\"bonding\":\"bond0\",\"vlan\":\"10\","
			     "\"mtu\":\"9000\",\"bridged\":\"false\",\"ipaddr\":\"192.0.2.10\","
			     "\"prefix\":\"24\",\"gateway\":\"192.0.2.1\",\"ipv6addr\":\"2001:db8::2/64\","
			     "\"ipv6gateway\":\"::\",\"dhcpv6\":false,\"ipv6autoconf\":false}}",
			     "{\"bond0\":{\"nics\":[\"eth3\",\"eth2\"],\"switch\":\"legacy\","
			     "\"options\":\"mode=4 miimon=100\"}}", &c, &e), 0);
	const struct net_net *m = net_conf_net(&c, "ovirtmgmt"), *r = net_conf_net(&c, "red");
	ck_assert(m->bridged && !m->stp && m->defroute);
	ck_assert_uint_eq(m->mtu, 1500);
	ck_assert(!r->bridged);
	ck_assert_int_eq(r->vlan, 10);
	ck_assert_uint_eq(r->mtu, 9000);
	ck_assert_uint_eq(r->prefix, 24);
	ck_assert_str_eq(r->ipv6gateway, "");   /* "::" is "no gateway" */
	ck_assert_str_eq(net_conf_bond(&c, "bond0")->options, "mode=802.3ad miimon=100");
	/* the engine's removal form */
	static struct net_conf after;
	ck_assert_int_eq(req(&c, "{\"red\":{\"remove\":\"true\"}}",
			     "{\"bond0\":{\"remove\":\"true\"}}", &after, &e), 0);
	ck_assert_uint_eq(after.nnets, 1);
	ck_assert_uint_eq(after.nbonds, 0);

	/* STP: stp_booleanize's words in any case, JSON booleans, null */
	static const char *const stp_on[] = { "\"yes\"", "\"YES\"", "\"On\"", "\"true\"",
					      "\"TRUE\"", "true" };
	static const char *const stp_off[] = { "\"no\"", "\"Off\"", "\"false\"", "\"FALSE\"",
					       "false", "null" };
	char a[128];
	for (size_t i = 0; i < VD_ARRAY_SIZE(stp_on); i++) {
		snprintf(a, sizeof(a), "\"STP\":%s", stp_on[i]);
		ck_assert_msg(net1(a, &n) == 0 && n.stp, "STP %s", stp_on[i]);
		snprintf(a, sizeof(a), "\"stp\":%s", stp_on[i]);
		ck_assert_msg(net1(a, &n) == 0 && n.stp, "stp %s", stp_on[i]);
	}
	for (size_t i = 0; i < VD_ARRAY_SIZE(stp_off); i++) {
		snprintf(a, sizeof(a), "\"STP\":%s", stp_off[i]);
		ck_assert_msg(net1(a, &n) == 0 && !n.stp, "STP %s", stp_off[i]);
	}
	static const char *const stp_bad[] = { "\"maybe\"", "\"\"", "1", "0", "1.5", "[]" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(stp_bad); i++) {
		snprintf(a, sizeof(a), "\"STP\":%s", stp_bad[i]);
		ck_assert_msg(net1(a, &n) == RPC_E_NET_BAD_PARAMS, "STP %s", stp_bad[i]);
	}
	/* "stp" wins over "STP"; neither is read for a bridgeless network */
	ck_assert(net1("\"stp\":\"yes\",\"STP\":\"no\"", &n) == 0 && n.stp);
	ck_assert(net1("\"bridged\":\"false\",\"STP\":\"maybe\"", &n) == 0 && !n.stp);

	/* bridged: tobool's forms */
	static const char *const on[] = { "true", "\"true\"", "\"True\"", "\"1\"", "1", "\" 2 \"" };
	static const char *const off[] = { "false", "\"false\"", "\"FALSE\"", "\"0\"", "0",
					   "\"-0\"" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(on); i++) {
		snprintf(a, sizeof(a), "\"bridged\":%s", on[i]);
		ck_assert_msg(net1(a, &n) == 0 && n.bridged, "bridged %s", on[i]);
	}
	for (size_t i = 0; i < VD_ARRAY_SIZE(off); i++) {
		snprintf(a, sizeof(a), "\"bridged\":%s", off[i]);
		ck_assert_msg(net1(a, &n) == 0 && !n.bridged, "bridged %s", off[i]);
	}
	/* VDSM reads these as false without a word; vdsmd refuses them (fix) */
	ck_assert_int_eq(net1("\"bridged\":\"yes\"", &n), RPC_E_NET_BAD_PARAMS);
	ck_assert_int_eq(net1("\"bridged\":\"\"", &n), RPC_E_NET_BAD_PARAMS);
	ck_assert_int_eq(net1("\"defaultRoute\":{}", &n), RPC_E_NET_BAD_PARAMS);

	/* mtu and vlan as int or string; vlan "" is none */
	ck_assert(net1("\"mtu\":\"1500\"", &n) == 0 && n.mtu == 1500);
	ck_assert(net1("\"mtu\":9000", &n) == 0 && n.mtu == 9000);
	ck_assert_int_eq(net1("\"mtu\":\"jumbo\"", &n), RPC_E_NET_BAD_PARAMS);
	ck_assert(net1("\"vlan\":\"\"", &n) == 0 && n.vlan == -1);
	ck_assert(net1("\"vlan\":\"4094\"", &n) == 0 && n.vlan == 4094);
	ck_assert_int_eq(net1("\"vlan\":\"ten\"", &n), RPC_E_NET_BAD_VLAN);
	/* prefix as a string; prefix with netmask is refused as VDSM does */
	ck_assert(net1("\"ipaddr\":\"192.0.2.5\",\"prefix\":\"26\"", &n) == 0 && n.prefix == 26);
	ck_assert_int_eq(net1("\"ipaddr\":\"192.0.2.5\",\"prefix\":\"26\","
			      "\"netmask\":\"255.255.255.192\"", &n), RPC_E_NET_BAD_PARAMS);
	/* dhcpv6 / ipv6autoconf off in every form; on is a gap (refused) */
	ck_assert_int_eq(net1("\"dhcpv6\":\"false\",\"ipv6autoconf\":\"0\"", &n), 0);
	ck_assert(net1("\"ipv6autoconf\":true", &n) == 0 && n.ipv6autoconf);
	ck_assert(net1("\"ipv6autoconf\":\"False\"", &n) == 0 && !n.ipv6autoconf);
	ck_assert_int_eq(net1("\"dhcpv6\":\"1\"", &n), RPC_E_NET_BAD_PARAMS);
	/* VDSM's validators' codes (link/validator.py, ip/validator.py) */
	ck_assert_int_eq(net1("\"bootproto\":\"dhcp\",\"ipaddr\":\"192.0.2.5\","
			      "\"prefix\":24", &n), RPC_E_NET_BAD_ADDR);
	ck_assert_int_eq(net1("\"bootproto\":\"dhcp\",\"gateway\":\"192.0.2.1\"", &n),
			 RPC_E_NET_BAD_ADDR);
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"vlan\":\"5\"}}", "{}", &c, &e), RPC_E_NET_BAD_VLAN);
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"bonding\":\"bond-x\"}}", "{}", &c, &e),
			 RPC_E_NET_BAD_BONDING);
	ck_assert_int_eq(req(&empty, "{}", "{\"bond-x\":{\"nics\":[\"eth1\"]}}", &c, &e),
			 RPC_E_NET_BAD_BONDING);
	ck_assert_int_eq(req(&empty, "{}", "{\"bond0\":{\"nics\":[]}}", &c, &e), RPC_E_NET_BAD_PARAMS);
	ck_assert_int_eq(req(&empty, "{}", "{\"bond0\":{\"options\":\"mode=1\"}}", &c, &e),
			 RPC_E_NET_BAD_PARAMS);
}
END_TEST

START_TEST(resolv_conf_nameservers)
{
	char ns[3][NET_IP_STR];
	static const char text[] = "# generated\nsearch example.org\nnameserver 192.0.2.53\n"
		"  nameserver\t2001:db8::35 # comment\nnameserver fe80::1%eth0\n"
		"nameserver not-an-address\nnameservers 192.0.2.9\noptions ndots:2\n"
		"nameserver 192.0.2.54\r\nnameserver 192.0.2.55";
	size_t n = net_parse_resolv(text, sizeof(text) - 1, ns, 3);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(ns[0], "192.0.2.53");
	ck_assert_str_eq(ns[1], "2001:db8::35");
	ck_assert_str_eq(ns[2], "fe80::1%eth0");
	char more[8][NET_IP_STR];
	n = net_parse_resolv(text, sizeof(text) - 1, more, 8);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(more[3], "192.0.2.54");
	ck_assert_str_eq(more[4], "192.0.2.55");   /* no newline at the end */
	ck_assert_uint_eq(net_parse_resolv("", 0, more, 8), 0);
	ck_assert_uint_eq(net_parse_resolv("nameserver", 10, more, 8), 0);
}
END_TEST

START_TEST(value_coercions)
{
	bool b;
	struct { const char *json; int rc; bool val; } t[] = {
		{ "true", 0, true }, { "false", 0, false }, { "null", 0, false },
		{ "\"TrUe\"", 0, true }, { "\"fAlSe\"", 0, false }, { "7", 0, true },
		{ "0", 0, false }, { "\"+3\"", 0, true }, { "\" 0 \"", 0, false },
		{ "\"yes\"", VD_EINVAL, false }, { "\"\"", VD_EINVAL, false },
		{ "\"1x\"", VD_EINVAL, false }, { "\"-\"", VD_EINVAL, false },
		{ "2.5", VD_EINVAL, false }, { "{}", VD_EINVAL, false },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(t); i++) {
		b = !t[i].val;
		ck_assert_msg(net_value_bool(J(t[i].json), &b) == t[i].rc && b == t[i].val,
			      "tobool %s", t[i].json);
	}
	ck_assert(net_value_bool(NULL, &b) == 0 && !b);
	ck_assert(net_value_stp(J("\"oN\""), &b) == 0 && b);
	ck_assert(net_value_stp(J("\"nO\""), &b) == 0 && !b);
	ck_assert_int_eq(net_value_stp(J("\"1\""), &b), VD_EINVAL);
	ck_assert_int_eq(net_value_stp(J("1"), &b), VD_EINVAL);
}
END_TEST

static void plan_str(const struct net_plan *p, char *out, size_t outlen)
{
	size_t n = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < p->n && n < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%s%s:%s", i ? " " : "",
				      net_step_name(p->steps[i].kind), p->steps[i].name);
}

START_TEST(plan_and_rollback_plan)
{
	static struct net_conf empty, a, b, c2;
	struct net_err e;
	struct net_plan p;
	char s[512];
	ck_assert_int_eq(req(&empty, "{\"blue\":{\"nic\":\"eth1\"},\"red\":{\"bonding\":\"bond0\","
			     "\"vlan\":10,\"bridged\":false}}", "{\"bond0\":{\"nics\":[\"eth2\","
			     "\"eth3\"]}}", &a, &e), 0);
	net_plan_build(&empty, &a, &p);
	plan_str(&p, s, sizeof(s));
	ck_assert_str_eq(s, "take-nic:eth2 take-nic:eth3 take-nic:eth1 add-bond:bond0 "
			 "add-net:blue add-net:red");
	/* the rollback plan: teardown in reverse dependency order */
	net_plan_build(&a, &empty, &p);
	plan_str(&p, s, sizeof(s));
	ck_assert_str_eq(s, "del-net:blue del-net:red del-bond:bond0 release-nic:eth2 "
			 "release-nic:eth3 release-nic:eth1");
	/* no change, no step */
	net_plan_build(&a, &a, &p);
	ck_assert_uint_eq(p.n, 0);
	/* MTU of one network: only that network is rebuilt */
	ck_assert_int_eq(req(&a, "{\"blue\":{\"nic\":\"eth1\",\"mtu\":9000}}", "{}", &b, &e), 0);
	net_plan_build(&a, &b, &p);
	plan_str(&p, s, sizeof(s));
	ck_assert_str_eq(s, "del-net:blue add-net:blue");
	/* a bond's options change: the network on it is rebuilt too */
	ck_assert_int_eq(req(&a, "{}", "{\"bond0\":{\"nics\":[\"eth2\",\"eth3\"],"
			     "\"options\":\"mode=1\"}}", &c2, &e), 0);
	net_plan_build(&a, &c2, &p);
	plan_str(&p, s, sizeof(s));
	ck_assert_str_eq(s, "del-net:red del-bond:bond0 add-bond:bond0 add-net:red");
	/* a nic moving from a bond to a network keeps its baseline: no release */
	ck_assert_int_eq(req(&a, "{\"red\":{\"remove\":true},\"green\":{\"nic\":\"eth3\"}}",
			     "{\"bond0\":{\"remove\":true}}", &b, &e), 0);
	net_plan_build(&a, &b, &p);
	plan_str(&p, s, sizeof(s));
	ck_assert_str_eq(s, "del-net:red del-bond:bond0 release-nic:eth2 add-net:green");
}
END_TEST

static void fill(struct net_conf *c)
{
	struct net_err e;
	static struct net_conf empty;
	ck_assert_int_eq(req(&empty, "{\"ovirtmgmt\":{\"nic\":\"eth0\",\"bootproto\":\"dhcp\","
			     "\"defaultRoute\":true,\"STP\":\"yes\",\"ipv6autoconf\":\"true\"},\"red\":{\"bonding\":\"bond0\",\"vlan\":10,"
			     "\"bridged\":false,\"ipaddr\":\"192.0.2.97\",\"prefix\":27,"
			     "\"gateway\":\"192.0.2.98\",\"ipv6addr\":\"2001:db8::5/80\","
			     "\"ipv6gateway\":\"2001:db8::6\",\"mtu\":9000,\"stp\":true}}",
			     "{\"bond0\":{\"nics\":[\"eth1\",\"eth2\"],\"options\":\"mode=1 miimon=100\"}}",
			     c, &e), 0);
	struct net_base *b = &c->base[c->nbase++];
	memset(b, 0, sizeof(*b));
	strcpy(b->nic, "eth0");
	b->mtu = 1500;
	b->up = true;
	strcpy(b->addrs[0], "192.0.2.1/26");
	strcpy(b->addrs[1], "2001:db8::1/64");
	b->naddrs = 2;
	strcpy(b->gw4, "192.0.2.62");
	strcpy(b->accept_ra, "1");
	strcpy(b->autoconf, "1");
}

START_TEST(persistence_round_trip)
{
	static struct net_conf c, back;
	fill(&c);
	struct vd_buf out = VD_BUF_INIT;
	net_conf_encode(&c, "boot-1", &out);
	const struct vd_value *v = J(arena_strndup(&arena, out.data, out.len));
	char boot[64];
	struct net_err e = { 0 };
	ck_assert_int_eq(net_conf_read(v, &back, boot, sizeof(boot), &e), 0);
	ck_assert_str_eq(boot, "boot-1");
	ck_assert(net_conf_same(&c, &back));
	const struct net_base *b = net_conf_base(&back, "eth0");
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->naddrs, 2);
	ck_assert_str_eq(b->gw4, "192.0.2.62");
	ck_assert_str_eq(b->accept_ra, "1");
	ck_assert_str_eq(b->autoconf, "1");
	const struct net_net *r = net_conf_net(&back, "red");
	/* VDSM reads STP only for a bridged network: red's "stp" is dropped */
	ck_assert(!r->stp);
	ck_assert(net_conf_net(&back, "ovirtmgmt")->stp);
	ck_assert(net_conf_net(&back, "ovirtmgmt")->ipv6autoconf);
	ck_assert(!r->ipv6autoconf);
	ck_assert_str_eq(r->ipv6addr, "2001:db8::5/80");
	ck_assert_str_eq(net_conf_bond(&back, "bond0")->options, "mode=active-backup miimon=100");
	/* a change is seen */
	back.nets[0].mtu = 1400;
	ck_assert(!net_conf_same(&c, &back));
	buf_free(&out);
	/* unknown version and garbage are refused */
	ck_assert_int_ne(net_conf_read(J("{\"version\":2,\"networks\":{}}"), &back, NULL, 0, &e), 0);
	ck_assert_int_ne(net_conf_read(J("[1]"), &back, NULL, 0, &e), 0);
	/* a baseline for a nic nothing uses is dropped */
	ck_assert_int_eq(net_conf_read(J("{\"version\":1,\"networks\":{},\"bondings\":{},"
					 "\"baseline\":{\"eth3\":{\"mtu\":1500,\"addrs\":[]}}}"),
				       &back, NULL, 0, &e), 0);
	ck_assert_uint_eq(back.nbase, 0);
}
END_TEST

START_TEST(atomic_file)
{
	static struct net_conf c, back;
	fill(&c);
	char dir[] = "/tmp/vdnet-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char sub[64];
	snprintf(sub, sizeof(sub), "%s/a/b", dir);
	struct vd_buf out = VD_BUF_INIT;
	net_conf_encode(&c, "x", &out);
	ck_assert_int_eq(net_file_write(sub, "safe.json", &out), 0);
	buf_free(&out);
	char boot[16];
	ck_assert_int_eq(net_file_read(sub, "safe.json", &back, boot, sizeof(boot)), 0);
	ck_assert(net_conf_same(&c, &back));
	ck_assert_int_eq(net_file_read(sub, "running.json", &back, NULL, 0), VD_ENOENT);
	/* nothing but the file is left (no temporary) */
	DIR *d = opendir(sub);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' || (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")))
			n++;
	closedir(d);
	ck_assert_int_eq(n, 1);
	/* a corrupt file is refused, not half-read */
	char path[128];
	snprintf(path, sizeof(path), "%s/safe.json", sub);
	FILE *f = fopen(path, "w");
	fputs("{\"version\":1,\"networks\":{\"blue\":{\"nic\"", f);
	fclose(f);
	ck_assert_int_eq(net_file_read(sub, "safe.json", &back, NULL, 0), VD_EPROTO);
	unlink(path);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/a", dir);
	rmdir(sub);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostnet_conf");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, defaults_and_coercions);
	tcase_add_test(tc, bond_options_normalized);
	tcase_add_test(tc, errors_by_cause);
	tcase_add_test(tc, engine_forms);
	tcase_add_test(tc, value_coercions);
	tcase_add_test(tc, resolv_conf_nameservers);
	tcase_add_test(tc, plan_and_rollback_plan);
	tcase_add_test(tc, persistence_round_trip);
	tcase_add_test(tc, atomic_file);
	suite_add_tcase(s, tc);
	return check_run(s);
}
