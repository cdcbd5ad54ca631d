/* A stand-in for NVRTC's builtins library (libnvrtc-builtins.so.M.m), which
 * NVRTC loads by its soname when it compiles. */
int fake_nvrtc_builtins(void) { return 1; }
