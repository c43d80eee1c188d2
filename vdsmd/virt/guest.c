/* vdsmd/virt/guest.c - verbs that reach into the guest: VM.freeze, VM.thaw
 * (the QEMU guest agent freezes / thaws the guest's mounted filesystems) and
 * VM.screenshot (the first screen's picture through a libvirt stream).
 *
 * Errors as VDSM's vm.py gives them: an agent that is configured but does not
 * answer is code 19 (nonresp), an operation the driver cannot do is 75
 * (unsupportedOperationErr), anything else - a VM without an agent channel
 * among them - 76 (freezeErr) or 77 (thawErr), with libvirt's text.
 * VM.screenshot of a VM that is not running is 6 (VMIsDown).  The desktop
 * verbs of the oVirt guest agent: see virt_verb_desktop. */
#include "virt_int.h"

#include <stdlib.h>
#include <string.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

/* A picture larger than this is refused (VGA at 4K as PPM is ~25 MiB; the
 * engine asks for previews): its base64 must fit one STOMP frame. */
#define SHOT_MAX (10u << 20)
#define SHOT_CHUNK (256u << 10)

static int fs_fail(struct rpc_call *c, enum rpc_err other, const char *what, const char *id)
{
	int code = virt_last_error_code();
	const char *msg = virt_last_error();
	log_warn("virt: unable to %s the filesystems of %s: %s", what, id, msg);
	if (code == VIR_ERR_NO_DOMAIN)
		return rpc_fail(c, RPC_E_NO_VM, "%s", id);
	if (code == VIR_ERR_AGENT_UNRESPONSIVE)
		return rpc_fail(c, RPC_E_AGENT_NONRESP, "%s", msg);
	if (code == VIR_ERR_NO_SUPPORT)
		return rpc_fail(c, RPC_E_UNSUPPORTED, "%s", msg);
	return rpc_fail(c, other, "%s", msg);
}

static int act_freeze(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		      const char *id)
{
	(void)s;
	log_info("virt: freezing the guest filesystems of %s", id);
	int n = virDomainFSFreeze(dom, NULL, 0, 0);
	if (n < 0)
		return fs_fail(c, RPC_E_FREEZE, "freeze", id);
	log_info("virt: %d guest filesystems of %s frozen", n, id);
	return 0;
}

static int act_thaw(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		    const char *id)
{
	(void)s;
	log_info("virt: thawing the guest filesystems of %s", id);
	int n = virDomainFSThaw(dom, NULL, 0, 0);
	if (n < 0)
		return fs_fail(c, RPC_E_THAW, "thaw", id);
	log_info("virt: %d guest filesystems of %s thawed", n, id);
	return 0;
}

int virt_verb_freeze(struct rpc_call *c)
{
	return virt_on_domain(c, act_freeze);
}

int virt_verb_thaw(struct rpc_call *c)
{
	return virt_on_domain(c, act_thaw);
}

/* RFC 4648 base64 of p[0..n) appended to out. */
static void base64_append(struct vd_buf *out, const unsigned char *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	buf_reserve(out, (n + 2) / 3 * 4);
	for (size_t i = 0; i < n; i += 3) {
		size_t left = n - i;
		uint32_t v = (uint32_t)p[i] << 16 | (left > 1 ? (uint32_t)p[i + 1] << 8 : 0) |
			     (left > 2 ? p[i + 2] : 0);
		char q[4] = { tab[v >> 18], tab[(v >> 12) & 63],
			      left > 1 ? tab[(v >> 6) & 63] : '=', left > 2 ? tab[v & 63] : '=' };
		buf_append(out, q, sizeof q);
	}
}

static int act_screenshot(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			  const char *id)
{
	(void)s;
	if (virDomainIsActive(dom) != 1)
		return rpc_fail(c, RPC_E_VM_DOWN, "%s", id);
	int rc = -1;
	char *mime = NULL;
	struct vd_buf img = VD_BUF_INIT, b64 = VD_BUF_INIT;
	virStreamPtr st = virStreamNew(virDomainGetConnect(dom), 0);
	if (!st) {
		virt_fail_libvirt(c, "screenshot", id);
		goto out;
	}
	mime = virDomainScreenshot(dom, st, 0, 0);
	if (!mime) {
		virt_fail_libvirt(c, "screenshot", id);
		goto out;
	}
	for (;;) {
		buf_reserve(&img, SHOT_CHUNK);
		int n = virStreamRecv(st, img.data + img.len, SHOT_CHUNK);
		if (n == 0)
			break;
		if (n < 0) {
			virt_fail_libvirt(c, "screenshot stream", id);
			goto out;
		}
		img.len += (size_t)n;
		if (img.len > SHOT_MAX) {
			rpc_fail(c, RPC_E_GENERAL, "screenshot of %s: larger than %u bytes", id,
				 SHOT_MAX);
			goto out;
		}
	}
	if (virStreamFinish(st) < 0) {
		virt_fail_libvirt(c, "screenshot stream", id);
		goto out;
	}
	base64_append(&b64, (const unsigned char *)img.data, img.len);
	vw_begin_object(c->w);
	vw_keyz(c->w, "data");
	vw_string(c->w, b64.data ? b64.data : "", b64.len);
	vw_kstr(c->w, "encoding", "base64");
	vw_kstr(c->w, "mime_type", mime);
	vw_end_object(c->w);
	log_info("virt: screenshot of %s: %zu bytes of %s", id, img.len, mime);
	rc = 0;
out:
	if (st) {
		if (rc < 0)
			virStreamAbort(st);
		virStreamFree(st);
	}
	free(mime);
	buf_free(&img);
	buf_free(&b64);
	return rc;
}

int virt_verb_screenshot(struct rpc_call *c)
{
	return virt_on_domain(c, act_screenshot);
}

/* VM.desktopLock / desktopLogin / desktopLogoff go to the oVirt guest agent
 * (its ovirt-guest-agent.0 channel), which vdsmd does not speak: for a VM
 * that exists the answer is VDSM's for an agent that does not respond
 * (code 19), as VDSM answers for every guest without that agent (the QEMU
 * guest agent has no such commands). */
static int act_desktop(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		       const char *id)
{
	(void)s;
	(void)dom;
	log_info("virt: %s: no oVirt guest agent to send the desktop command to", id);
	return rpc_fail(c, RPC_E_AGENT_NONRESP, "no oVirt guest agent channel");
}

int virt_verb_desktop(struct rpc_call *c)
{
	return virt_on_domain(c, act_desktop);
}
