/* vdsmd/privs.c - the security checks of startup: refusing plaintext on a
 * non-loopback address, and dropping root privileges to `user`. */
#include "daemon.h"

#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../common/log.h"

bool daemon_addr_is_loopback(const char *addr)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (!addr || !*addr || getaddrinfo(addr, NULL, &hints, &ai) != 0)
		return false;
	bool all = ai != NULL;
	for (struct addrinfo *p = ai; p; p = p->ai_next) {
		if (p->ai_family == AF_INET) {
			const struct sockaddr_in *in = (const void *)p->ai_addr;
			all = all && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
		} else if (p->ai_family == AF_INET6) {
			const struct sockaddr_in6 *in6 = (const void *)p->ai_addr;
			const struct in6_addr *a = &in6->sin6_addr;
			all = all && (IN6_IS_ADDR_LOOPBACK(a) ||
				      (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127));
		} else {
			all = false;
		}
	}
	freeaddrinfo(ai);
	return all;
}

int daemon_check_plaintext(const struct vd_config *cfg, char *why, size_t whylen)
{
	if (cfg->tls || daemon_addr_is_loopback(cfg->listen))
		return 0;
	if (!cfg->allow_plaintext) {
		snprintf(why, whylen, "tls is off and listen = %s is not a loopback address: "
			 "refusing to serve plaintext to the network (use tls = on, listen on "
			 "127.0.0.1, or set allow_plaintext = yes)", cfg->listen);
		return VD_EINVAL;
	}
	for (int i = 0; i < 3; i++)
		log_warn("!!! SECURITY WARNING: tls is off on %s (allow_plaintext = yes): "
			 "JSON-RPC is served in PLAINTEXT without client certificates; anyone "
			 "who can reach this port controls this host !!!", cfg->listen);
	return 0;
}

int daemon_drop_privileges(const char *user, char *why, size_t whylen)
{
	if (!user || !*user)
		return 0;
	errno = 0;
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		snprintf(why, whylen, "user \"%s\": %s", user,
			 errno ? strerror(errno) : "no such user");
		return VD_EINVAL;
	}
	uid_t uid = pw->pw_uid;
	gid_t gid = pw->pw_gid;
	if (geteuid() != 0) {
		if (geteuid() == uid && getuid() == uid)
			return 0;  /* already that user */
		snprintf(why, whylen, "user \"%s\": cannot switch users when not started as root",
			 user);
		return VD_EPERM;
	}
	if (initgroups(user, gid) < 0 && setgroups(1, &gid) < 0) {
		snprintf(why, whylen, "user \"%s\": setgroups: %s", user, strerror(errno));
		return VD_EPERM;
	}
	if (setgid(gid) < 0 || setuid(uid) < 0) {
		snprintf(why, whylen, "user \"%s\": setgid/setuid: %s", user, strerror(errno));
		return VD_EPERM;
	}
	/* Make sure there is no way back. */
	if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		snprintf(why, whylen, "user \"%s\": privileges could be regained", user);
		return VD_EPERM;
	}
	log_info("running as user %s (uid %u, gid %u)", user, (unsigned)uid, (unsigned)gid);
	return 0;
}
