/* A stand-in for NVRTC (libnvrtc.so.12) with the real symbol names and C
 * signatures of nvrtc.h, for testing the proof's purego bindings without a
 * GPU. It "compiles" only a source declaring one extern "C" __global__
 * kernel (gpugate_add or gpugate_headers), and --gpu-architecture=
 * compute_XY must be given; every #include <...> must name a file under
 * one of the --include-path= directories, or it fails with NVRTC's
 * "cannot open source file" log; the PTX names the release, the target
 * and the kernel the way NVRTC's does. Like
 * NVRTC it loads its builtins library (libnvrtc-builtins.so.M.m) by soname
 * when it compiles, and fails without it.
 *
 * Configuration (environment, read at load; or fake_nvrtc_set from a test,
 * and fake_nvrtc_reset for the defaults):
 *   FAKE_NVRTC_VERSION  major*1000+minor*10 (default 12080)
 *   FAKE_NVRTC_FAIL     name=code: that call returns code; a failed
 *                       nvrtcCompileProgram leaves a log
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"

typedef int nvrtcResult;
typedef struct program *nvrtcProgram;

enum {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6,
	NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
};

struct program { char *src, *name, *ptx, *log; };

static int version;
static long programs;

void fake_nvrtc_reset(void) {
	version = 12080;
	inject_set("", 0);
}

void fake_nvrtc_set(const char *name, int value) {
	if (strcmp(name, "version") == 0) version = value;
	else inject_set(name, value);
}

long fake_nvrtc_outstanding(void) { return programs; }

__attribute__((constructor)) static void configure(void) {
	const char *v;
	fake_nvrtc_reset();
	if ((v = getenv("FAKE_NVRTC_VERSION"))) version = atoi(v);
	inject_from(getenv("FAKE_NVRTC_FAIL"));
}

static char *copy_str(const char *s) { return s ? strcpy(malloc(strlen(s) + 1), s) : NULL; }

nvrtcResult nvrtcVersion(int *major, int *minor) {
	INJECT("nvrtcVersion");
	if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
	*major = version / 1000;
	*minor = version % 1000 / 10;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int numHeaders,
			       const char *const *headers, const char *const *includeNames) {
	INJECT("nvrtcCreateProgram");
	if (!prog || !src || numHeaders < 0 || (numHeaders > 0 && (!headers || !includeNames)))
		return NVRTC_ERROR_INVALID_INPUT;
	struct program *p = calloc(1, sizeof *p);
	p->src = copy_str(src);
	p->name = copy_str(name ? name : "default_program");
	programs++;
	*prog = p;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int numOptions, const char *const *options) {
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	if (numOptions < 0 || (numOptions > 0 && !options)) return NVRTC_ERROR_INVALID_INPUT;
	int arch = 0, nincludes = 0;
	const char *includes[8];
	for (int i = 0; i < numOptions; i++) {
		if (!options[i]) return NVRTC_ERROR_INVALID_INPUT;
		if (strncmp(options[i], "--gpu-architecture=compute_", 27) == 0) {
			if (sscanf(options[i] + 27, "%d", &arch) != 1) return NVRTC_ERROR_INVALID_OPTION;
		} else if (strncmp(options[i], "--include-path=", 15) == 0 && nincludes < 8) {
			includes[nincludes++] = options[i] + 15;
		} else if (strncmp(options[i], "--std=", 6) != 0) {
			return NVRTC_ERROR_INVALID_OPTION;
		}
	}
	char log[512] = "", builtins[64], kernel[64] = "";
	snprintf(builtins, sizeof builtins, "libnvrtc-builtins.so.%d.%d", version / 1000, version % 1000 / 10);
	if (!dlopen(builtins, RTLD_NOW)) return NVRTC_ERROR_BUILTIN_OPERATION_FAILURE;
	const char *k = strstr(p->src, "extern \"C\" __global__ void ");
	if (k) sscanf(k + strlen("extern \"C\" __global__ void "), "%63[A-Za-z0-9_]", kernel);
	if (INJECTED("nvrtcCompileProgram"))
		snprintf(log, sizeof log, "%s(1): error: injected failure\n", p->name);
	else if (strcmp(kernel, "gpugate_add") != 0 && strcmp(kernel, "gpugate_headers") != 0)
		snprintf(log, sizeof log, "%s(1): error: no extern \"C\" kernel gpugate_add or gpugate_headers\n", p->name);
	else if (!arch)
		snprintf(log, sizeof log, "nvrtc: error: no --gpu-architecture=compute_XY\n");
	/* Each #include <name> must resolve under an include path. */
	for (const char *inc = p->src; !log[0] && (inc = strstr(inc, "#include <")); ) {
		char name[256], path[1024];
		inc += 10;
		if (sscanf(inc, "%255[^>\n]", name) != 1) break;
		int found = 0;
		for (int i = 0; i < nincludes && !found; i++) {
			snprintf(path, sizeof path, "%s/%s", includes[i], name);
			FILE *f = fopen(path, "r");
			if (f) { found = 1; fclose(f); }
		}
		if (!found)
			snprintf(log, sizeof log, "%s(1): catastrophic error: cannot open source file \"%s\"\n", p->name, name);
	}
	free(p->log);
	p->log = copy_str(log);
	if (log[0]) return INJECTED("nvrtcCompileProgram") ? fail_code : NVRTC_ERROR_COMPILATION;
	char ptx[512];
	snprintf(ptx, sizeof ptx,
		 "//\n// Generated by NVIDIA NVVM Compiler\n//\n// Cuda compilation tools, release %d.%d, V%d.%d.0\n"
		 "// Based on NVVM 7.0.1\n//\n\n.version 8.7\n.target sm_%d\n.address_size 64\n\n"
		 ".visible .entry %s(\n\t.param .u64 a,\n\t.param .u64 b,\n\t.param .u64 c,\n\t.param .u32 n\n)\n{\n\tret;\n}\n",
		 version / 1000, version % 1000 / 10, version / 1000, version % 1000 / 10, arch, kernel);
	free(p->ptx);
	p->ptx = copy_str(ptx);
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t *size) {
	INJECT("nvrtcGetPTXSize");
	if (!p || !size) return NVRTC_ERROR_INVALID_INPUT;
	if (!p->ptx) return NVRTC_ERROR_INVALID_PROGRAM;
	*size = strlen(p->ptx) + 1;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram p, char *ptx) {
	INJECT("nvrtcGetPTX");
	if (!p || !ptx) return NVRTC_ERROR_INVALID_INPUT;
	if (!p->ptx) return NVRTC_ERROR_INVALID_PROGRAM;
	memcpy(ptx, p->ptx, strlen(p->ptx) + 1);
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t *size) {
	if (!p || !size) return NVRTC_ERROR_INVALID_INPUT;
	*size = (p->log ? strlen(p->log) : 0) + 1;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char *log) {
	if (!p || !log) return NVRTC_ERROR_INVALID_INPUT;
	strcpy(log, p->log ? p->log : "");
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
	if (!prog || !*prog) return NVRTC_ERROR_INVALID_PROGRAM;
	struct program *p = *prog;
	free(p->src); free(p->name); free(p->ptx); free(p->log); free(p);
	*prog = NULL;
	programs--;
	return NVRTC_SUCCESS;
}
