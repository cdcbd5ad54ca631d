/* Failure injection shared by the fake libcuda and libnvrtc: a call named
 * in fail_name returns fail_code instead of doing its work. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

static char fail_name[64];
static int fail_code;

/* inject_from reads "name=code" (from the environment) into the setting. */
static void inject_from(const char *v) {
	const char *eq = v ? strchr(v, '=') : NULL;
	if (eq && (size_t)(eq - v) < sizeof fail_name) {
		memcpy(fail_name, v, eq - v);
		fail_name[eq - v] = 0;
		fail_code = atoi(eq + 1);
	}
}

static void inject_set(const char *name, int code) {
	snprintf(fail_name, sizeof fail_name, "%s", name);
	fail_code = code;
}

#define INJECTED(call) (fail_code && strcmp(fail_name, call) == 0)
#define INJECT(call) do { if (INJECTED(call)) return fail_code; } while (0)
