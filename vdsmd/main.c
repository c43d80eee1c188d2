/* vdsmd/main.c - entry point: --help and --version, then the daemon. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "daemon.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("vdsmd %s - host agent: JSON-RPC over STOMP and HTTP on one port\n\n",
			       VDSMD_VERSION);
			config_usage(stdout);
			printf("\nSignals: SIGTERM/SIGINT stop gracefully, SIGHUP reopens the log file.\n");
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
			printf("vdsmd %s\n", VDSMD_VERSION);
			return 0;
		}
	}
	/* Large replies (a cached 1000-VM Host.getAllVmStats is ~1.5 MB) pass
	 * through the engine's scratch buffer and the connection's output
	 * buffer, both released after the write so that idle connections hold
	 * no memory.  With glibc's defaults those blocks are mmapped and
	 * unmapped (or the heap top trimmed) on every reply, so each reply
	 * page-faults its buffers in again: ~75% of the cached path's CPU.
	 * Serve blocks up to 16 MiB (the default frame limit) from the heap
	 * and trim the heap only past 64 MiB of free top: freed buffers are
	 * reused warm.  Measured at 1000 VMs, 4 connections: server CPU per
	 * cached reply 1815 -> 473 us, p99 97 -> 22 ms.  Fixed values also stop glibc's
	 * dynamic threshold from drifting with the reply sizes. */
	mallopt(M_MMAP_THRESHOLD, 16 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	return daemon_main(argc, argv);
}
