/* vdsmd/main.c - entry point: --help and --version, then the daemon. */
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
	return daemon_main(argc, argv);
}
