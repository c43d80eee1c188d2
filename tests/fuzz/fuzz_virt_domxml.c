/* tests/fuzz/fuzz_virt_domxml.c - libFuzzer target for the domain-XML
 * scanner of vdsmd/virt (domxml.c): any input, NUL-terminated, must parse
 * without reading out of bounds, and what it returns must be bounded:
 * NUL-terminated fixed fields, disks with a target dev, at most two
 * displays of type vnc or spice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../vdsmd/virt/virt_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 20)
		return 0;
	char *xml = malloc(size + 1);
	memcpy(xml, data, size);
	xml[size] = '\0';
	struct virt_domxml x;
	int rc = domxml_parse(xml, &x);
	CHECK(rc == 0 || rc == VD_EPROTO);
	for (unsigned i = 0; i < x.ndisks; i++) {
		CHECK(x.disks[i].dev[0] != '\0');
		CHECK(memchr(x.disks[i].dev, 0, sizeof x.disks[i].dev) != NULL);
		CHECK(memchr(x.disks[i].image_id, 0, sizeof x.disks[i].image_id) != NULL);
		CHECK(x.disks[i].path != NULL && strlen(x.disks[i].path) < 1024);
	}
	for (unsigned i = 0; i < x.nnics; i++) {
		CHECK(x.nics[i].ifname[0] != '\0');
		CHECK(memchr(x.nics[i].mac, 0, sizeof x.nics[i].mac) != NULL);
	}
	CHECK(x.ndisplays <= 2);
	for (unsigned i = 0; i < x.ndisplays; i++)
		CHECK(strcmp(x.displays[i].type, "vnc") == 0 || strcmp(x.displays[i].type, "spice") == 0);
	domxml_free(&x);
	free(xml);
	return 0;
}
