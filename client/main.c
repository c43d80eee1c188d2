/* client/main.c - placeholder until vdsm-client lands. */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "vdsm-client: not built yet\n");
	return 1;
}
