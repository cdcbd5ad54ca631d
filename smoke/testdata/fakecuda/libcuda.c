/* A stand-in for the CUDA driver (libcuda.so.1) with the real symbol names
 * and C signatures of cuda.h, for testing the proof's purego bindings
 * without a GPU. Device memory is host memory; cuLaunchKernel runs the
 * proof's gpugate_add kernel on the CPU from its kernelParams, as a device
 * would. It keeps the driver's rules the bindings depend on: a context is
 * current only on the thread that created it, launch faults surface at
 * cuCtxSynchronize, PTX built for a newer CUDA or another GPU does not load.
 *
 * Configuration (environment, read at load; or fake_cuda_set from a test,
 * and fake_cuda_reset for the defaults):
 *   FAKE_CUDA_VERSION  the driver's CUDA version as cuDriverGetVersion
 *                      reports it (default 12080)
 *   FAKE_CUDA_SM       the device's compute capability, e.g. 90 (default)
 *   FAKE_CUDA_TOTALMEM the device's memory in MiB as cuDeviceTotalMem_v2
 *                      reports it (default 24564)
 *   FAKE_CUDA_FAIL     name=code: that call returns code
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct ctx *CUcontext;
typedef struct module *CUmodule;
typedef struct function *CUfunction;
typedef void *CUstream;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
	CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
};

struct ctx { int dev; };
struct function { char name[64]; };
struct module { struct function fn; };

static int version, sm, totalmem, initialized;
static long contexts, modules, allocations;
static __thread CUcontext current;
static CUresult sticky; /* a fault from the last launch, seen at synchronize */

#define MAX_ALLOCS 64
static struct { CUdeviceptr ptr; size_t size; } allocs[MAX_ALLOCS];

void fake_cuda_reset(void) {
	version = 12080;
	sm = 90;
	totalmem = 24564;
	inject_set("", 0);
}

void fake_cuda_set(const char *name, int value) {
	if (strcmp(name, "version") == 0) version = value;
	else if (strcmp(name, "sm") == 0) sm = value;
	else if (strcmp(name, "totalmem") == 0) totalmem = value;
	else inject_set(name, value);
}

/* fake_cuda_outstanding counts contexts, modules and allocations not yet
 * released. */
long fake_cuda_outstanding(void) { return contexts + modules + allocations; }

__attribute__((constructor)) static void configure(void) {
	const char *v;
	fake_cuda_reset();
	if ((v = getenv("FAKE_CUDA_VERSION"))) version = atoi(v);
	if ((v = getenv("FAKE_CUDA_SM"))) sm = atoi(v);
	if ((v = getenv("FAKE_CUDA_TOTALMEM"))) totalmem = atoi(v);
	inject_from(getenv("FAKE_CUDA_FAIL"));
}

#define NEED_CONTEXT() do { if (!initialized) return CUDA_ERROR_NOT_INITIALIZED; if (!current) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

static size_t alloc_size(CUdeviceptr p) {
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].ptr == p) return allocs[i].size;
	return 0;
}

CUresult cuInit(unsigned int flags) {
	INJECT("cuInit");
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	initialized = 1;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) {
	INJECT("cuDriverGetVersion");
	if (!v) return CUDA_ERROR_INVALID_VALUE;
	*v = version;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
	INJECT("cuDeviceGet");
	if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
	if (!dev) return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
	*dev = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
	INJECT("cuDeviceTotalMem_v2");
	if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
	if (!bytes) return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	*bytes = (size_t)totalmem << 20;
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
	INJECT("cuCtxCreate_v2");
	if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx || flags != 0) return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	current = calloc(1, sizeof *current);
	current->dev = dev;
	sticky = CUDA_SUCCESS;
	contexts++;
	*pctx = current;
	return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext c) {
	INJECT("cuCtxDestroy_v2");
	if (!c) return CUDA_ERROR_INVALID_VALUE;
	if (c == current) current = NULL;
	free(c);
	contexts--;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
	INJECT("cuCtxSynchronize");
	NEED_CONTEXT();
	return sticky;
}

/* PTX from NVRTC carries the toolkit release in a comment and the target
 * GPU in .target: a driver older than the release, or a device below the
 * target, cannot load it. */
CUresult cuModuleLoadData(CUmodule *mod, const void *image) {
	INJECT("cuModuleLoadData");
	NEED_CONTEXT();
	if (!mod || !image) return CUDA_ERROR_INVALID_VALUE;
	const char *ptx = image, *p;
	int major, minor, target;
	if (!(p = strstr(ptx, "release ")) || sscanf(p, "release %d.%d", &major, &minor) != 2) return CUDA_ERROR_INVALID_IMAGE;
	if (major * 1000 + minor * 10 > version) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
	if (!(p = strstr(ptx, ".target sm_")) || sscanf(p, ".target sm_%d", &target) != 1) return CUDA_ERROR_INVALID_IMAGE;
	if (target > sm) return CUDA_ERROR_NO_BINARY_FOR_GPU;
	if (!(p = strstr(ptx, ".entry "))) return CUDA_ERROR_INVALID_IMAGE;
	struct module *m = calloc(1, sizeof *m);
	sscanf(p, ".entry %63[A-Za-z0-9_]", m->fn.name);
	modules++;
	*mod = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule m) {
	INJECT("cuModuleUnload");
	if (!m) return CUDA_ERROR_INVALID_HANDLE;
	free(m);
	modules--;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *fn, CUmodule m, const char *name) {
	INJECT("cuModuleGetFunction");
	NEED_CONTEXT();
	if (!fn || !m || !name) return CUDA_ERROR_INVALID_VALUE;
	if (strcmp(m->fn.name, name) != 0) return CUDA_ERROR_NOT_FOUND;
	*fn = &m->fn;
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
	INJECT("cuMemAlloc_v2");
	NEED_CONTEXT();
	if (!p || size == 0) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].ptr == 0) {
			allocs[i].ptr = (CUdeviceptr)(uintptr_t)malloc(size);
			allocs[i].size = size;
			allocations++;
			*p = allocs[i].ptr;
			return CUDA_SUCCESS;
		}
	}
	return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	INJECT("cuMemFree_v2");
	NEED_CONTEXT();
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (p != 0 && allocs[i].ptr == p) {
			free((void *)(uintptr_t)p);
			allocs[i].ptr = 0;
			allocations--;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	INJECT("cuMemcpyHtoD_v2");
	NEED_CONTEXT();
	if (!src || alloc_size(dst) < n) return CUDA_ERROR_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	INJECT("cuMemcpyDtoH_v2");
	NEED_CONTEXT();
	if (sticky) return sticky;
	if (!dst || alloc_size(src) < n) return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, (void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

/* gpugate_add(const float *a, const float *b, float *c, int n): kernelParams
 * holds a pointer to each argument. */
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			CUstream stream, void **params, void **extra) {
	INJECT("cuLaunchKernel");
	NEED_CONTEXT();
	if (!f || strcmp(f->name, "gpugate_add") != 0) return CUDA_ERROR_INVALID_HANDLE;
	if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
	if (!params || extra) return CUDA_ERROR_INVALID_VALUE;
	(void)shared; (void)stream;
	CUdeviceptr a = *(CUdeviceptr *)params[0], b = *(CUdeviceptr *)params[1], c = *(CUdeviceptr *)params[2];
	int n = *(int *)params[3];
	size_t threads = (size_t)gx * gy * gz * bx * by * bz;
	for (size_t i = 0; i < threads && (long)i < n; i++) {
		size_t end = (i + 1) * sizeof(float);
		if (alloc_size(a) < end || alloc_size(b) < end || alloc_size(c) < end) {
			sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
			return CUDA_SUCCESS;
		}
		((float *)(uintptr_t)c)[i] = ((float *)(uintptr_t)a)[i] + ((float *)(uintptr_t)b)[i];
	}
	return CUDA_SUCCESS;
}
