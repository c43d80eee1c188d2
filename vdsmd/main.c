/* vdsmd/main.c - placeholder until the network core lands. */
#include <stdio.h>
#include "vdsmd.h"

int main(void)
{
	fprintf(stderr, "vdsmd: not built yet\n");
	return 1;
}
