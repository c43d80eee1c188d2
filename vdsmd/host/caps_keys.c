/* vdsmd/host/caps_keys.c - Host.getCapabilities keys the engine's
 * VdsBrokerObjectsBuilder.updateVDSDynamicData reads beside the hardware:
 * the storage domain versions and block sizes vdsmd's storage takes, the
 * UUID of the filesystem holding /boot, and (per request) lastClientIface,
 * the device owning the local address of the connection the request came
 * on. */
#include "host_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* VDSM's DOMAIN_VERSIONS (storage/constants.py); vdsmd/storage creates and
 * reads each of them. */
static const int domain_versions[] = { 0, 2, 3, 4, 5 };

/* VDSM's supported_block_size() shape: every storage type VDSM knows, each
 * with the blockSize values StorageDomain.create takes for it.  vdsmd's
 * storage takes 512 and 0 (detect, which finds 512) - never 4096 - so where
 * VDSM offers [0, 512, 4096] (LOCALFS, GLUSTERFS with sanlock 4k support)
 * vdsmd offers [0, 512], and 512 alone where VDSM has no detection. */
static const struct {
	const char *type;
	bool detect;
} block_sizes[] = {
	{ "FCP", false }, { "GLUSTERFS", true }, { "ISCSI", false },
	{ "LOCALFS", true }, { "NFS", false }, { "POSIXFS", false },
};

/* Whether a mount this process sees in root's /proc/self/mountinfo holds
 * /boot (its mount point, the fifth field, is "/" or "/boot"), as findmnt
 * --target=/boot needs: in a chroot whose root is no mount point there is
 * none and findmnt fails.  A tree without mountinfo (a fixture) is taken as
 * having one. */
static bool boot_mounted(const char *root)
{
	char path[HOST_ROOT_MAX + 32];
	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", root);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	char line[4096], mnt[4096];
	bool seen = false;
	while (!seen && fgets(line, sizeof(line), f))
		seen = sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 &&
		       (!strcmp(mnt, "/") || !strcmp(mnt, "/boot"));
	fclose(f);
	return seen;
}

void host_caps_keys_gather(struct host_caps *c, const char *root)
{
	char path[HOST_ROOT_MAX + 64];
	struct stat boot;
	c->boot_uuid[0] = '\0';
	/* findmnt --target=/boot fails without /boot, or without a mount that
	 * holds it: VDSM leaves the key out */
	snprintf(path, sizeof(path), "%s/boot", root);
	c->has_boot_uuid = stat(path, &boot) == 0 && boot_mounted(root);
	if (!c->has_boot_uuid)
		return;
	/* the filesystem's UUID: the udev link naming its block device ("" when
	 * it has none: overlay, tmpfs, a btrfs subvolume) */
	snprintf(path, sizeof(path), "%s/dev/disk/by-uuid", root);
	DIR *dir = opendir(path);
	if (!dir)
		return;
	struct dirent *de;
	while ((de = readdir(dir))) {
		struct stat st;
		size_t n = strlen(de->d_name);
		if (de->d_name[0] == '.' || n >= sizeof(c->boot_uuid))
			continue;
		if (fstatat(dirfd(dir), de->d_name, &st, 0) == 0 && S_ISBLK(st.st_mode) &&
		    st.st_rdev == boot.st_dev) {
			memcpy(c->boot_uuid, de->d_name, n + 1);  /* n checked above */
			break;
		}
	}
	closedir(dir);
}

void host_caps_keys_encode(const struct host_caps *c, struct vd_writer *w)
{
	vw_keyz(w, "domain_versions");
	vw_begin_array(w);
	for (size_t i = 0; i < VD_ARRAY_SIZE(domain_versions); i++)
		vw_int(w, domain_versions[i]);
	vw_end_array(w);
	vw_keyz(w, "supported_block_size");
	vw_begin_object(w);
	for (size_t i = 0; i < VD_ARRAY_SIZE(block_sizes); i++) {
		vw_keyz(w, block_sizes[i].type);
		vw_begin_array(w);
		if (block_sizes[i].detect)
			vw_int(w, 0);
		vw_int(w, 512);
		vw_end_array(w);
	}
	vw_end_object(w);
	if (c->has_boot_uuid)
		vw_kstr(w, "boot_uuid", c->boot_uuid);
}

void host_device_by_ip(const char *ip, char *out, size_t outlen)
{
	out[0] = '\0';
	struct ifaddrs *all;
	if (!ip || !ip[0] || getifaddrs(&all) != 0)
		return;
	for (struct ifaddrs *a = all; a; a = a->ifa_next) {
		char text[INET6_ADDRSTRLEN];
		const struct sockaddr *sa = a->ifa_addr;
		if (!sa || !a->ifa_name)
			continue;
		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
				  text, sizeof(text));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
				  text, sizeof(text));
		else
			continue;
		if (strcmp(text, ip) == 0) {
			snprintf(out, outlen, "%s", a->ifa_name);
			break;
		}
	}
	freeifaddrs(all);
}

bool host_ipv6_supported(void)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}
