/*
 * devpool_last_error's pointer stays valid across later failing calls: run under
 * valgrind, a read of freed memory fails the test. Exits 0 when every check holds.
 */
#include <stdio.h>
#include <string.h>

#include "devpool.h"

static int fail(const char *what) {
    fprintf(stderr, "last_error: %s\n", what);
    return 1;
}

int main(void) {
    if (devpool_configure("no_such_key=1") == DEVPOOL_OK)
        return fail("a bad key was accepted");
    const char *held = devpool_last_error();
    char copy[512];
    strncpy(copy, held, sizeof copy - 1);
    copy[sizeof copy - 1] = '\0';
    if (strstr(copy, "no_such_key") == NULL)
        return fail("the message does not name the bad key");

    /* Other failing calls replace the thread's message... */
    if (devpool_configure("strategy=no-such-strategy") == DEVPOOL_OK)
        return fail("a bad strategy was accepted");
    if (devpool_configure(NULL) == DEVPOOL_OK)
        return fail("a null configuration was accepted");
    /* ...and the pointer taken before them still reads what it read. */
    if (strcmp(held, copy) != 0)
        return fail("the held message changed under the caller");

    /* Either order of evaluation reads valid memory. */
    printf("%d %s\n", devpool_configure("strategy=also-bad"), devpool_last_error());
    const char *now = devpool_last_error();
    if (strstr(now, "also-bad") == NULL)
        return fail("the newest message is not the last failure");
    printf("%s | %d\n", devpool_last_error(), devpool_configure("other=bad"));

    /* A huge bad value is not echoed whole. */
    static char big[1 << 20];
    memcpy(big, "strategy=", 9);
    memset(big + 9, 'x', sizeof big - 10);
    big[sizeof big - 1] = '\0';
    if (devpool_configure(big) == DEVPOOL_OK)
        return fail("a huge strategy name was accepted");
    if (strlen(devpool_last_error()) > 8192)
        return fail("the message echoes a megabyte of input");
    puts("ok: the held message stayed valid");
    return 0;
}
